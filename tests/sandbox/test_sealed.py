"""Sealed values (sandbox/sealed.py): the inputs of a benchmark's later timed calls reach the harness one at a
time, so a candidate that escaped Python in the untimed check finds none of them in the memory it was
forked with (on main the payload held every seed: a candidate found them there, worked out the answers,
and carried them to the timed calls through the keyring)."""

import hashlib
import os
import secrets
import textwrap

import pytest
from codeopt_rewrites import REFERENCE_SOURCE, codeopt_folder

from autoresearch_mcp.sandbox import sealed
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.tasks.base import ExecContext
from autoresearch_mcp.server.tasks.folder import benchmark
from autoresearch_mcp.server.tasks.registry import make_task


def test_sealed_values_come_back_one_at_a_time_in_order_and_then_run_out(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sealed, "_feed", [])  # this process's feed, for this test only
    with pytest.raises(LookupError, match="no sealed values"):
        sealed.take()
    fd = sealed.pipe_with([7, {"n": 1}, "last"])
    sealed.open_feed(fd)
    try:
        assert [sealed.take(), sealed.take(), sealed.take()] == [7, {"n": 1}, "last"]
        with pytest.raises(LookupError, match="ran out"):
            sealed.take()
    finally:
        os.close(fd)


def test_more_sealed_values_than_a_pipe_holds_are_refused_before_anything_starts():
    with pytest.raises(ValueError, match="fit in a pipe"):
        sealed.pipe_with(["x" * 1000] * 100)


# codeopt-records has no Python layer (real builtins and modules): in every call, look through everything
# the fork holds (frozen objects too) for the seeds of the later calls, and say how many it found.
LOOK_FOR_SEEDS = """\
import gc
import hashlib

WANTED = {wanted!r}


def _held():
    found = 0
    gc.unfreeze()
    for obj in gc.get_objects():
        values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple, set)) else ()
        for value in values:
            if type(value) is int and hashlib.sha256(str(value).encode()).hexdigest() in WANTED:
                found += 1
    return found


"""


def test_the_first_call_holds_none_of_the_later_calls_seeds(tmp_path):
    seeds = [secrets.randbits(48) for _ in range(4)]
    wanted = sorted(hashlib.sha256(str(seed).encode()).hexdigest() for seed in seeds[1:])
    start = "def process_records(records):\n"
    source = textwrap.dedent(LOOK_FOR_SEEDS.format(wanted=wanted)) + REFERENCE_SOURCE.replace(
        start, start + "    raise RuntimeError(f'FOUND {_held()}')\n"
    )
    folder = codeopt_folder(tmp_path / "codeopt-records", records=200, calls=3)
    task = make_task("codeopt-records", {"task_dirs": [str(folder)]})
    ctx = ExecContext(run_id="r-s", seed=1, iteration=1, options=task.options())
    payload = benchmark.payload(task.loaded, task.editable(), source, ctx)  # type: ignore[attr-defined]
    result = run_sandboxed(benchmark.ENTRY, payload, Limits(**ctx.options["limits"]), sealed=seeds)
    assert result.status == "ok" and result.result is not None, result.output_tail
    assert result.result["error"] == "raised" and "FOUND 0" in result.result["detail"], result.result
