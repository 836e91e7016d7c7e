"""Re-evaluation (start_run's `reeval_seeds`): a would-be best must hold up on other seeds.

Where the metric varies with the seed (XGBoost with row or column subsampling), one lucky seed can
make a new best that a rerun would not confirm. With reeval_seeds=k, an experiment that would become
the best is run again on k more seeds, each recorded as its own experiment (each costs budget, and says
whose re-evaluation it is in its note); it becomes the best only when the mean of its k+1 metrics beats
the current best's mean. Every re-evaluation in a run uses the same seeds (the run's seed + 1..k), so
candidates are compared on common seeds. Runs through run_experiment / run_benchmark; a job submitted
with submit_training_job is kept by the task's rule on its own metric.
"""

import statistics
import time
from typing import TYPE_CHECKING

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Experiment, ExperimentResult
from autoresearch_mcp.server.store import Incumbent, better
from autoresearch_mcp.server.tasks.base import Outcome

if TYPE_CHECKING:
    from autoresearch_mcp.server.runs import PreparedExperiment, RunService

MAX_REEVAL_SEEDS = 10


def reeval_seed(run_seed: int, index: int) -> int:
    return (run_seed + index) % 2**31


def reevaluate(
    service: "RunService", prepared: "PreparedExperiment", outcome: Outcome, duration_s: float, seeds: int
) -> ExperimentResult:
    """Record `prepared` (not kept yet), run its re-evaluations, then decide on the mean."""
    store, first = service.store, prepared.experiment
    run_id = first.run_id
    original = service.record(first.id, outcome, duration_s, keep=lambda best: False)
    if original.status != "ok" or original.metric is None:  # recording it failed: nothing to confirm
        return service.result(run_id, original)
    values, done = [original.metric], []
    stopped: str | None = None
    for index in range(1, seeds + 1):
        seed = reeval_seed(prepared.ctx.seed, index)
        note = f"re-evaluation {index}/{seeds} of #{original.iteration} (seed {seed})"
        try:
            exp = store.reserve_experiment(
                run_id, original.params, original.artifact_version, note, repeat_ok=True
            )
        except ResearchError as exc:  # the budget ran out, or the run was finished meanwhile
            stopped = f"{exc.kind}: {str(exc).split('. ')[0]}"
            break
        run = store.get_run(run_id)
        service.events.experiment_started(run, exp)
        ctx = prepared.ctx.model_copy(
            update={"seed": seed, "iteration": exp.iteration, "options": run.config["options"]}
        )
        started = time.monotonic()
        result = service.execute(prepared.task, prepared.params, prepared.source, ctx)
        recorded = service.record(
            exp.id, result, round(time.monotonic() - started, 3), keep=lambda best: False
        )
        service.events.experiment_ended(store.get_run(run_id), recorded)
        done.append(recorded)
        if recorded.status != "ok" or recorded.metric is None:
            break
        values.append(recorded.metric)
    final, message = _decide(service, original, values, done, seeds, stopped)
    return service.result(run_id, final).model_copy(update={"reevaluations": done, "message": message})


def _decide(
    service: "RunService",
    original: Experiment,
    values: list[float],
    done: list[Experiment],
    seeds: int,
    stopped: str | None,
) -> tuple[Experiment, str]:
    run = service.store.get_run(original.run_id)
    metric, direction = run.metric_name, run.direction
    which = ", ".join(f"#{e.iteration}" for e in done) or "none"
    failed = next((e for e in done if e.status != "ok" or e.metric is None), None)
    if failed is not None:
        text = (
            f"re-evaluation #{failed.iteration} of #{original.iteration} ended {failed.status}: "
            f"not kept (re-evaluations: {which})"
        )
        return service.store.get_experiment(original.id), text
    mean = statistics.fmean(values)
    compared: list[Incumbent | None] = []

    def keep(best: Incumbent | None) -> bool:
        compared.append(best)
        return best is None or better(mean, best.value, direction)

    final = service.store.decide_keep(
        original.id, keep, {f"{metric}_mean": round(mean, 6), "evaluations": float(len(values))}
    )
    best = compared[0] if compared else None
    against = "no best yet" if best is None else f"the best's {best.value:.4f} (#{best.experiment.iteration})"
    text = (
        f"re-evaluated on {len(done)} more seed(s) ({which}): mean {metric} {mean:.4f} over "
        f"{len(values)} vs {against}: {'kept' if final.kept else 'not kept'}"
    )
    if stopped is not None:
        text += (
            f". The re-evaluations stopped after {len(done)} of {seeds} ({stopped}), so the mean is over "
            f"{len(values)} evaluation(s)"
        )
    return final, text
