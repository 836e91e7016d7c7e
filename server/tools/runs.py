"""Tools about runs: start_run, list_runs, get_run_summary, add_note, finish_run."""

from typing import Annotated, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from autoresearch_mcp.contract.models import Note, Run, RunList, RunStatus, StartedRun, SummaryText
from autoresearch_mcp.server.reeval import MAX_REEVAL_SEEDS
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tasks.registry import task_names
from autoresearch_mcp.server.tools.common import (
    ADDITIVE,
    ADDITIVE_IDEMPOTENT,
    READ_ONLY,
    RunId,
    RunResolver,
    refusals,
    with_progress,
)


def register(mcp: MCPServer, research: Research, run_for: RunResolver) -> None:
    service = research.runs
    # The schema advertises the known names, but the run logic checks the name: a Literal here made the
    # SDK answer an unknown task with its own validation dump, without the `unknown_task` refusal.
    TaskName = Annotated[
        str,
        Field(
            min_length=1,
            max_length=100,
            description="which task to run",
            json_schema_extra={"enum": task_names(research.settings.task_settings())},
        ),
    ]

    @mcp.tool(annotations=ADDITIVE)
    @refusals
    async def start_run(
        ctx: Context,
        task: TaskName,
        budget: Annotated[
            int, Field(ge=1, le=10_000, description="experiments the run may record (refusals are free)")
        ] = 15,
        target: Annotated[
            float | None,
            Field(allow_inf_nan=False, description="the run converges when the metric reaches this"),
        ] = None,
        seed: Annotated[
            int,
            Field(
                ge=0,
                le=2**31 - 1,
                description="the run's seed (given to train.py, e.g. as the model's random_state)",
            ),
        ] = 42,
        name: Annotated[
            str | None, Field(max_length=100, description="a label for people, e.g. who started it and why")
        ] = None,
        reeval_seeds: Annotated[
            int,
            Field(
                ge=0,
                le=MAX_REEVAL_SEEDS,
                description="re-run a would-be new best on this many more seeds (each costs budget) and "
                "keep it only if the mean beats the best's; 0 = off",
            ),
        ] = 0,
        from_run: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=64,
                description='an earlier run of the same task to continue from (its id, or "latest"): its '
                "best is measured again as this run's experiment #1 (one unit of budget), and the summary "
                "shows its best, strategy notes and failed approaches",
            ),
        ] = None,
        llm: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=100,
                description="who proposes the experiments, recorded for people reading the run later (e.g."
                " 'anthropic:claude-haiku-4-5'; 'scripted' marks the deterministic test double)",
            ),
        ] = None,
    ) -> StartedRun:
        """Start an autonomous run on a task and return its run_id: pass that run_id to every later call
        (the server may hold other runs at the same time).

        With from_run, the run starts where an earlier run of the task left off: before this returns, the
        earlier best (its params, on its train.py) is re-measured as experiment #1, which costs one unit
        of this run's budget; the summary carries the earlier best, notes and failed approaches."""

        def start() -> tuple[Run, str]:
            return service.start_run(
                task, budget, target, seed, name, reeval_seeds=reeval_seeds, from_run=from_run, llm=llm
            )

        # With from_run, an experiment runs before this returns: progress keeps the host waiting.
        run, summary = await (
            with_progress(ctx, "re-measure", start) if from_run else anyio.to_thread.run_sync(start)
        )
        run_for.remember(ctx, run.id)
        spec = service.task(task)
        return StartedRun(
            run_id=run.id,
            summary=summary,
            task_description=spec.describe(),
            metric=spec.metric,
            experiment_tool=spec.experiment_tool,
            from_run=run.from_run,
        )

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    def list_runs(
        status: Annotated[RunStatus | None, Field(description="only runs with this status")] = None,
    ) -> RunList:
        """Runs with task, status, best result and budget used, newest first."""
        return RunList(runs=service.list_runs(status))

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def get_run_summary(ctx: Context, run_id: RunId = None) -> SummaryText:
        """The compact, bounded summary of a run (same as the summary resource)."""
        # On the event loop, not a worker thread: a handful of indexed reads (well under a millisecond
        # at any length of run) cost less than the hop to a thread, which under load was the largest
        # part of a call (benchmarks/load_test.md).
        resolved = run_for(ctx, run_id)
        return SummaryText(run_id=resolved, summary=service.summary(resolved))

    @mcp.tool(annotations=ADDITIVE)
    @refusals
    def add_note(
        ctx: Context,
        text: Annotated[str, Field(min_length=1, max_length=2000, description="the note")],
        kind: Annotated[
            Literal["strategy", "failed"], Field(description="a plan, or an approach that failed")
        ] = "strategy",
        run_id: RunId = None,
    ) -> Note:
        """Record a strategy note or a failed approach; the summary shows the latest ones."""
        return service.add_note(run_for(ctx, run_id), text, kind)

    @mcp.tool(annotations=ADDITIVE_IDEMPOTENT)
    @refusals
    def finish_run(
        ctx: Context,
        reason: Annotated[str, Field(min_length=1, max_length=500, description="why the run ends")],
        run_id: RunId = None,
    ) -> SummaryText:
        """End the run (it takes no more experiments) and return its final summary."""
        resolved = run_for(ctx, run_id)
        _, summary = service.finish_run(resolved, reason)
        return SummaryText(run_id=resolved, summary=summary)
