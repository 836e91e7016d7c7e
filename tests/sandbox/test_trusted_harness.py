"""Classes 2 and 3 of issue 13: codeopt-records' candidate runs with no Python-level confinement at all
(real `os`, `sys` and `gc`: the shipped folder's [benchmark] harness), and still cannot forge the report,
move the timer, carry work from one timed call to the next, or touch the reference's timing, because all
of that happens in processes it never runs in.
"""

import json
import math
import statistics
import textwrap
from typing import Any

import pytest
from codeopt_rewrites import REFERENCE_SOURCE, codeopt_folder

from autoresearch_mcp.sandbox.child import landlock_abi
from autoresearch_mcp.sandbox.runner import SandboxResult
from autoresearch_mcp.server.tasks import speed
from autoresearch_mcp.server.tasks.base import ExecContext, NoParams, Outcome
from autoresearch_mcp.server.tasks.folder import benchmark as folder_benchmark
from autoresearch_mcp.server.tasks.registry import make_task

RECORDS, CALLS = 1000, 4
REFERENCE_AS_HELPER = REFERENCE_SOURCE.replace("def process_records(records):", "def _reference(records):")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(codeopt_folder(tmp_path_factory.mktemp("codeopt") / "codeopt-records", RECORDS, CALLS))


def benchmark(folder: str, source: str, **options: Any) -> Outcome:
    task = make_task("codeopt-records", {"task_dirs": [folder]})
    ctx = ExecContext(run_id="r-e", seed=3, iteration=1, options={**task.options(), **options})
    return task.execute(NoParams(), source, ctx)


def test_an_escaped_candidate_that_writes_a_forged_report_to_every_descriptor_gets_no_result(
    small: str,
) -> None:
    forged = {"baseline_ms": 1e9, "time_ms": 1e-6, "times_ms": [1e-6] * 5, "error": "load", "detail": "x"}
    source = (
        textwrap.dedent(
            f"""\
        import os
        FORGED = {json.dumps(json.dumps(forged))}.encode()
        for fd in range(3, 256):
            try:
                os.write(fd, FORGED)
            except OSError:
                pass
        os._exit(0)
        """
        )
        + REFERENCE_SOURCE
    )
    outcome = benchmark(small, source)  # the reference is timed in the same run, beside it
    assert outcome.status == "crash" and outcome.metric is None, outcome
    assert outcome.metrics == {}  # no time, no baseline: never the forgery


def test_an_escaped_candidate_that_patches_every_clock_in_its_process_is_timed_honestly(small: str) -> None:
    source = (
        textwrap.dedent(
            """\
        import builtins
        import statistics
        import sys
        import time
        time.perf_counter = time.monotonic = lambda: 0.0
        statistics.median = lambda times: 1e-9
        for module in list(sys.modules.values()):
            if builtins.getattr(module, "__name__", "").startswith("autoresearch_mcp"):
                for name in list(builtins.vars(module)):
                    if "clock" in name or "median" in name:
                        builtins.setattr(module, name, lambda *args: 1e-9)
        """
        )
        + REFERENCE_SOURCE
    )
    outcome = benchmark(small, source)
    assert outcome.status == "ok", outcome
    # Patched clocks would read 0 for every call, a patched median 1e-9 (0 at the metric's 4 decimals):
    # the times are the harness's own, and the time reported is their median.
    assert min(outcome.samples) > 0 and math.isfinite(outcome.metric or math.inf)
    assert outcome.metrics["time_ms"] == pytest.approx(statistics.median(outcome.samples), abs=1e-4)


def test_precomputing_later_calls_during_the_untimed_warm_up_call_gains_nothing(small: str) -> None:
    # Each call's fork holds its own seed only (sealed.py): what a version finds there is its own input.
    source = REFERENCE_AS_HELPER + textwrap.dedent(
        """\


        import sys

        _CACHE = {}


        def _precompute(own):
            # The harness's frames below this call: the folder's `inputs` function, and every integer
            # they hold (the call's seed among them), tried as a seed.
            frame, make, seeds = sys._getframe(), None, set()
            while frame is not None:
                for value in list(frame.f_locals.values()):
                    if callable(value) and getattr(value, "__name__", None) == "make_input":
                        make = value
                    if type(value) is int and 2**20 < value < 2**48:
                        seeds.add(value)
                frame = frame.f_back
            for seed in seeds:
                inputs = make(seed)
                if repr(inputs[:3]) != own:  # another call's input: what precomputing would gain
                    _CACHE[repr(inputs[:3])] = _reference(inputs)


        def process_records(records):
            if not _CACHE:
                _precompute(repr(records[:3]))
            answer = _CACHE.get(repr(records[:3]))
            if answer is not None:  # answered from the cache: marked, so that the check says so
                return {**answer, "from_the_cache": True}
            return _reference(records)
        """
    )
    outcome = benchmark(small, source)
    # Every call starts from nothing: had one call been answered from the cache, its output would carry
    # the mark and the run would be "incorrect". (A measured speedup, taken before, moved with the load.)
    assert outcome.status == "ok", outcome


@pytest.mark.skipif(landlock_abi() < 6, reason="signal scoping needs Landlock ABI 6")
def test_an_escaped_candidate_cannot_signal_or_trace_the_process_that_reports(small: str) -> None:
    source = (
        textwrap.dedent(
            """\
        import os
        import signal
        OUTCOMES = []
        for target in (os.getppid(), 1):
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                try:
                    os.kill(target, sig)
                    OUTCOMES.append("sent")
                except OSError as exc:
                    OUTCOMES.append(type(exc).__name__)
        try:
            os.close(os.open(f"/proc/{os.getppid()}/mem", os.O_RDONLY))
            OUTCOMES.append("opened")
        except OSError as exc:
            OUTCOMES.append(type(exc).__name__)
        assert "sent" not in OUTCOMES and "opened" not in OUTCOMES, OUTCOMES
        """
        )
        + REFERENCE_SOURCE
    )
    outcome = benchmark(small, source)
    assert outcome.status == "ok", outcome


def test_the_reference_is_timed_beside_the_candidate_from_the_harness_own_copy(small: str, monkeypatch):
    payloads: list[dict[str, Any]] = []
    real = folder_benchmark.run_sandboxed

    def recording(entry: str, payload: dict[str, Any], limits: Any, sealed: Any = ()) -> SandboxResult:
        payloads.append(payload)
        return real(entry, payload, limits, sealed)

    monkeypatch.setattr(folder_benchmark, "run_sandboxed", recording)
    outcome = benchmark(small, REFERENCE_SOURCE)
    assert outcome.status == "ok" and outcome.state_update == {}
    # One sandbox run, and nothing in its payload says what the reference is or how fast it was: the
    # harness compiles its own copy and times it call by call beside the candidate.
    assert len(payloads) == 1 and payloads[0]["benchmark"]["reference"] is None
    assert payloads[0]["rival_files"] is None and "seeds" not in payloads[0]  # the seeds are sealed
    assert not any(key.endswith("_ms") for key in payloads[0])
    assert outcome.metrics["baseline_ms"] > 0 and outcome.metrics["inputs"] == CALLS + 1


def test_reported_times_that_do_not_fit_in_the_runs_wall_time_are_refused() -> None:
    times = [20.0] * 5  # 100 ms of timed calls ...
    problem = speed.timing_problem(times, wall_s=0.05)  # ... in a run that lasted 50 ms
    assert problem is not None and "50 ms" in problem
    assert speed.timing_problem(times, wall_s=0.5) is None
