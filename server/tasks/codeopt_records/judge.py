"""codeopt-records' verdict on what its harness reported: the report's shape, the outputs checked
against the trusted twin (the first difference, on the small check or on a timed call), the speedup
over the reference and against the current best, each paired call by call."""

import statistics
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from autoresearch_mcp.server.tasks.base import ExecContext, Outcome
from autoresearch_mcp.server.tasks.codeopt_records.records import (
    REFERENCE_SOURCE,
    first_difference,
    make_records,
    process_records_fast,
)
from autoresearch_mcp.server.tasks.intervals import SPEEDUP_LEVEL, paired_ratio_interval

# Every candidate runs once on this many records before anything is timed: a wrong version fails in
# milliseconds, with the first difference on an input small enough to reason about.
CHECK_RECORDS = 200
MAX_CALLS = 1000
Millis = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Calls(BaseModel):
    """What the harness measured: each call's time and its output."""

    model_config = ConfigDict(extra="forbid", strict=True)
    times_ms: list[Millis] = Field(min_length=1, max_length=MAX_CALLS)
    outputs: list[Any] = Field(min_length=1, max_length=MAX_CALLS)
    reference_times_ms: list[Millis] = Field(min_length=1, max_length=MAX_CALLS)
    rival_times_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)
    cpu_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)
    reference_cpu_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)
    rival_cpu_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)
    profile: dict[str, Any] | None = None  # checked by profiles.build_profile


class Failure(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    error: Literal["load", "raised", "type", "protocol", "harness"]
    detail: str = Field(max_length=4000)


class Wrong(BaseModel):
    """The small check's output, which the harness found wrong; judged again here."""

    model_config = ConfigDict(extra="forbid", strict=True)
    error: Literal["wrong"]
    detail: str = Field(max_length=4000)
    n: int = Field(ge=0, le=CHECK_RECORDS)
    seed: int
    output: Any


REPORT = TypeAdapter(Calls | Failure | Wrong)
FAILURES = {
    "load": "train.py failed to load",
    "raised": "process_records raised an exception",
    "protocol": "process_records' process broke the harness's protocol",
    "harness": "the benchmark harness refused the result",
}


def wrong_on_check(report: Wrong) -> Outcome:
    """The small check's output, judged here against the trusted twin: the first difference."""
    difference = first_difference(process_records_fast(make_records(report.n, report.seed)), report.output)
    if difference is None:  # the harness stops early only on a difference; this is not one
        return Outcome(status="crash", error_tail="the benchmark harness stopped on a correct output")
    where = f"the first check, on make_records({report.n}, seed={report.seed})"
    return Outcome(
        status="incorrect", metrics={"correct": 0.0}, error_tail=f"wrong output ({where}): {difference}"
    )


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


def judge(calls: Calls, seeds: list[int], n: int) -> Outcome:
    if len(calls.outputs) != len(seeds):
        return Outcome(status="crash", error_tail="the benchmark harness returned an incomplete result")
    for call, (seed, output) in enumerate(zip(seeds, calls.outputs, strict=True), start=1):
        difference = first_difference(process_records_fast(make_records(n, seed)), output)
        if difference:
            where = f"call {call} of {len(seeds)}, input make_records({n}, seed={seed})"
            return Outcome(
                status="incorrect",
                metrics={"correct": 0.0},
                error_tail=f"wrong output ({where}): {difference}",
            )
    # Reference time / candidate time, pair by pair: the estimate and interval of intervals.py.
    speedup = paired_ratio_interval(timed(calls.reference_times_ms), timed(calls.times_ms), SPEEDUP_LEVEL)
    metrics: dict[str, float] = {
        "speedup": round(speedup.estimate, 4),
        "speedup_low": round(speedup.low, 4),
        "speedup_high": round(speedup.high, 4),
        "time_ms": round(median_ms(calls.times_ms), 4),
        "baseline_ms": round(median_ms(calls.reference_times_ms), 4),
        "correct": 1.0,
        "inputs": float(len(seeds)),
    }
    if calls.cpu_ms is not None and calls.reference_cpu_ms is not None:
        cpu = paired_ratio_interval(timed(calls.reference_cpu_ms), timed(calls.cpu_ms), SPEEDUP_LEVEL)
        metrics.update(
            cpu_ms=round(median_ms(calls.cpu_ms), 4),
            baseline_cpu_ms=round(median_ms(calls.reference_cpu_ms), 4),
            speedup_cpu=round(cpu.estimate, 4),
        )
    return Outcome(
        status="ok",
        metric=metrics["speedup"],
        metrics=metrics,
        samples=[round(t, 4) for t in timed(calls.times_ms)],
    )


def versus_best(calls: Calls, ctx: ExecContext, level: float) -> dict[str, float]:
    """vs_best (low, high): the current best's time over this one's, paired call by call, measured
    side by side (the reference's calls, where the best is the reference); vs_best_iteration says
    which best."""
    if ctx.best_iteration is None:
        return {}
    rival = calls.rival_times_ms if ctx.best_source != REFERENCE_SOURCE else calls.reference_times_ms
    if rival is None or len(rival) != len(calls.times_ms):
        return {}
    versus = paired_ratio_interval(timed(rival), timed(calls.times_ms), level)
    return {
        "vs_best": round(versus.estimate, 4),
        "vs_best_low": round(versus.low, 4),
        "vs_best_high": round(versus.high, 4),
        "vs_best_iteration": float(ctx.best_iteration),
    }


def timed(times_ms: list[float]) -> list[float]:
    return times_ms[1:] or times_ms  # the first call warms up and is not counted


def median_ms(times_ms: list[float]) -> float:
    return statistics.median(timed(times_ms))
