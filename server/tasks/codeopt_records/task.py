"""codeopt-records: make a deliberately slow `process_records` faster without changing its output (the
paper's Task 2).

Fixed harness: the record generator, the reference output (computed here, in the server, by a trusted
twin of the reference), the timing (child.py beside this file) and the metric, speedup = the run's
baseline time / the candidate's time, both medians over fresh inputs. Mutable artifact: train.py, which
starts as the slow reference and must keep `def process_records(records)`.
"""

import random
import secrets
from typing import Any

from pydantic import BaseModel

from autoresearch_mcp.contract.models import AgentProfile, ScriptedPlan
from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
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
# Plain Python on 10k small dicts needs ~100 MB; a first benchmark (baseline + candidate, 21 calls each)
# takes 3-4 s, so 30 s leaves room for a candidate several times slower than the reference.
DEFAULT_LIMITS = Limits(wall_s=30, cpu_s=30, memory_mb=512, output_bytes=16_000, file_mb=8, threads=1)


class CodeOptTask(Task):
    name = "codeopt-records"
    title = "Speed up process_records(records), a slow summary of employee records, keeping its output"
    metric = "speedup"
    direction = "max"
    params_model = NoParams
    experiment_tool = "run_benchmark"
    sandbox_entries = (ENTRY,)

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
        payload: dict[str, Any] = {"source": source, "n_records": n, "seeds": seeds}
        baseline = options.get("baseline_ms")
        if baseline is None:  # measured once per run, in the same harness, before the candidate loads
            payload["baseline_seeds"] = _distinct_seeds(rng, calls)
        result = run_sandboxed(ENTRY, payload, limits)
        if result.status != "ok" or result.result is None:
            return sandbox_failure(result)
        data = result.result
        state: dict[str, Any] = {}
        if baseline is None and isinstance(data.get("baseline_ms"), float):
            baseline = data["baseline_ms"]
            state["baseline_ms"] = baseline
        return _judge(data, seeds, n, baseline, state)


def _judge(
    data: dict[str, Any], seeds: list[int], n: int, baseline: float | None, state: dict[str, Any]
) -> Outcome:
    error, detail = data.get("error"), str(data.get("detail", ""))
    if error == "type":
        return Outcome(status="incorrect", metrics={"correct": 0.0}, error_tail=detail, state_update=state)
    if error:
        what = "train.py failed to load" if error == "load" else "process_records raised an exception"
        return Outcome(status="crash", error_tail=f"{what}:\n{detail}", state_update=state)
    outputs, time_ms = data.get("outputs"), data.get("time_ms")
    if baseline is None or not isinstance(outputs, list) or len(outputs) != len(seeds) or not time_ms:
        return Outcome(status="crash", error_tail="the benchmark harness returned an incomplete result")
    for call, (seed, output) in enumerate(zip(seeds, outputs, strict=True), start=1):
        difference = first_difference(process_records_fast(make_records(n, seed)), output)
        if difference:
            where = f"call {call} of {len(seeds)}, input make_records({n}, seed={seed})"
            return Outcome(
                status="incorrect",
                metrics={"correct": 0.0},
                error_tail=f"wrong output ({where}): {difference}",
                state_update=state,
            )
    speedup = float(baseline) / max(float(time_ms), 1e-6)
    metrics = {
        "speedup": round(speedup, 4),
        "time_ms": round(float(time_ms), 4),
        "baseline_ms": round(float(baseline), 4),
        "correct": 1.0,
        "inputs": float(len(seeds)),
    }
    return Outcome(status="ok", metric=metrics["speedup"], metrics=metrics, state_update=state)


def _distinct_seeds(rng: random.Random, count: int) -> list[int]:
    seeds: list[int] = []
    while len(seeds) < count:
        seed = rng.getrandbits(48)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


register("codeopt-records", lambda settings: CodeOptTask(settings))
