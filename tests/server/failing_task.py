"""A test-only task whose job worker fails outside the experiment (its factory raises in a job worker
process), so a background job ends `failed` the way a broken worker would make it."""

import os
import sys
from typing import Any

from autoresearch_mcp.server.tasks.registry import register
from toy_task import ToyTask


class FailingWorkerTask(ToyTask):
    name = "toy-failing-worker"


def _factory(settings: dict[str, Any]) -> ToyTask:
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", "") == "autoresearch_mcp.server.jobs.worker":
        raise RuntimeError(f"cannot load the task from {os.path.abspath(__file__)}")
    return FailingWorkerTask(settings)


register(FailingWorkerTask.name, _factory)
