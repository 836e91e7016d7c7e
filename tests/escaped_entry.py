"""Test-only harness entries: the real tasks' own harnesses with the Python layers off, as if a candidate
had escaped every one of them ("assume escape"). The candidate's imports are the real modules (`import os,
sys, gc` work), its builtins the real ones (eval, open, getattr), and the server's guard is skipped
(escaped_task.py). What still holds is what the OS and the way we measure hold: the cgroup, seccomp,
namespaces, Landlock, the process split and the paired timing.

Kept free of the server's imports: the sandbox child imports this module before every run."""

import builtins
from typing import Any

from autoresearch_mcp.server.tasks.codeopt_records import child


def run_escaped(payload: dict[str, Any]) -> dict[str, Any]:
    """codeopt-records' harness; each candidate namespace gets the real builtins and real imports."""

    def escaped() -> dict[str, Any]:
        return {"__builtins__": builtins.__dict__, "__name__": "candidate"}

    child.candidate_globals = escaped
    child.disarm_evaluators = lambda: None
    return child.run_benchmark(payload)
