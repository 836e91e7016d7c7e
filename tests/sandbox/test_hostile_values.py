"""Class 4 of issue 13 at the sandbox's edge: what comes back from a sandbox is checked before anything in
the server reads it. A non-finite number, an integer too big for a float, JSON nested too deeply or too
large a result is a crash that says so, never a value."""

import textwrap

import pytest

from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed

SCRIPT = "autoresearch_mcp.sandbox.script:run_script"
QUICK = Limits(wall_s=20, cpu_s=20, memory_mb=512)


def returning(body: str):
    source = "def attack():\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return run_sandboxed(SCRIPT, {"source": source, "call": "attack", "args": []}, QUICK)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("return float('nan')", "not a finite number"),
        ("return [1.0, float('inf')]", "not a finite number"),
        ("return {'x': -float('inf')}", "not a finite number"),
        ("return 10 ** 400", "too large"),
        ("x = []\nfor _ in range(500):\n    x = [x]\nreturn x", "nested more than"),
        ("return 'x' * 40_000_000", "larger than"),
    ],
    ids=["nan", "inf-in-list", "neg-inf-in-dict", "huge-int", "deep", "oversized"],
)
def test_a_hostile_value_from_the_sandbox_is_a_crash_that_names_the_problem(body: str, reason: str) -> None:
    result = returning(body)
    assert result.status == "crash" and result.result is None, result
    assert reason in result.reason, result.reason


def test_plain_values_still_come_back_as_they_are() -> None:
    result = returning("return {'a': [1, 2.5, None, True, 'x'], 'b': 2 ** 60}")
    assert result.status == "ok" and result.result == {"value": {"a": [1, 2.5, None, True, "x"], "b": 2**60}}
