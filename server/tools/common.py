"""What every tool module shares: annotations, the run_id argument, refusals as structured results,
and which run a call means when it names none."""

import functools
import inspect
from collections import OrderedDict
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar

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
        description="the run (from start_run or list_runs); omitted: the run this connection started or "
        "last used, else the only running run (with several running, the call is refused with the list)",
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


def refusals(fn: Callable[P, R]) -> Callable[P, R]:
    """Run-logic refusals become error results carrying their kind (sync and async tools)."""
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


class RunResolver:
    """Which run a call means: its run_id, else the run this connection started or last used, else the
    only running run (RunService.default_run_id refuses when several are running).

    A connection is known by its HTTP session id, or by its initialize parameters on a handshake
    connection (stdio, in-memory); a call with neither has no session and never inherits one."""

    MAX_SESSIONS = 4096

    def __init__(self, research: Research) -> None:
        self.research = research
        # key -> (the object the key was taken from, kept alive so its id is not reused; run id)
        self._runs: OrderedDict[str, tuple[object, str]] = OrderedDict()

    @staticmethod
    def _key(ctx: Context) -> tuple[str, object] | None:
        headers = ctx.headers
        session_id = headers.get("mcp-session-id") if headers else None
        if session_id:
            return f"http:{session_id}", session_id
        params = ctx.session.client_params
        return (f"conn:{id(params)}", params) if params is not None else None

    def remember(self, ctx: Context, run_id: str) -> None:
        key = self._key(ctx)
        if key is None:
            return
        self._runs[key[0]] = (key[1], run_id)
        self._runs.move_to_end(key[0])
        while len(self._runs) > self.MAX_SESSIONS:
            self._runs.popitem(last=False)

    def __call__(self, ctx: Context, run_id: str | None) -> str:
        key = self._key(ctx)
        remembered = self._runs.get(key[0]) if key else None
        resolved = self.research.runs.default_run_id(run_id or (remembered[1] if remembered else None))
        self.research.store.get_run(resolved)  # unknown id -> clear error
        self.remember(ctx, resolved)
        return resolved
