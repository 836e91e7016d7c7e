"""Test-only tasks that show what the OS layers and the measurement hold alone: codeopt-records (a task
folder, with no Python layer of its own: every version runs with the real builtins and real imports)
under two more names.

- `codeopt-escaped`: the real limits; seccomp refuses new processes, as for every task that declares none.
- `codeopt-escaped-forking`: the same, declaring that its candidates start processes (`processes = true`:
  no seccomp filter), so that the cgroup alone must hold their memory, their number and the measurement.

Registered only inside `registered()`, in the test process; never part of the package (the tools'
descriptions list the registered tasks, so they must not outlive the tests that use them)."""

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from codeopt_rewrites import codeopt_folder

from autoresearch_mcp.server.tasks.folder.task import folder_task_class
from autoresearch_mcp.server.tasks.registry import register, unregister


@contextmanager
def registered(records: int = 3000, calls: int = 10) -> Iterator[None]:
    with tempfile.TemporaryDirectory() as where:
        tasks = [
            folder_task_class(
                codeopt_folder(Path(where) / "escaped", records, calls, name="codeopt-escaped")
            ),
            folder_task_class(
                codeopt_folder(
                    Path(where) / "forking", records, calls, name="codeopt-escaped-forking", processes=True
                )
            ),
        ]
        for task in tasks:
            register(task.name, task)
        try:
            yield
        finally:
            for task in tasks:
                unregister(task.name)
