"""Test-only tasks with the Python layers off ("assume escape"): codeopt-records with no guard and no
proxies (escaped_entry.py), to show what the OS layers and the measurement hold alone.

- `codeopt-escaped`: the real limits; seccomp refuses new processes, as for every task that declares none.
- `codeopt-escaped-forking`: the same, declaring that its candidates start processes (no seccomp
  filter), so that the cgroup alone must hold their memory, their number and the measurement.

Registered only inside `registered()`, in the test process; never part of the package (the tools'
descriptions list the registered tasks, so they must not outlive the tests that use them)."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from autoresearch_mcp.sandbox.runner import Limits
from autoresearch_mcp.server.tasks.codeopt_records.task import CodeOptTask
from autoresearch_mcp.server.tasks.registry import register, unregister

ESCAPED_ENTRY = "escaped_entry:run_escaped"


class EscapedCodeOpt(CodeOptTask):
    name = "codeopt-escaped"
    entry = ESCAPED_ENTRY
    sandbox_entries = (ESCAPED_ENTRY,)

    def check_artifact(self, source: str) -> list[str]:
        return []  # no guard: every source runs


class EscapedForkingCodeOpt(EscapedCodeOpt):
    name = "codeopt-escaped-forking"

    def options(self) -> dict[str, Any]:
        options = super().options()
        limits = Limits.model_validate(options["limits"]).model_copy(update={"new_processes": True})
        return {**options, "limits": limits.model_dump()}


@contextmanager
def registered() -> Iterator[None]:
    tasks = (EscapedCodeOpt, EscapedForkingCodeOpt)
    for task in tasks:
        register(task.name, task)
    try:
        yield
    finally:
        for task in tasks:
            unregister(task.name)
