"""A `[benchmark]` folder's experiment, on the server's side: fresh unguessable seeds, sealed for the
harness (benchmark_child.py), and the verdict on what it measured: the speedup over the reference, paired
call by call, and against the run's best where it was timed beside it (speed.py)."""

import hashlib
import random
import secrets
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autoresearch_mcp.contract import files as artifact
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.sandbox.runner import run_sandboxed
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, sandbox_failure
from autoresearch_mcp.server.tasks.folder.spec import TaskFolder
from autoresearch_mcp.server.tasks.intervals import LEVEL
from autoresearch_mcp.server.tasks.profiles import build_profile, failing_line
from autoresearch_mcp.server.tasks.speed import Timings, speed_outcome, timing_problem, versus_best

ENTRY = "autoresearch_mcp.server.tasks.folder.benchmark_child:run_benchmark"
FAILURES = {
    "load": "the version failed to load",
    "raised": "the function raised an exception",
    "type": "the function returned something that is not data",
    "protocol": "the call's process broke the harness's protocol",
    "harness": "the benchmark harness refused the result",
}


class Failed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    error: str = Field(max_length=20)
    detail: str = Field(max_length=4000)


class Wrong(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    wrong: str = Field(max_length=2000)
    call: int
    seed: int


def payload(loaded: TaskFolder, files: list[str], source: str, ctx: ExecContext) -> dict[str, Any]:
    spec = loaded.spec
    assert spec.benchmark is not None
    task = spec.task
    rival = ctx.best_source if ctx.best_source is not None and ctx.best_iteration is not None else None
    originals = artifact.pack(list(loaded.originals))
    return {
        "folder_path": str(loaded.path),
        "files": artifact.unpack(source, files),
        # The best, timed beside the candidate; a best that is the original is the reference already.
        "rival_files": artifact.unpack(rival, files) if rival is not None and rival != originals else None,
        "python_path": sys.executable,  # the harness's own: the function runs in its forks
        "reads": [[entry, str(path)] for entry, path in zip(task.reads, loaded.reads, strict=True)],
        "benchmark": spec.benchmark.model_dump(),
        # Where its calls spend their time, once per text of the files (a version profiled before in the
        # run is not profiled again).
        "profile": task.profile and not ctx.profiled,
    }


def execute(loaded: TaskFolder, files: list[str], source: str, ctx: ExecContext) -> Outcome:
    assert loaded.spec.benchmark is not None
    calls = loaded.spec.benchmark.calls + 1  # the first call warms up
    # Fresh, unguessable inputs every benchmark: no cache or special case for a known input can pass.
    rng = random.Random(f"{ctx.run_id}:{ctx.seed}:{ctx.iteration}:{secrets.token_hex(16)}")
    seeds = list(dict.fromkeys(rng.getrandbits(48) for _ in range(calls * 2)))[:calls]
    given = payload(loaded, files, source, ctx)
    result = run_sandboxed(ENTRY, given, ctx.limits(), sealed=seeds)
    if result.status != "ok" or result.result is None:
        return sandbox_failure(result)
    report = result.result
    try:
        if "error" in report:
            failed = Failed.model_validate(report)
            at = failing_line(failed.detail, tuple(files)) if failed.error in ("load", "raised") else None
            headline = FAILURES.get(failed.error, FAILURES["harness"]) + (f" at {at}" if at else "")
            return Outcome(status="crash", error_tail=f"{headline}:\n{failed.detail}")
        if "wrong" in report:
            wrong = Wrong.model_validate(report)
            where = f"call {wrong.call} of {calls}, the inputs of seed {wrong.seed}"
            return Outcome(
                status="incorrect",
                metrics={"correct": 0.0},
                error_tail=f"wrong output ({where}): {wrong.wrong}",
            )
        timings = Timings.model_validate({key: value for key, value in report.items() if key != "profile"})
    except ValidationError as exc:
        return Outcome(status="crash", error_tail=f"the benchmark harness returned a malformed report: {exc}")
    if timings.unmatched():
        return Outcome(status="crash", error_tail="the benchmark harness returned unmatched times")
    every = timings.times_ms + timings.reference_times_ms + (timings.rival_times_ms or [])
    if (problem := timing_problem(every, result.wall_s)) is not None:
        return Outcome(status="crash", error_tail=problem)
    outcome = speed_outcome(timings, len(timings.times_ms))
    outcome.metrics.update(versus_best(timings, ctx, LEVEL, best_is_reference=given["rival_files"] is None))
    outcome.profile = profile_of(source, files, report.get("profile"))
    return outcome


def profile(loaded: TaskFolder, files: list[str], source: str, ctx: ExecContext) -> Profile | None:
    """Where `source`'s function spends its time on one input, measured apart from any experiment."""
    given = {**payload(loaded, files, source, ctx), "profile_only": True, "seed": secrets.randbits(48)}
    result = run_sandboxed(ENTRY, given, ctx.limits())
    if result.status != "ok" or not isinstance(result.result, dict):
        return None
    return profile_of(source, files, result.result.get("profile"))


def profile_of(source: str, files: list[str], measured: Any) -> Profile | None:
    if not isinstance(measured, dict):
        return None
    how = "the benchmark's calls on one input, sampled; the hottest function's lines traced"
    try:
        return build_profile(source, files, hashlib.sha256(source.encode()).hexdigest(), measured, how)
    except ValueError:  # a malformed profile (ValidationError): the benchmark stands without it
        return None
