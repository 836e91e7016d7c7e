"""Re-evaluation (start_run's `reeval_seeds`): a would-be best must hold up on other seeds.

Where the metric varies with the seed (XGBoost with row or column subsampling), one lucky seed can
make a new best that a rerun would not confirm. With reeval_seeds=k, an experiment that would become
the best is run again on k more seeds, each recorded as its own experiment (each costs budget, and says
whose re-evaluation it is in its note); it becomes the best only when the mean of its k+1 metrics beats
the current best's mean. Every re-evaluation in a run uses the same seeds (the run's seed + 1..k), so
candidates are compared on common seeds. It is the `tell` step of every experiment's lifecycle
(experiments.py): run_experiment, run_benchmark and a job from submit_training_job alike; a job's
re-evaluations are measured where the job was.
"""

import statistics
from typing import TYPE_CHECKING

from autoresearch_mcp.contract.arguments import MAX_REEVAL_SEEDS
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Experiment, ExperimentResult
from autoresearch_mcp.server.store import BestChanged, Keep, better
from autoresearch_mcp.server.tasks.base import Verdict

if TYPE_CHECKING:
    from autoresearch_mcp.server.experiments import ExperimentService, Measure, Measured, Trial

__all__ = ["MAX_REEVAL_SEEDS", "reeval_seed", "reevaluate"]


def _not_yet(best: object) -> Verdict:
    return Verdict(False, "not kept yet: the mean over the re-evaluations decides")


def reeval_seed(run_seed: int, index: int) -> int:
    return (run_seed + index) % 2**31


def reevaluate(
    service: "ExperimentService", trial: "Trial", measured: "Measured", seeds: int, measure: "Measure"
) -> ExperimentResult:
    """Record `trial` (not kept yet), measure its re-evaluations, then decide on the mean."""
    first = service.record(trial, measured, _not_yet)
    original = first.experiment
    if original.status != "ok" or original.metric is None:  # recording it failed: nothing to confirm
        return service.conclude(trial.run, original).model_copy(update={"message": first.why})
    values, done = [original.metric], []
    stopped: str | None = None
    for index in range(1, seeds + 1):
        seed = reeval_seed(trial.run.seed, index)
        note = f"re-evaluation {index}/{seeds} of #{original.iteration} (seed {seed})"
        try:
            again = service.ask_again(trial, seed, note)
        except ResearchError as exc:  # the budget ran out, or the run was finished meanwhile
            stopped = f"{exc.kind}: {str(exc).split('. ')[0]}"
            break
        recorded = service.record(again, measure(again), _not_yet).experiment
        service.events.experiment_ended(service.store.get_run(trial.run.id), recorded)
        done.append(recorded)
        if recorded.status != "ok" or recorded.metric is None:
            break
        values.append(recorded.metric)
    final, message = _decide(service, trial, original, values, done, seeds, stopped)
    return service.conclude(trial.run, final).model_copy(update={"reevaluations": done, "message": message})


def _decide(
    service: "ExperimentService",
    trial: "Trial",
    original: Experiment,
    values: list[float],
    done: list[Experiment],
    seeds: int,
    stopped: str | None,
) -> tuple[Experiment, str]:
    run = trial.run
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
    summary = {f"{metric}_mean": round(mean, 6), "evaluations": float(len(values))}
    while True:
        best = service.store.incumbent(run.id, run.config)
        kept = best is None or better(mean, best.value, direction)
        try:
            keep = Keep(kept=kept, over=None if best is None else best.experiment.id)
            final = service.store.decide_keep(original.id, keep, summary)
            break
        except BestChanged:  # another experiment became the best meanwhile: compare with it
            continue
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
