"""What every tool module shares: annotations, the run_id argument, refusals as structured results,
and which run a call means when it names none."""

import functools
import inspect
import re
import threading
import weakref
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar

import anyio
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from autoresearch_mcp.contract.errors import REFUSAL_META, ResearchError
from autoresearch_mcp.server.research import Research

P = ParamSpec("P")
R = TypeVar("R")

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
ADDITIVE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

RunId = Annotated[
    str | None,
    Field(
        default=None,
        min_length=1,
        max_length=64,
        description="the run id from start_run (or list_runs): pass it on every call. Omitted: the run "
        "this connection started, on a connection that keeps a session (one opened with initialize), else "
        "the only running run; with several running and none named, the call is refused with their list",
    ),
]


def refusal_result(exc: ResearchError) -> CallToolResult:
    """An error result: the message for the model, the refusal's kind for programs."""
    refusal = exc.refusal()
    return CallToolResult(
        content=[TextContent(type="text", text=refusal.message)],
        _meta={REFUSAL_META: refusal.model_dump(mode="json")},
        is_error=True,
    )


def description(doc: str | None) -> str | None:
    """A docstring as a tool description: no indentation, each paragraph on one line."""
    if doc is None:
        return None
    return "\n\n".join(" ".join(part.split()) for part in re.split(r"\n\s*\n", inspect.cleandoc(doc)))


def refusals(fn: Callable[P, R]) -> Callable[P, R]:
    """Run-logic refusals become error results carrying their kind (sync and async tools). The
    docstring, which the SDK sends as the description, loses its source indentation."""
    fn.__doc__ = description(fn.__doc__)
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ResearchError as exc:
                return refusal_result(exc)

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
        try:
            return fn(*args, **kwargs)
        except ResearchError as exc:
            return refusal_result(exc)

    return wrapper  # type: ignore[return-value]


PROGRESS_EVERY_S = 2.0


async def with_progress(ctx: Context, label: str, fn: Callable[[], R]) -> R:
    """Run `fn` in a worker thread and, while it runs, send the caller an MCP progress notification
    every PROGRESS_EVERY_S seconds (when the request asked for progress): hosts give up on a request
    that stays silent for about a minute, and one training can take that long."""
    start = anyio.current_time()
    result: R
    error: ResearchError | None = None

    async def heartbeat() -> None:
        while True:
            await anyio.sleep(PROGRESS_EVERY_S)
            elapsed = anyio.current_time() - start
            await ctx.report_progress(elapsed, None, f"{label}: running for {elapsed:.0f} s")

    async with anyio.create_task_group() as group:
        group.start_soon(heartbeat)
        try:
            result = await anyio.to_thread.run_sync(fn)
        except ResearchError as exc:  # raised outside the group, so `refusals` sees it unwrapped
            error = exc
        finally:
            group.cancel_scope.cancel()
    if error is not None:
        raise error
    return result


def task_names_of_kind(research: Research, tool: str) -> str:
    """The registered tasks whose experiments run through `tool`, e.g. 'hpo-covertype'."""
    from autoresearch_mcp.server.tasks.registry import make_task, task_names

    settings = research.settings.task_settings()
    names = [name for name in task_names(settings) if make_task(name, settings).experiment_tool == tool]
    return ", ".join(names) or "none registered"


class RunResolver:
    """Which run a call means: its run_id, else the run this connection started or last used, else the
    only running run (RunService.default_run_id refuses when several are running).

    A connection is known only by what the transport itself established: its initialize parameters,
    an object the server holds for exactly as long as the connection lives (a stdio or in-memory
    connection, or an HTTP session of the handshake protocol, whose session id the SDK issues and checks
    against the credential that opened it). Never by a header: on the 2026-07-28 protocol the SDK does
    not check `mcp-session-id`, so a client could send another's and read or redirect that client's run.
    A call on that protocol has no session and never inherits one. One run is remembered per live
    connection and forgotten with it, so no number of calls can push another connection's out."""

    def __init__(self, research: Research) -> None:
        self.research = research
        # id(initialize params) -> (a weak reference to them, the run); the entry goes when they do
        self._runs: dict[int, tuple[weakref.ref[object], str]] = {}
        self._lock = threading.Lock()

    def _remembered(self, ctx: Context) -> str | None:
        params = ctx.session.client_params
        if params is None:
            return None
        with self._lock:
            entry = self._runs.get(id(params))
        return entry[1] if entry is not None and entry[0]() is params else None

    def remember(self, ctx: Context, run_id: str) -> None:
        params = ctx.session.client_params
        if params is None:
            return
        key = id(params)
        with self._lock:
            entry = self._runs.get(key)
            if entry is not None and entry[0]() is params:
                self._runs[key] = (entry[0], run_id)
                return
            ref = weakref.ref(params, lambda dead: self._forget(key, dead))
            self._runs[key] = (ref, run_id)

    def _forget(self, key: int, dead: "weakref.ref[object]") -> None:
        with self._lock:
            entry = self._runs.get(key)
            if entry is not None and entry[0] is dead:
                del self._runs[key]

    def __len__(self) -> int:
        """Connections with a remembered run."""
        return len(self._runs)

    def __call__(self, ctx: Context, run_id: str | None) -> str:
        resolved = self.research.runs.default_run_id(run_id or self._remembered(ctx))
        self.research.store.get_run(resolved)  # unknown id -> clear error
        self.remember(ctx, resolved)
        return resolved
