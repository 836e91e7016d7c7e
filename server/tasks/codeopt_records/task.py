"""codeopt-records: make a deliberately slow `process_records` faster without changing its output (the
paper's Task 2).

Fixed harness: the record generator, the reference output (computed here, in the server, by a trusted
twin of the reference), the timing (child.py beside this file) and the metric, speedup = the reference's
time / the candidate's time, measured call by call side by side on the same fresh inputs in the same
sandbox run, never against a baseline timed once (load from other runs would move every later speedup).
Mutable artifact: train.py, which starts as the slow reference and must keep
`def process_records(records)`.

Wall time decides: it is what the task asks to shrink, and pairing calls side by side is what keeps load
from moving it. The CPU time of the candidate's cgroup is recorded beside it (`cpu_ms`, `speedup_cpu`):
a check that the wall-time verdict is not load, where the two disagree.

A new best must be faster than the current one beyond the noise (`verdict`): the harness times the
current best beside the candidate too, and the candidate is kept only when the interval of that ratio
lies above 1 (intervals.py says why side by side, and which interval); the run's first, only when its
speedup's interval lies above 1, so a version no faster than the original is never the best.
"""

import hashlib
import random
import secrets
from typing import Any, ClassVar

from pydantic import BaseModel, Field, ValidationError

from autoresearch_mcp.contract.env import ENV_CODEOPT_RECORDS, ENV_CODEOPT_REPEATS
from autoresearch_mcp.contract.functions import functions_in
from autoresearch_mcp.contract.models import AgentProfile, ScriptedPlan
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.store import Incumbent
from autoresearch_mcp.server.tasks.base import (
    ExecContext,
    NoParams,
    Outcome,
    Task,
    TaskSettings,
    Verdict,
    sandbox_failure,
)
from autoresearch_mcp.server.tasks.codeopt_records import rewrites
from autoresearch_mcp.server.tasks.codeopt_records.child import ALLOWED_IMPORTS, EXTRA_FORBIDDEN_NAMES
from autoresearch_mcp.server.tasks.codeopt_records.judge import (
    CHECK_RECORDS,
    FAILURES,
    REPORT,
    Calls,
    Failure,
    Wrong,
    judge,
    wrong_on_check,
)
from autoresearch_mcp.server.tasks.codeopt_records.profile import PROFILE
from autoresearch_mcp.server.tasks.codeopt_records.records import (
    REFERENCE_SOURCE,
)
from autoresearch_mcp.server.tasks.intervals import LEVEL
from autoresearch_mcp.server.tasks.profiles import build_profile, failing_line
from autoresearch_mcp.server.tasks.registry import register
from autoresearch_mcp.server.tasks.speed import speed_verdict, timing_problem, versus_best

ENTRY = "autoresearch_mcp.server.tasks.codeopt_records.child:run_benchmark"
PROFILE_ENTRY = "autoresearch_mcp.server.tasks.codeopt_records.child:run_profile"
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


class CodeOptSettings(TaskSettings):
    codeopt_records: int | None = Field(
        default=None,
        ge=100,
        le=1_000_000,
        description="records per benchmark input",
        json_schema_extra={"env": ENV_CODEOPT_RECORDS},
    )
    codeopt_repeats: int | None = Field(
        default=None,
        ge=1,
        le=200,
        description="timed calls per benchmark",
        json_schema_extra={"env": ENV_CODEOPT_REPEATS},
    )


class CodeOptTask(Task):
    name = "codeopt-records"
    title = "Speed up process_records(records), a slow summary of employee records, keeping its output"
    metric = "speedup"
    direction = "max"
    params_model = NoParams
    settings_model = CodeOptSettings
    experiment_tool = "run_benchmark"
    judged_by = "benchmark"
    sandbox_entries = (ENTRY, PROFILE_ENTRY)
    # The level of the keep rule's interval: an identical-code benchmark is kept with chance
    # (1 - level) / 2. The speedup's own interval (against the reference) is at SPEEDUP_LEVEL.
    confidence: ClassVar[float] = LEVEL
    # The harness entry points; a test-only subclass runs the same harness with the Python layers off.
    entry: ClassVar[str] = ENTRY
    profile_entry: ClassVar[str] = PROFILE_ENTRY

    def agent_profile(self) -> AgentProfile:
        return PROFILE

    def scripted_plan(self) -> ScriptedPlan:
        return rewrites.plan()

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        own = CodeOptSettings.model_validate(settings or {})
        self.n_records = own.codeopt_records or DEFAULT_RECORDS
        self.repeats = own.codeopt_repeats or DEFAULT_REPEATS

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
        seeds = _distinct_seeds(rng, calls + 1)
        check = {"n": min(CHECK_RECORDS, n), "seed": seeds.pop()}
        payload: dict[str, Any] = {"source": source, "n_records": n, "calls": len(seeds), "check": check}
        payload["profile"] = _spans(source)
        if ctx.best_source is not None and ctx.best_source != REFERENCE_SOURCE:
            payload["rival"] = ctx.best_source  # a best that is the reference is timed as the reference
        measured = _measure(self.entry, payload, limits, seeds)
        if isinstance(measured, Outcome):
            return measured
        outcome = judge(measured, seeds, n)
        if outcome.status == "ok":
            rival_is_reference = ctx.best_source == REFERENCE_SOURCE
            outcome.metrics.update(versus_best(measured, ctx, self.confidence, rival_is_reference))
            outcome.profile = _profile_of(source, measured.profile, n)
        return outcome

    def profile(self, params: BaseModel, source: str, ctx: ExecContext) -> Profile | None:
        options = ctx.options
        n = int(options.get("n_records", self.n_records))
        limits = Limits.model_validate(options["limits"]) if "limits" in options else DEFAULT_LIMITS
        seed = random.Random(f"{ctx.run_id}:{ctx.seed}:profile:{secrets.token_hex(16)}").getrandbits(48)
        payload = {"source": source, "n_records": n, "seed": seed, "spans": _spans(source)}
        result = run_sandboxed(self.profile_entry, payload, limits)
        if result.status != "ok" or not isinstance(result.result, dict):
            return None
        return _profile_of(source, result.result.get("profile"), n)

    def verdict(self, outcome: Outcome, best: Incumbent | None) -> Verdict:
        """A new best only when it is surely faster (speed.speed_verdict); the plain rule where the
        timings cannot say."""
        if outcome.metric is not None and (said := speed_verdict(outcome, best, self.confidence)):
            return said
        return super().verdict(outcome, best)


def _spans(source: str) -> dict[str, list[int]]:
    """Each top-level function's first and last line: how the harness finds the hottest one."""
    return {f.name: [f.first_line, f.last_line] for f in functions_in(source)}


def _profile_of(source: str, measured: dict[str, Any] | None, n: int) -> Profile | None:
    if not measured:
        return None
    sha = hashlib.sha256(source.encode()).hexdigest()
    how = f"calls on {n} records, sampled; its hottest function traced line by line"
    try:
        return build_profile(source, None, sha, measured, how)
    except ValueError:  # a malformed profile (ValidationError): the benchmark stands without it
        return None


def _measure(entry: str, payload: dict[str, Any], limits: Limits, seeds: list[int]) -> Calls | Outcome:
    """Run the harness on `payload`, the timed calls' `seeds` sealed (sandbox/sealed.py); its report,
    checked, or the failure as an outcome."""
    result = run_sandboxed(entry, payload, limits, sealed=seeds)
    if result.status != "ok" or result.result is None:
        return sandbox_failure(result)
    try:
        report = REPORT.validate_python(result.result)
    except ValidationError as exc:
        return Outcome(status="crash", error_tail=f"the benchmark harness returned a malformed report: {exc}")
    if isinstance(report, Wrong):
        return wrong_on_check(report)
    if isinstance(report, Failure):
        if report.error == "type":
            return Outcome(status="incorrect", metrics={"correct": 0.0}, error_tail=report.detail)
        at = failing_line(report.detail, ("train.py",)) if report.error in ("load", "raised") else None
        headline = FAILURES[report.error] + (f" at {at}" if at else "")
        return Outcome(status="crash", error_tail=f"{headline}:\n{report.detail}")
    paired = (report.outputs, report.reference_times_ms, report.cpu_ms, report.reference_cpu_ms)
    if any(values is not None and len(values) != len(report.times_ms) for values in paired):
        return Outcome(
            status="crash", error_tail="the benchmark harness returned unmatched times and outputs"
        )
    every = report.times_ms + report.reference_times_ms + (report.rival_times_ms or [])
    problem = timing_problem(every, result.wall_s)
    if problem is not None:
        return Outcome(status="crash", error_tail=problem)
    return report


def _distinct_seeds(rng: random.Random, count: int) -> list[int]:
    seeds: list[int] = []
    while len(seeds) < count:
        seed = rng.getrandbits(48)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


register("codeopt-records", CodeOptTask)
