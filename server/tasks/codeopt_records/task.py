"""codeopt-records: make a deliberately slow `process_records` faster without changing its output (the
paper's Task 2).

Fixed harness: the record generator, the reference output (computed here, in the server, by a trusted
twin of the reference), the timing (child.py beside this file) and the metric, speedup = the run's
baseline time / the candidate's time, both medians over fresh inputs. Mutable artifact: train.py, which
starts as the slow reference and must keep `def process_records(records)`.

A new best must be faster than the current one beyond the noise (`keeps`): the harness times the
current best beside the candidate, on the same inputs, and the candidate is kept only when the interval
of that ratio lies above 1 (intervals.py says why side by side, and which interval).
"""

import random
import secrets
import statistics
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from autoresearch_mcp.contract.models import AgentProfile, ScriptedPlan
from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.store import Incumbent
from autoresearch_mcp.server.tasks.base import ExecContext, NoParams, Outcome, Task, sandbox_failure
from autoresearch_mcp.server.tasks.codeopt_records import rewrites
from autoresearch_mcp.server.tasks.codeopt_records.child import ALLOWED_IMPORTS, EXTRA_FORBIDDEN_NAMES
from autoresearch_mcp.server.tasks.codeopt_records.profile import PROFILE
from autoresearch_mcp.server.tasks.codeopt_records.records import (
    REFERENCE_SOURCE,
    first_difference,
    make_records,
    process_records_fast,
)
from autoresearch_mcp.server.tasks.intervals import LEVEL, paired_ratio_interval, ratio_interval
from autoresearch_mcp.server.tasks.registry import register

ENTRY = "autoresearch_mcp.server.tasks.codeopt_records.child:run_benchmark"
POLICY = GuardPolicy(
    allowed_imports=ALLOWED_IMPORTS,
    extra_forbidden_names=EXTRA_FORBIDDEN_NAMES,
    max_source_bytes=60_000,
    required_functions={"process_records": ("records",)},
)
DEFAULT_RECORDS = 10_000
DEFAULT_REPEATS = 20
# Plain Python on 10k small dicts needs ~100 MB; a benchmark (21 calls, each in a fork that makes its own
# input) takes about 2 s, so 30 s leaves room for a candidate several times slower than the reference.
DEFAULT_LIMITS = Limits(wall_s=30, cpu_s=30, memory_mb=512, output_bytes=16_000, file_mb=8, disk_mb=16)
MAX_CALLS = 1000
Millis = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Calls(BaseModel):
    """What the harness measured: each call's time and its output."""

    model_config = ConfigDict(extra="forbid", strict=True)
    times_ms: list[Millis] = Field(min_length=1, max_length=MAX_CALLS)
    outputs: list[Any] = Field(min_length=1, max_length=MAX_CALLS)
    rival_times_ms: list[Millis] | None = Field(default=None, max_length=MAX_CALLS)


class Failure(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    error: Literal["load", "raised", "type", "protocol", "harness"]
    detail: str = Field(max_length=4000)


REPORT = TypeAdapter(Calls | Failure)
FAILURES = {
    "load": "train.py failed to load",
    "raised": "process_records raised an exception",
    "protocol": "process_records' process broke the harness's protocol",
    "harness": "the benchmark harness refused the result",
}


class CodeOptTask(Task):
    name = "codeopt-records"
    title = "Speed up process_records(records), a slow summary of employee records, keeping its output"
    metric = "speedup"
    direction = "max"
    params_model = NoParams
    experiment_tool = "run_benchmark"
    sandbox_entries = (ENTRY,)
    # The level of the speedup intervals. An identical-code benchmark is kept with chance (1 - level) / 2.
    confidence: ClassVar[float] = LEVEL

    def agent_profile(self) -> AgentProfile:
        return PROFILE

    def scripted_plan(self) -> ScriptedPlan:
        return rewrites.plan()

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        settings = settings or {}
        self.n_records = int(settings.get("codeopt_records") or DEFAULT_RECORDS)
        self.repeats = int(settings.get("codeopt_repeats") or DEFAULT_REPEATS)

    def options(self) -> dict[str, Any]:
        # Larger settings need proportionally more time, and memory for one input of n records.
        scale = max(1.0, self.n_records / DEFAULT_RECORDS * (self.repeats + 1) / (DEFAULT_REPEATS + 1))
        limits = DEFAULT_LIMITS.model_copy(
            update={
                "wall_s": min(DEFAULT_LIMITS.wall_s * scale, 3600.0),
                "cpu_s": min(DEFAULT_LIMITS.cpu_s * scale, 3600.0),
                "memory_mb": max(DEFAULT_LIMITS.memory_mb, 256 + self.n_records // 500),
            }
        )
        return {"n_records": self.n_records, "repeats": self.repeats, "limits": limits.model_dump()}

    def initial_artifact(self) -> str:
        return REFERENCE_SOURCE

    def check_artifact(self, source: str) -> list[str]:
        return check_source(source, POLICY)

    def describe(self) -> str:
        modules = ", ".join(sorted(POLICY.allowed_imports))
        return (
            f"{self.title}. train.py defines process_records(records); the harness calls it on "
            f"{self.n_records} fresh synthetic records per call and reports the median time of "
            f"{self.repeats} calls. The output must equal the original's (same structure and types; "
            "numbers within 1e-9). "
            f"Metric: speedup over the original (higher is better). Imports allowed: {modules}."
        )

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        options = ctx.options
        n = int(options.get("n_records", self.n_records))
        calls = int(options.get("repeats", self.repeats)) + 1  # the first call is an untimed warm-up
        limits = Limits.model_validate(options["limits"]) if "limits" in options else DEFAULT_LIMITS
        # Fresh, unguessable inputs every benchmark: no cache or special case for a known input can pass.
        rng = random.Random(f"{ctx.run_id}:{ctx.seed}:{ctx.iteration}:{secrets.token_hex(16)}")
        seeds = _distinct_seeds(rng, calls)
        state: dict[str, Any] = {}
        baseline = options.get("baseline_ms")
        if baseline is None:  # measured once per run, in a sandbox run that holds no candidate code
            reference = _measure({"n_records": n, "seeds": _distinct_seeds(rng, calls)}, limits)
            if isinstance(reference, Outcome):
                tail = reference.error_tail or ""
                return reference.model_copy(update={"error_tail": f"timing the reference failed: {tail}"})
            baseline = state["baseline_ms"] = _median(reference.times_ms)
            state["baseline_times_ms"] = [round(t, 4) for t in _timed(reference.times_ms)]
        payload: dict[str, Any] = {"source": source, "n_records": n, "seeds": seeds}
        if ctx.best_source is not None:
            payload["rival"] = ctx.best_source
        measured = _measure(payload, limits)
        if isinstance(measured, Outcome):
            return measured.model_copy(update={"state_update": state})
        outcome = _judge(measured, seeds, n, float(baseline), state)
        if outcome.status == "ok":
            times = state.get("baseline_times_ms", options.get("baseline_times_ms"))
            outcome.metrics.update(_intervals(measured, times, ctx, self.confidence))
        return outcome

    def keeps(self, outcome: Outcome, best: Incumbent | None) -> bool:
        """A new best only when it is faster than the current best beyond the noise: the interval of the
        ratio best time / candidate time lies above 1. Measured side by side when the benchmark timed
        this very best beside it; else (the best changed while it ran, or the best has no stored
        timings) from the stored timings, else the plain rule."""
        if best is None or outcome.metric is None:
            return super().keeps(outcome, best)
        if (
            outcome.metrics.get("vs_best_iteration") == best.experiment.iteration
            and "vs_best_low" in outcome.metrics
        ):
            return outcome.metrics["vs_best_low"] > 1.0
        if best.samples and outcome.samples:
            return ratio_interval(best.samples, outcome.samples, self.confidence).low > 1.0
        return super().keeps(outcome, best)


def _measure(payload: dict[str, Any], limits: Limits) -> Calls | Outcome:
    """Run the harness on `payload`; its report, checked, or the failure as an outcome."""
    result = run_sandboxed(ENTRY, payload, limits)
    if result.status != "ok" or result.result is None:
        return sandbox_failure(result)
    try:
        report = REPORT.validate_python(result.result)
    except ValidationError as exc:
        return Outcome(status="crash", error_tail=f"the benchmark harness returned a malformed report: {exc}")
    if isinstance(report, Failure):
        if report.error == "type":
            return Outcome(status="incorrect", metrics={"correct": 0.0}, error_tail=report.detail)
        return Outcome(status="crash", error_tail=f"{FAILURES[report.error]}:\n{report.detail}")
    if len(report.outputs) != len(report.times_ms):
        return Outcome(
            status="crash", error_tail="the benchmark harness returned unmatched times and outputs"
        )
    problem = timing_problem(report.times_ms + (report.rival_times_ms or []), result.wall_s)
    if problem is not None:
        return Outcome(status="crash", error_tail=problem)
    return report


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


def _judge(calls: Calls, seeds: list[int], n: int, baseline: float, state: dict[str, Any]) -> Outcome:
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
                state_update=state,
            )
    time_ms = _median(calls.times_ms)
    metrics: dict[str, float] = {
        "speedup": round(baseline / max(time_ms, 1e-6), 4),
        "time_ms": round(time_ms, 4),
        "baseline_ms": round(baseline, 4),
        "correct": 1.0,
        "inputs": float(len(seeds)),
    }
    return Outcome(
        status="ok",
        metric=metrics["speedup"],
        metrics=metrics,
        samples=[round(t, 4) for t in _timed(calls.times_ms)],
        state_update=state,
    )


def _intervals(calls: Calls, baseline_times: Any, ctx: ExecContext, level: float) -> dict[str, float]:
    """speedup_low/high: the speedup's interval against the baseline's timings (call-to-call noise
    only: the baseline was timed once, earlier). vs_best (low, high): the current best's time over this
    one's, paired call by call, measured side by side; vs_best_iteration says which best."""
    found: dict[str, float] = {}
    if isinstance(baseline_times, list) and baseline_times:
        speedup = ratio_interval(baseline_times, _timed(calls.times_ms), level)
        found.update(speedup_low=round(speedup.low, 4), speedup_high=round(speedup.high, 4))
    rival = calls.rival_times_ms
    if rival is not None and len(rival) == len(calls.times_ms) and ctx.best_iteration is not None:
        versus = paired_ratio_interval(_timed(rival), _timed(calls.times_ms), level)
        found.update(
            vs_best=round(versus.estimate, 4),
            vs_best_low=round(versus.low, 4),
            vs_best_high=round(versus.high, 4),
            vs_best_iteration=float(ctx.best_iteration),
        )
    return found


def _timed(times_ms: list[float]) -> list[float]:
    return times_ms[1:] or times_ms  # the first call warms up and is not counted


def _median(times_ms: list[float]) -> float:
    return statistics.median(_timed(times_ms))


def _distinct_seeds(rng: random.Random, count: int) -> list[int]:
    seeds: list[int] = []
    while len(seeds) < count:
        seed = rng.getrandbits(48)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


register("codeopt-records", lambda settings: CodeOptTask(settings))
