"""Background jobs: submit_training_job, get_job."""

from typing import Annotated

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from autoresearch_mcp.contract.models import JobInfo
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tools.common import (
    ADDITIVE,
    READ_ONLY,
    RunId,
    RunResolver,
    refusals,
    task_names_of_kind,
)
from autoresearch_mcp.server.tools.experiments import BaseArg, params_type

PROGRESS_EVERY_S = 1.0


def register(mcp: MCPServer, research: Research, run_for: RunResolver) -> None:
    jobs = research.jobs
    Params = params_type(research)

    @mcp.tool(
        annotations=ADDITIVE,
        description=f"For params tasks ({task_names_of_kind(research, 'run_experiment')}): start an "
        "experiment in the background and return its job id at once (poll with get_job). Same rules as "
        "run_experiment: invalid params and exact repeats are refused without cost; a submitted job takes "
        "its unit of budget immediately. Several jobs run at the same time.",
    )
    @refusals
    def submit_training_job(
        ctx: Context,
        params: Params,
        note: Annotated[str | None, Field(max_length=2000, description="why this experiment")] = None,
        base: BaseArg = "defaults",
        run_id: RunId = None,
    ) -> JobInfo:
        return jobs.submit(run_for(ctx, run_id), params, note, base)

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def get_job(
        ctx: Context,
        job_id: Annotated[str, Field(min_length=1, max_length=64, description="from submit_training_job")],
        wait_seconds: Annotated[
            float, Field(ge=0, le=600, description="wait up to this long for the job to end")
        ] = 0,
    ) -> JobInfo:
        """A job's status (queued, running, done, failed) and, once it has ended, its experiment. With
        wait_seconds, it sends progress every second while it waits."""
        job = await anyio.to_thread.run_sync(jobs.jobs.get, job_id)
        deadline = anyio.current_time() + wait_seconds
        while job.status in ("queued", "running") and (left := deadline - anyio.current_time()) > 0:
            job = await anyio.to_thread.run_sync(jobs.wait, job_id, min(left, PROGRESS_EVERY_S))
            waited = wait_seconds - max(deadline - anyio.current_time(), 0)
            where = f" on {job.worker}" if job.worker else ""
            await ctx.report_progress(waited, wait_seconds, f"job {job_id} {job.status}{where}")
        return await anyio.to_thread.run_sync(jobs.info, job_id)
