"""A test-only harness entry: codeopt-records' own, except that the candidate's imports are the real ones
(`import os, sys, gc` work), as if it had escaped every Python-level confinement. What it can still not
do (forge the report, move the timer, carry work from one call to the next) is what the process split
guarantees."""

import builtins
from typing import Any

from autoresearch_mcp.server.tasks.codeopt_records import child


def run_escaped(payload: dict[str, Any]) -> dict[str, Any]:
    original = child.candidate_globals

    def escaped() -> dict[str, Any]:
        namespace = original()
        namespace["__builtins__"] = {**namespace["__builtins__"], "__import__": builtins.__import__}
        return namespace

    child.candidate_globals = escaped
    return child.run_benchmark(payload)
