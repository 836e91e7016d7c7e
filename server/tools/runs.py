"""The tools about runs, each named like its logic in research.runs (server/runs.py)."""

from autoresearch_mcp.contract.arguments import (
    AddNoteArgs,
    FinishRunArgs,
    GetRunSummaryArgs,
    ListRunsArgs,
    StartRunArgs,
)
from autoresearch_mcp.contract.models import Note, Run, RunList, StartedRun, SummaryText
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tools.calls import heartbeat, on_the_loop


@heartbeat("re-measure")  # with from_run, an experiment runs before it returns
def start_run(research: Research, args: StartRunArgs) -> StartedRun:
    run, summary = research.runs.start_run(
        args.task,
        args.budget,
        args.target,
        args.seed,
        args.name,
        reeval_seeds=args.reeval_seeds,
        from_run=args.from_run,
        llm=args.llm,
        suggest=args.suggest,
    )
    task = research.tasks(run.task)
    return StartedRun(
        run_id=run.id,
        summary=summary,
        task_description=task.describe(),
        metric=task.metric,
        experiment_tool=task.experiment_tool,
        from_run=run.from_run,
        judged_by=task.judged_by,
        timeout_s=task.time_limit_s(run.config["options"]),
    )


def list_runs(research: Research, args: ListRunsArgs) -> RunList:
    return RunList(runs=research.runs.list_runs(args.status))


@on_the_loop
def get_run_summary(research: Research, run: Run, args: GetRunSummaryArgs) -> SummaryText:
    return SummaryText(run_id=run.id, summary=research.runs.get_run_summary(run))


def add_note(research: Research, run: Run, args: AddNoteArgs) -> Note:
    return research.runs.add_note(run, args.text, args.kind)


def finish_run(research: Research, run: Run, args: FinishRunArgs) -> SummaryText:
    _, summary = research.runs.finish_run(run, args.reason)
    return SummaryText(run_id=run.id, summary=summary)
