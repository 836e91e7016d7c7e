"""What a host sees while research runs: log notifications, resource updates, list changes.

The run logic reports events (events.py); the `Notifier` turns them into MCP notifications, in both
protocol eras an mcp 2.x server speaks:

- Handshake era (up to 2025-11-25: hosts, the Inspector, the conformance suite). A connection sets its
  level with logging/setLevel and subscribes with resources/subscribe; from then on it is sent, on its own
  channel (the GET stream over HTTP), every log at or above its level and an update for each resource it
  subscribed to, whichever client caused them. Every handshake connection hears resources/list_changed.
- Modern era (2026-07-28, mcp.Client's default). Updates and list changes go on the subscription bus
  behind subscriptions/listen. Logs can only ride the request that caused them, and only when that
  request opted in (Client(log_level=...)), at or above the level it asked for.

Logs are small structured dicts (event, run_id, task, iteration, status, metric, ...): never a path, a
token or a traceback. The notifier is called from any thread; it hops onto the server's event loop and
sends everything in the order it happened. One module on purpose: both eras' delivery rules side by side,
so that a change to one is read against the other.
"""

import asyncio
import concurrent.futures
import functools
import logging
import re
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, get_args

from mcp.server import MCPServer, NotificationOptions
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourcesListChanged, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    EmptyResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    RequestId,
    SetLevelRequestParams,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from autoresearch_mcp.contract.models import Experiment, Job, Run
from autoresearch_mcp.contract.tools import Uri
from autoresearch_mcp.server.events import ResearchEvents
from autoresearch_mcp.server.sdk_private import connection_of, lowlevel

log = logging.getLogger(__name__)

LOGGER: Final = "autoresearch"  # the `logger` of every log notification
LEVELS: Final[tuple[LoggingLevel, ...]] = get_args(LoggingLevel)  # debug < info < ... < emergency
REQUEST_LOG_WAIT_S: Final = 5.0  # a request's own log goes out before its result, or gives up
MAX_TEXT: Final = 200
JOB_LEVELS: Final[dict[str, LoggingLevel]] = {"done": "info", "failed": "warning"}  # queued, running: debug
# What one connection may subscribe to: a host follows a few runs' summaries; without a bound, one
# connection held +150 MB of URIs in 0.8 s, until it closed.
MAX_SUBSCRIPTIONS: Final = 100
MAX_URI_CHARS: Final = 512
# A directory part of an absolute path (/home/x/, C:\x\): dropped from texts, the file name stays.
_DIRS = re.compile(r"(?<![\w:/.~-])(?:[A-Za-z]:)?(?:[/\\][^\s/\\'\"`]+)+[/\\]")

Send = Callable[[], Awaitable[None]]


@dataclass
class _Listener:
    """One handshake-era connection: its logging/setLevel level (None: no logs) and subscriptions."""

    level: LoggingLevel | None = None
    uris: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _RequestLog:
    """A modern-era request that opted in to logs, and the levels it accepts."""

    session: ServerSession
    request_id: RequestId
    levels: frozenset[LoggingLevel]


_request_log: ContextVar[_RequestLog | None] = ContextVar("autoresearch_request_log", default=None)


def short(text: str | None) -> str | None:
    """A one-line, bounded text for a log, without the directories of any absolute path."""
    lines = (text or "").strip().splitlines()
    if not lines:
        return None
    line = _DIRS.sub("", lines[0])
    return line if len(line) <= MAX_TEXT else line[: MAX_TEXT - 1] + "…"


def _run_fields(run: Run) -> dict[str, Any]:
    return {"run_id": run.id, "task": run.task}


class Notifier(ResearchEvents):
    """Research events in, MCP notifications out; also serves the methods hosts use to listen."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()  # our own, so events reach it outside any request
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        # weak: a connection that closes without unwinding its exit stack still goes away
        self._listeners: weakref.WeakKeyDictionary[Connection, _Listener] = weakref.WeakKeyDictionary()
        self._queue: deque[tuple[Send, concurrent.futures.Future[None] | None]] = deque()
        self._drainer: asyncio.Task[None] | None = None

    # -- research events -> notifications --------------------------------------------------
    def run_started(self, run: Run) -> None:
        self.log("info", {"event": "run_started", **_run_fields(run), "budget": run.budget})
        self.resources_updated(Uri.RUNS)
        self.resources_list_changed()

    def run_finished(self, run: Run) -> None:
        best = run.best.metric if run.best is not None else None
        data = {"event": "run_finished", **_run_fields(run), "status": run.status, "used": run.used}
        self.log("notice", {**data, "best": best, "reason": short(run.finish_reason)})
        self.resources_updated(Uri.SUMMARY.of(run_id=run.id), Uri.SMALL_SUMMARY.of(run_id=run.id), Uri.RUNS)

    def experiment_started(self, run: Run, experiment: Experiment) -> None:
        data = {"event": "experiment_started", **_run_fields(run), "iteration": experiment.iteration}
        self.log("debug", {**data, "params": experiment.params})

    def experiment_ended(self, run: Run, experiment: Experiment) -> None:
        data = {
            "event": "experiment_ended",
            **_run_fields(run),
            "iteration": experiment.iteration,
            "status": experiment.status,
            "metric": experiment.metric,
            "new_best": experiment.kept,
            "duration_s": experiment.duration_s,
            "budget_left": max(run.budget - run.used, 0),
        }
        self.log("info" if experiment.status == "ok" else "warning", data)
        summaries = (Uri.SUMMARY.of(run_id=run.id), Uri.SMALL_SUMMARY.of(run_id=run.id))
        self.resources_updated(*summaries, Uri.HISTORY.of(run_id=run.id), Uri.RUNS)

    def job_changed(self, job: Job) -> None:
        level = JOB_LEVELS.get(job.status, "debug")
        data = {"event": "job_changed", "job_id": job.id, "run_id": job.run_id, "iteration": job.iteration}
        self.log(level, {**data, "status": job.status, "error": short(job.error)})

    def refused(self, run_id: str | None, tool: str, kind: str, message: str) -> None:
        data = {"event": "refused", "run_id": run_id, "tool": tool, "kind": kind}
        self.log("warning", {**data, "message": short(message)})

    # -- publishing (any thread) -----------------------------------------------------------
    def log(self, level: LoggingLevel, data: dict[str, Any]) -> None:
        params = {"level": level, "logger": LOGGER, "data": data}
        request = _request_log.get()
        if request is not None and level in request.levels:
            notification = LoggingMessageNotification(params=LoggingMessageNotificationParams(**params))
            self._submit(
                lambda: request.session.send_notification(
                    notification, related_request_id=request.request_id
                ),
                wait=True,
            )
        rank = LEVELS.index(level)

        def wants(listener: _Listener) -> bool:
            return listener.level is not None and rank >= LEVELS.index(listener.level)

        self._submit(functools.partial(self._broadcast, "notifications/message", params, wants))

    def resources_updated(self, *uris: str) -> None:
        for uri in map(str, uris):
            self._submit(functools.partial(self._updated, uri))

    def resources_list_changed(self) -> None:
        self._submit(self._list_changed)

    async def _updated(self, uri: str) -> None:
        await self._broadcast("notifications/resources/updated", {"uri": uri}, lambda lis: uri in lis.uris)
        await self.bus.publish(ResourceUpdated(uri))

    async def _list_changed(self) -> None:
        await self._broadcast("notifications/resources/list_changed", None, lambda lis: True)
        await self.bus.publish(ResourcesListChanged())

    async def _broadcast(
        self, method: str, params: dict[str, Any] | None, wants: Callable[[_Listener], bool]
    ) -> None:
        with self._lock:
            targets = [conn for conn, listener in list(self._listeners.items()) if wants(listener)]
        for conn in targets:
            await conn.notify(method, params)  # best effort: never raises, drops on a closed channel

    def _submit(self, send: Send, *, wait: bool = False) -> None:
        """Queue `send` on the server's loop; the queue keeps notifications in order. With `wait`,
        a worker thread blocks until it is sent (a request's log must precede the request's result)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return  # no client has spoken yet: no one to tell
        done: concurrent.futures.Future[None] | None = concurrent.futures.Future() if wait else None
        try:
            loop.call_soon_threadsafe(self._enqueue, send, done)
        except RuntimeError:  # the loop closed meanwhile
            return
        if done is not None and not _running_on(loop):
            try:
                done.result(REQUEST_LOG_WAIT_S)
            except concurrent.futures.TimeoutError:
                log.debug("a request-scoped log was not sent within %.0f s", REQUEST_LOG_WAIT_S)

    def _enqueue(self, send: Send, done: concurrent.futures.Future[None] | None) -> None:
        self._queue.append((send, done))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._queue:
            send, done = self._queue.popleft()
            try:
                await send()
            except Exception:  # a notification that cannot go out must not hold up the others
                log.warning("dropped a notification", exc_info=True)
            finally:
                if done is not None:
                    done.set_result(None)

    # -- who listens ------------------------------------------------------------------------
    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Sees every inbound message: learns the server's loop, registers handshake-era connections
        (so they hear list changes), and marks modern-era requests that opted in to logs."""
        self._loop = asyncio.get_running_loop()
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            if ctx.method != "initialize":
                self._listener(ctx)
            return await call_next(ctx)
        if ctx.request_id is None:  # a notification: nothing to answer, nothing to log on
            return await call_next(ctx)
        levels = allowed_log_levels(ctx.protocol_version, ctx.meta)
        if not levels:  # the request did not opt in to logs
            return await call_next(ctx)
        token = _request_log.set(_RequestLog(ctx.session, ctx.request_id, levels))
        try:
            return await call_next(ctx)
        finally:
            _request_log.reset(token)

    def _listener(self, ctx: ServerRequestContext[Any, Any]) -> _Listener:
        conn = connection_of(ctx)
        with self._lock:
            listener = self._listeners.get(conn)
            if listener is None:
                listener = self._listeners[conn] = _Listener()
                conn.exit_stack.callback(self._forget, conn)  # unwound when the connection closes
        return listener

    def _forget(self, conn: Connection) -> None:
        with self._lock:
            self._listeners.pop(conn, None)

    async def on_set_level(
        self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        self._listener(ctx).level = params.level
        return EmptyResult()

    async def on_subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        uri = str(params.uri)
        # Any scheme (a host may subscribe before it knows what we serve; one we never change is never
        # announced): what is bounded is the memory a connection can make us hold.
        if len(uri) > MAX_URI_CHARS:
            raise MCPError(INVALID_PARAMS, f"subscribe to a URI of at most {MAX_URI_CHARS} characters")
        listener = self._listener(ctx)
        with self._lock:
            if uri not in listener.uris and len(listener.uris) >= MAX_SUBSCRIPTIONS:
                raise MCPError(
                    INVALID_PARAMS,
                    f"this connection has {MAX_SUBSCRIPTIONS} subscriptions, the most it may hold:"
                    " unsubscribe from one first",
                )
            listener.uris.add(uri)  # one that never changes is never announced
        return EmptyResult()

    async def on_unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        self._listener(ctx).uris.discard(str(params.uri))
        return EmptyResult()

    def serve_handshake_methods(self, mcp: MCPServer) -> None:
        """Serve logging/setLevel and resources/(un)subscribe to handshake-era clients, and declare
        resources.listChanged and tools.listChanged to them. (Modern clients get listen from the bus given to MCPServer.)"""
        low = lowlevel(mcp)
        low.add_request_handler("logging/setLevel", SetLevelRequestParams, self.on_set_level)
        low.add_request_handler("resources/subscribe", SubscribeRequestParams, self.on_subscribe)
        low.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, self.on_unsubscribe)
        # Handshake-era capabilities come from create_initialization_options() called without
        # NotificationOptions (on HTTP, stdio and in memory alike), so listChanged would read false.
        low.create_initialization_options = functools.partial(  # type: ignore[method-assign]
            type(low).create_initialization_options,
            low,
            NotificationOptions(resources_changed=True, tools_changed=True),
        )


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
