"""How a tool call runs: on the event loop, on a worker thread, or on one with a heartbeat of progress;
and a refusal of the run logic as the error result a model reads and a program tells apart."""

from collections.abc import Callable
from typing import Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent

from autoresearch_mcp.contract.errors import REFUSAL_META, ResearchError

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., object])

# loop: a handful of indexed reads, cheaper than the hop to a thread (which under load was the largest
# part of a call: benchmarks/load_test.md); thread: the default; heartbeat: long work (a training).
Runs = Literal["loop", "thread", "heartbeat"]
PROGRESS_EVERY_S = 2.0


def on_the_loop(fn: F) -> F:
    """The tool runs on the event loop, not a worker thread."""
    fn.__tool_runs__ = ("loop", "")  # type: ignore[attr-defined]
    return fn


def heartbeat(label: str) -> Callable[[F], F]:
    """The tool runs on a worker thread and, while it runs, tells the caller it is still `label`."""

    def mark(fn: F) -> F:
        fn.__tool_runs__ = ("heartbeat", label)  # type: ignore[attr-defined]
        return fn

    return mark


def how_it_runs(fn: Callable[..., object]) -> tuple[Runs, str]:
    runs: tuple[Runs, str] = getattr(fn, "__tool_runs__", ("thread", ""))
    return runs


def refusal_result(exc: ResearchError) -> CallToolResult:
    """An error result: the message for the model, the refusal's kind and detail for programs."""
    refusal = exc.refusal()
    return CallToolResult(
        content=[TextContent(type="text", text=refusal.message)],
        _meta={REFUSAL_META: refusal.model_dump(mode="json")},
        is_error=True,
    )


async def with_progress(ctx: Context, label: str, fn: Callable[[], R]) -> R:
    """Run `fn` in a worker thread and, while it runs, send the caller an MCP progress notification
    every PROGRESS_EVERY_S seconds (when the request asked for progress): hosts give up on a request
    that stays silent for about a minute, and one training can take that long."""
    start = anyio.current_time()
    result: R
    error: ResearchError | None = None

    async def beat() -> None:
        while True:
            await anyio.sleep(PROGRESS_EVERY_S)
            elapsed = anyio.current_time() - start
            await ctx.report_progress(elapsed, None, f"{label}: running for {elapsed:.0f} s")

    async with anyio.create_task_group() as group:
        group.start_soon(beat)
        try:
            result = await anyio.to_thread.run_sync(fn)
        except ResearchError as exc:  # raised outside the group, so the caller sees it unwrapped
            error = exc
        finally:
            group.cancel_scope.cancel()
    if error is not None:
        raise error
    return result
