"""The work one background job does, wherever it runs: the same `task.execute` path as run_experiment.

A job payload is plain JSON (task name and module, task settings, params, train.py source, context), so
the same function runs in a local worker process or on a Dask worker on another machine. The worker
never touches the run store: it returns the outcome, and the server records it. The sandboxed child
process that runs train.py is started from here.

`main` is the local worker process (executors.WORKER_MAIN starts it): one JSON payload per line on stdin,
one JSON reply per line on stdout, until stdin closes.
"""

import json
import os
import select
import socket
import sys
import threading
import time
import traceback
from typing import Any

from autoresearch_mcp.contract.workers import threads_per_worker
from autoresearch_mcp.server.tasks.base import ExecContext, Task, execute_safely
from autoresearch_mcp.server.tasks.registry import make_task_from
from autoresearch_mcp.server.text import scrub_paths

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


def _exit_with_the_server(protocol_fd: int) -> None:
    """The server reads our replies from this pipe; when it dies (kill -9 included), the pipe loses its
    reader and poll reports POLLERR. Then stop at once rather than finish a job nobody will record; the
    job's sandboxed child dies with us (it watches its own pipe to this process)."""

    def watch() -> None:
        poller = select.poll()
        poller.register(protocol_fd, 0)  # no events asked for: only errors and hang-ups are reported
        while True:
            for _, event in poller.poll():
                if event & select.POLLNVAL:
                    return  # the pipe was closed here: we are exiting anyway
                if event & (select.POLLERR | select.POLLHUP):
                    os._exit(1)

    if hasattr(select, "poll"):  # POSIX; elsewhere a worker finishes its job as before
        threading.Thread(target=watch, daemon=True, name="exit-with-server").start()


def main() -> int:
    # The protocol owns the real stdout; anything else that prints (task code, libraries) goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _exit_with_the_server(protocol.fileno())
    for line in sys.stdin:
        try:
            reply: dict[str, Any] = {"ok": execute_job(json.loads(line))}
        except (
            Exception
        ) as exc:  # the top-level handler: report any failure as this job's error, keep serving
            traceback.print_exc()  # the full story goes to the server's log (our stderr is its stderr)
            reply = {"error": scrub_paths(f"{type(exc).__name__}: {exc}")[:1000]}
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
