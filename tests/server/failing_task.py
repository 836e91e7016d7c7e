"""A test-only task whose job worker fails outside the experiment (its factory raises in a job worker
process), so a background job ends `failed` the way a broken worker would make it."""

import os
import sys
from typing import Any

from autoresearch_mcp.server.jobs.executors import WORKER_MAIN
from autoresearch_mcp.server.tasks.registry import register
from toy_task import ToyTask


class FailingWorkerTask(ToyTask):
    name = "toy-failing-worker"


def _factory(settings: dict[str, Any]) -> ToyTask:
    # In the local job worker: the process started by executors.WORKER_MAIN.
    if WORKER_MAIN in sys.orig_argv:
        raise RuntimeError(f"cannot load the task from {os.path.abspath(__file__)}")
    return FailingWorkerTask(settings)


register(FailingWorkerTask.name, _factory)
