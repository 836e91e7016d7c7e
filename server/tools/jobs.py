"""MCP glue for background jobs and read-only SQL: submit_training_job, get_job, query_results."""

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import JobInfo, QueryResult
from autoresearch_mcp.server.jobs import JobService
from autoresearch_mcp.server.query import MAX_ROWS, describe_views, query_views

P = ParamSpec("P")
R = TypeVar("R")

PROGRESS_EVERY_S = 1.0


def async_tool_errors(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """app.tool_errors for async tools: run-logic refusals become ToolError."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await fn(*args, **kwargs)
        except ResearchError as exc:
            raise ToolError(str(exc)) from None

    return wrapper


def register_job_tools(
    mcp: MCPServer, jobs: JobService, run_for: Callable[[Context, str | None], str], params_type: Any
) -> None:
    from autoresearch_mcp.server.build import ADDITIVE, READ_ONLY, RunId, tool_errors  # (app imports us)

    @mcp.tool(annotations=ADDITIVE)
    @tool_errors
    def submit_training_job(
        ctx: Context,
        params: params_type,  # type: ignore[valid-type]
        note: Annotated[str | None, Field(max_length=2000, description="why this experiment")] = None,
        run_id: RunId = None,
    ) -> JobInfo:
        """Start an experiment in the background and return its job id at once (poll with get_job).

        Same rules as run_experiment: invalid params and exact repeats are refused without cost; a
        submitted job takes its unit of budget immediately. Several jobs run at the same time."""
        return jobs.submit(run_for(ctx, run_id), params, note)

    @mcp.tool(annotations=READ_ONLY)
    @async_tool_errors
    async def get_job(
        ctx: Context,
        job_id: Annotated[str, Field(min_length=1, max_length=64, description="from submit_training_job")],
        wait_seconds: Annotated[
            float, Field(ge=0, le=600, description="wait up to this long for the job to end")
        ] = 0,
    ) -> JobInfo:
        """A job's status (queued, running, done, failed) and, once it has ended, its experiment."""
        job = await anyio.to_thread.run_sync(jobs.jobs.get, job_id)
        deadline = anyio.current_time() + wait_seconds
        while job.status in ("queued", "running") and (left := deadline - anyio.current_time()) > 0:
            job = await anyio.to_thread.run_sync(jobs.wait, job_id, min(left, PROGRESS_EVERY_S))
            waited = wait_seconds - max(deadline - anyio.current_time(), 0)
            where = f" on {job.worker}" if job.worker else ""
            await ctx.report_progress(waited, wait_seconds, f"job {job_id} {job.status}{where}")
        return await anyio.to_thread.run_sync(jobs.info, job_id)


def register_query_tool(mcp: MCPServer, db_path: Path) -> None:
    from autoresearch_mcp.server.build import READ_ONLY, tool_errors

    @mcp.tool(
        annotations=READ_ONLY,
        description="Read-only SQL (one SELECT; SQLite dialect, json_extract for JSON columns) over "
        "these views of every run:\n" + describe_views() + "\nRaw tables, writes, PRAGMA and ATTACH are "
        "refused; a query stops after 2 s.",
    )
    @tool_errors
    def query_results(
        sql: Annotated[str, Field(min_length=1, max_length=20_000, description="one SELECT statement")],
        max_rows: Annotated[int, Field(ge=1, le=MAX_ROWS, description="rows to return at most")] = 200,
    ) -> QueryResult:
        return query_views(db_path, sql, max_rows)
