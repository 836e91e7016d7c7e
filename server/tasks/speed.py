"""The verdict of a speed task, whatever its harness: what the harness measured (every call's time,
side by side with the reference's and the current best's on the same fresh inputs), the speedup and its
interval, paired call by call, and the keep rule: a version is kept only when it is surely faster
(intervals.py says why side by side, and which interval). codeopt-records and a task folder's
`[benchmark]` are judged here alike."""

import statistics
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.server.store import Incumbent
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Verdict
from autoresearch_mcp.server.tasks.intervals import (
    SPEEDUP_LEVEL,
    Ratio,
    interval_words,
    median_interval,
    paired_ratio_interval,
    ratio_interval,
)

MAX_CALLS = 1000
# What the keep rule reads (vs_best_*: the best timed beside the candidate; inputs: the calls timed),
# stored for programs; a model reads the verdict's sentence instead.
VERDICT_METRICS = frozenset({"vs_best", "vs_best_low", "vs_best_high", "vs_best_iteration", "inputs"})
# Beside the speedup, times come in pairs (the candidate's, then the original's): a wall time beside a CPU
# time gives a ratio that is neither speedup. `correct` is what status ok already says.
NOT_SHOWN = frozenset({"correct"})
SHOWN_FIRST = ("time_ms", "baseline_ms", "cpu_ms", "baseline_cpu_ms")
Millis = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Timings(BaseModel):
    """What a speed harness measured: each call's time in ms, for the candidate, the reference timed
    beside it and the run's best (the rival, where it was timed), and CPU time where measured."""

    model_config = ConfigDict(extra="forbid", strict=True)
    times_ms: list[Millis] = Field(min_length=1, max_length=MAX_CALLS)
    reference_times_ms: list[Millis] = Field(min_length=1, max_length=MAX_CALLS)
    rival_times_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)
    cpu_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)
    reference_cpu_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)
    rival_cpu_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)

    def unmatched(self) -> bool:
        """Whether some series has another length than the candidate's (a harness bug, or a forgery)."""
        paired = (self.reference_times_ms, self.cpu_ms, self.reference_cpu_ms)
        return any(values is not None and len(values) != len(self.times_ms) for values in paired)


def timing_problem(times_ms: list[float], wall_s: float) -> str | None:
    """The harness's measured call times, added up, must fit in the sandbox run that contained them:
    the runner's clock, outside the sandbox, bounds what anything inside it may report."""
    total_ms = sum(times_ms)
    if total_ms > wall_s * 1000:
        return (
            f"the benchmark harness reported {total_ms:.0f} ms of timed calls in a sandbox run that "
            f"lasted {wall_s * 1000:.0f} ms; the result is refused"
        )
    return None


def timed(times_ms: list[float]) -> list[float]:
    return times_ms[1:] or times_ms  # the first call warms up and is not counted


def median_ms(times_ms: list[float]) -> float:
    return statistics.median(timed(times_ms))


def speed_metrics(timings: Timings, calls: int) -> dict[str, float]:
    """The speedup (reference time / candidate time, pair by pair: the estimate and interval of
    intervals.py), the median times, and the same on CPU time where both were measured."""
    speedup = speedup_interval(timings)
    metrics: dict[str, float] = {
        "speedup": round(speedup.estimate, 4),
        "speedup_low": round(speedup.low, 4),
        "speedup_high": round(speedup.high, 4),
        "time_ms": round(median_ms(timings.times_ms), 4),
        "baseline_ms": round(median_ms(timings.reference_times_ms), 4),
        "correct": 1.0,
        "inputs": float(calls),
    }
    if timings.cpu_ms is not None and timings.reference_cpu_ms is not None:
        cpu = paired_ratio_interval(timed(timings.reference_cpu_ms), timed(timings.cpu_ms), SPEEDUP_LEVEL)
        metrics.update(
            cpu_ms=round(median_ms(timings.cpu_ms), 4),
            baseline_cpu_ms=round(median_ms(timings.reference_cpu_ms), 4),
            speedup_cpu=round(cpu.estimate, 4),
        )
    return metrics


def speedup_interval(timings: Timings) -> Ratio:
    """The speedup over the original and its interval: the one figure every answer, the summary and
    the first keep decision show (the reference's calls over the candidate's, paired, at
    SPEEDUP_LEVEL)."""
    return paired_ratio_interval(timed(timings.reference_times_ms), timed(timings.times_ms), SPEEDUP_LEVEL)


def speed_outcome(timings: Timings, calls: int) -> Outcome:
    metrics = speed_metrics(timings, calls)
    return Outcome(
        status="ok",
        metric=metrics["speedup"],
        metrics=metrics,
        samples=[round(t, 4) for t in timed(timings.times_ms)],
    )


def versus_best(
    timings: Timings, ctx: ExecContext, level: float, best_is_reference: bool
) -> dict[str, float]:
    """vs_best (low, high): the current best's time over this one's, paired call by call, measured
    side by side (the reference's calls, where the best is the reference), at the keep rule's level;
    vs_best_iteration says which best, 0 for the original while the run has no best yet (what the
    run's first result must beat)."""
    rival = timings.reference_times_ms if best_is_reference else timings.rival_times_ms
    if ctx.best_iteration is None:
        rival = timings.reference_times_ms
    if rival is None or len(rival) != len(timings.times_ms):
        return {}
    # The keep rule's level against the original too: the speedup's own interval, shown at the
    # higher SPEEDUP_LEVEL, would make a run's first keep harder than every later one.
    versus = paired_ratio_interval(timed(rival), timed(timings.times_ms), level)
    return {
        "vs_best": round(versus.estimate, 4),
        "vs_best_low": round(versus.low, 4),
        "vs_best_high": round(versus.high, 4),
        "vs_best_iteration": float(ctx.best_iteration or 0),
    }


def speed_verdict(outcome: Outcome, best: Incumbent | None, level: float) -> Verdict | None:
    """A new best only when it is surely faster: the first than the original, a later one than the
    current best (the interval, at the keep rule's level, of the ratio of their time to the
    candidate's lies above 1). Measured side by side when the benchmark timed it beside the candidate;
    else (the best changed while it ran) from the stored timings. None where neither can say (the
    task's plain rule decides)."""
    metrics = outcome.metrics
    if best is None:
        if metrics.get("vs_best_iteration") == 0 and "vs_best_low" in metrics:
            said = _interval(metrics["vs_best"], metrics["vs_best_low"], metrics["vs_best_high"], level)
            return _surely(metrics["vs_best_low"], metrics["vs_best_high"], f"{said} against the original")
        if "speedup_low" not in metrics:  # a record from before the original was timed at this level
            return None
        said = _interval(metrics["speedup"], metrics["speedup_low"], metrics["speedup_high"], SPEEDUP_LEVEL)
        return _surely(metrics["speedup_low"], metrics["speedup_high"], f"{said} against the original")
    against = f"against the best (#{best.experiment.iteration})"
    if metrics.get("vs_best_iteration") == best.experiment.iteration and "vs_best_low" in metrics:
        said = _interval(metrics["vs_best"], metrics["vs_best_low"], metrics["vs_best_high"], level)
        return _surely(metrics["vs_best_low"], metrics["vs_best_high"], f"{said} {against}")
    if best.samples and outcome.samples:
        ratio = ratio_interval(best.samples, outcome.samples, level)
        said = _interval(ratio.estimate, ratio.low, ratio.high, level)
        return _surely(ratio.low, ratio.high, f"{said} {against}, from stored timings")
    return None


def pooled_verdict(best: Incumbent, samples: list[float], level: float) -> Verdict:
    """A re-measurement of the best is no rival to it: not kept, and its timings join the best's
    (Store pools them), narrowing the interval of the best's median time; said with both intervals."""
    said = f"not kept: a re-measurement of the best (#{best.experiment.iteration})"
    if not best.samples or not samples:
        return Verdict(False, f"{said}, whose timings are not stored: nothing to pool")
    pooled = [*best.samples, *samples]
    before, after = median_interval(best.samples, level), median_interval(pooled, level)
    return Verdict(
        False,
        f"{said}: its {len(samples)} timings join the best's, {len(pooled)} now; median "
        f"{statistics.median(pooled):.4g} ms {interval_words(*after)} (was {interval_words(*before)})",
    )


def _interval(estimate: float, low: float, high: float, level: float) -> str:
    """`1.5x [1.31, 1.72] at 95%`: a verdict names its interval's level (the keep rule's, where the
    candidate was timed beside its rival), which may not be that of the speedup shown beside it
    (SPEEDUP_LEVEL): two intervals of one version, each readable for what it claims."""
    return f"{estimate:.4g}x {interval_words(low, high)} at {level:.0%}"


def _surely(low: float, high: float, said: str) -> Verdict:
    """Kept when the whole interval lies above 1; said to be slower when it lies below."""
    if low > 1.0:
        return Verdict(True, f"kept: {said}: surely faster")
    return Verdict(False, f"not kept: {said}: " + ("surely slower" if high < 1.0 else "not surely faster"))
