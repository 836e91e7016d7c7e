"""The tools that run or read experiments, each named like its logic in research.experiments
(server/experiments.py)."""

from autoresearch_mcp.contract.arguments import GetExperimentHistoryArgs, RunBenchmarkArgs, RunExperimentArgs
from autoresearch_mcp.contract.models import ExperimentResult, HistoryPage, Run
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tools.calls import heartbeat


@heartbeat("experiment")
def run_experiment(research: Research, run: Run, args: RunExperimentArgs) -> ExperimentResult:
    return research.experiments.run_experiment(
        run, args.params, args.note, base=args.base, remeasure=args.remeasure
    )


@heartbeat("benchmark")
def run_benchmark(research: Research, run: Run, args: RunBenchmarkArgs) -> ExperimentResult:
    return research.experiments.run_benchmark(run, remeasure=args.remeasure)


def get_experiment_history(research: Research, run: Run, args: GetExperimentHistoryArgs) -> HistoryPage:
    return research.experiments.get_experiment_history(run, args.last, args.offset, args.order, args.status)
