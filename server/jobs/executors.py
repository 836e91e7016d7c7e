"""Where background jobs run: local worker processes (default) or a Dask distributed cluster.

Both take a job payload (plain JSON, see job.py), tell the caller when a worker picks the job up,
and hand back a future of the worker's reply. A worker that dies fails its own job, never the server.
"""

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.workers import cores
from autoresearch_mcp.server.jobs.job import DASK_TOPIC, execute_dask_job
from autoresearch_mcp.server.settings import ServerSettings

OnStart = Callable[[str, int | None], None]  # (where it runs, worker pid)


class WorkerDied(Exception):
    """The process running a job ended before it replied."""


class JobCrashed(Exception):
    """The worker raised while running a job (a harness bug, not a candidate failure)."""


class JobFuture(Protocol):
    def add_done_callback(self, fn: Callable[[Any], object]) -> None: ...
    def result(self, timeout: float | None = None) -> Any: ...


class Executor(Protocol):
    name: str

    def submit(self, job_id: str, payload: dict[str, Any], on_start: OnStart) -> JobFuture: ...
    def close(self) -> None: ...


def make_executor(settings: ServerSettings) -> Executor:
    if settings.dask_scheduler:
        return DaskExecutor(settings.dask_scheduler)
    return LocalExecutor(local_workers(settings))


def local_workers(settings: ServerSettings) -> int:
    """How many jobs run at once on local workers: --workers, else one per core."""
    return settings.workers or cores()


# -- local worker processes ----------------------------------------------------------------------
WORKER_MAIN = "from autoresearch_mcp.server.jobs.worker import main; raise SystemExit(main())"


class _WorkerProcess:
    """One long-lived local worker process (worker.main), reused job after job (its imports and task
    caches stay warm)."""

    def __init__(self) -> None:
        env = dict(os.environ)
        # Like multiprocessing's spawn: the worker sees the server's import path (plugin tasks included).
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-c", WORKER_MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            start_new_session=True,  # a Ctrl-C meant for the server must not kill jobs before it closes
        )
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, payload: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(payload) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, ValueError):  # ValueError: the pipe was closed by stop()
            line = ""
        if not line:
            raise WorkerDied(f"the worker process (pid {self.pid}) died: {_exit_reason(self.proc.wait())}")
        reply = json.loads(line)
        if "error" in reply:
            raise JobCrashed(f"the job's worker failed: {reply['error']}")
        return reply["ok"]

    def stop(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def _exit_reason(code: int) -> str:
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exited with code {code}"


class LocalExecutor:
    """Up to `workers` jobs at once, on as many long-lived worker processes (started when needed)."""

    def __init__(self, workers: int) -> None:
        self.name = "local"
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="autoresearch-job")
        self._idle: queue.SimpleQueue[_WorkerProcess] = queue.SimpleQueue()
        self._all: set[_WorkerProcess] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._host = socket.gethostname()

    def submit(self, job_id: str, payload: dict[str, Any], on_start: OnStart) -> Future[dict[str, Any]]:
        return self._pool.submit(self._run, payload, on_start)

    def _take(self) -> _WorkerProcess:
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            if worker.alive():
                return worker
            self._discard(worker)  # died while idle: its job had not started, so start a fresh one
        with self._lock:
            if self._closed:
                raise WorkerDied("the server is shutting down")
            worker = _WorkerProcess()
            self._all.add(worker)
            return worker

    def _discard(self, worker: _WorkerProcess) -> None:
        worker.stop()
        with self._lock:
            self._all.discard(worker)

    def _run(self, payload: dict[str, Any], on_start: OnStart) -> dict[str, Any]:
        worker = self._take()
        on_start(f"local worker on {self._host}, pid {worker.pid}", worker.pid)
        try:
            return worker.run(payload)
        except WorkerDied:
            self._discard(worker)
            raise
        finally:
            if worker.alive():
                self._idle.put(worker)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._all)
            self._all.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:
            worker.stop()
        self._pool.shutdown(wait=True)


# -- Dask distributed ----------------------------------------------------------------------------
class DaskExecutor:
    """Jobs as Dask tasks. Workers need this package (and any plugin task) installed, and the task's
    data at the same path (or their own network access); they never open the run store."""

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client
            from distributed.comm import get_address_host_port
        except ImportError:  # an optional extra: a user's install carries only what runs
            raise ResearchError(
                "a Dask scheduler was given, but Dask is not installed: pip install 'autoresearch-mcp[dask]'",
                kind="unavailable",
            ) from None

        self.name = f"dask {address}"
        # Probe first: a Client that fails to connect lingers and times out again when collected.
        try:
            socket.create_connection(get_address_host_port(address), timeout=5).close()
            self.client = Client(address, timeout=10, set_as_default=False)
        except (OSError, ValueError) as exc:
            raise ResearchError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        self._closed = False
        # Futures must stay referenced until done: Dask forgets (and cancels) a task nobody holds.
        self._pending: dict[str, tuple[JobFuture, OnStart]] = {}
        self._lock = threading.Lock()
        # Start events arrive on the client's IO loop; the store writes they cause run on this thread.
        self._events = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autoresearch-dask-events")
        self.client.subscribe_topic(DASK_TOPIC, self._event)

    def submit(self, job_id: str, payload: dict[str, Any], on_start: OnStart) -> JobFuture:
        with self._lock:  # the start event may come back before submit returns
            future = self.client.submit(execute_dask_job, job_id, payload, key=job_id, pure=False)
            self._pending[job_id] = (future, on_start)
        future.add_done_callback(lambda _: self._forget(job_id))
        return future

    def _forget(self, job_id: str) -> None:
        with self._lock:
            self._pending.pop(job_id, None)

    def _event(self, event: tuple[float, dict[str, Any]]) -> None:
        message = event[1]
        with self._lock:
            pending = self._pending.get(message.get("job", ""))
        if pending is not None and not self._closed:
            where = f"dask worker {message['worker']}, pid {message['pid']}"
            self._events.submit(pending[1], where, message["pid"])

    def close(self) -> None:
        self._closed = True
        self.client.close()
        self._events.shutdown(wait=True)
