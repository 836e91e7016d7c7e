"""The work one background job does, wherever it runs: the same `task.execute` path as run_experiment.

A job payload is plain JSON (task name and module, task settings, params, train.py source, context), so
the same function runs in a local worker process or on a Dask worker on another machine. The worker
never touches the run store: it returns the outcome, and the server records it. The sandboxed child
process that runs train.py is started from here.

The local worker process (worker.py) and a Dask worker (executors.DaskExecutor) both call it.
"""

import json
import os
import socket
import time
from typing import Any

from autoresearch_mcp.contract.workers import threads_per_worker
from autoresearch_mcp.server.tasks.base import ExecContext, Task, execute_safely
from autoresearch_mcp.server.tasks.registry import make_task_from

DASK_TOPIC = "autoresearch-jobs"
_tasks: dict[str, Task] = {}  # per worker process: a task may cache data between jobs


def execute_job(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one experiment and return its outcome (a failure of the candidate is an outcome too)."""
    started = time.monotonic()
    key = json.dumps([payload["task"], payload["task_settings"]], sort_keys=True)
    if key not in _tasks:
        _tasks[key] = make_task_from(payload["task_module"], payload["task"], payload["task_settings"])
    task = _tasks[key]
    params = task.params_model.model_validate(payload["params"])
    ctx = ExecContext.model_validate(payload["ctx"])
    # e.g. the data is missing on this machine: say which machine
    outcome = execute_safely(
        task, params, payload["source"], ctx, where=f"on worker {socket.gethostname()}: "
    )
    return {"outcome": outcome.model_dump(), "duration_s": round(time.monotonic() - started, 3)}


def execute_dask_job(job_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """execute_job on a Dask worker; first tells the server (through Dask's event log) that it started."""
    from distributed import get_worker

    worker = get_worker()
    worker.log_event(DASK_TOPIC, {"job": job_id, "worker": worker.address, "pid": os.getpid()})
    # The worker runs up to `nthreads` jobs at once: each takes its share of this machine's cores.
    ctx = {**payload["ctx"], "threads": threads_per_worker(worker.state.nthreads)}
    return execute_job({**payload, "ctx": ctx})
