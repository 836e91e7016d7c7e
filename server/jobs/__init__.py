"""Background jobs: submit_training_job / get_job. Plain logic; the MCP glue is in server/tools/jobs.py.

A job is an experiment that runs on an executor (executors.py) instead of in the calling thread. It is
reserved in the store at submit time exactly as run_experiment reserves it (same validation, refusals and
budget), so a flood of submissions cannot overrun the budget. The worker computes; this process records.
Each state change (queued, running, done, failed) is told to the run service's `events`.
"""

import logging
import threading
import time
from typing import Any

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import ExperimentResult, Job, JobInfo, JobStatus, ParamsBase
from autoresearch_mcp.server.events import ResearchEvents
from autoresearch_mcp.server.jobs.executors import Executor, JobFuture, OnStart, make_executor
from autoresearch_mcp.server.runs import PreparedExperiment, RunService
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.base import Outcome
from autoresearch_mcp.server.text import scrub_paths

log = logging.getLogger(__name__)

TOOL = "submit_training_job"


class JobService:
    def __init__(self, service: RunService, settings: ServerSettings) -> None:
        self.service = service
        self.settings = settings
        self.jobs = service.store.jobs
        self._executor: Executor | None = None
        self._lock = threading.Lock()
        self._done: dict[str, threading.Event] = {}
        self._started: dict[str, float] = {}
        self._closed = False

    @property
    def events(self) -> ResearchEvents:
        return self.service.events

    def recover(self) -> int:
        """On start-up, after RunService.recover: jobs a dead server left queued or running fail."""
        count = self.jobs.fail_orphans()
        if count:
            log.warning(
                "marked %d job(s) failed: the server stopped while they were queued or running", count
            )
        return count

    def executor(self) -> Executor:
        """Started on first use, so a server that never runs jobs never starts workers or dials Dask."""
        with self._lock:
            if self._closed:
                raise ResearchError("the server is shutting down; it takes no new jobs", kind="unavailable")
            if self._executor is None:
                self._executor = make_executor(self.settings)
            return self._executor

    def submit(
        self, run_id: str, params: dict[str, Any], note: str | None, base: ParamsBase = "defaults"
    ) -> JobInfo:
        executor = self.executor()  # an unreachable scheduler fails here, before any budget is spent
        prepared = self.service.prepare_experiment(run_id, params, note, TOOL, base)
        job = self.jobs.create(run_id, prepared.experiment.id, executor.name)
        self.events.job_changed(job)
        with self._lock:
            self._done[job.id] = threading.Event()
        try:
            future = executor.submit(job.id, _payload(prepared, self.settings), self._on_start(job.id))
        except Exception as exc:  # whatever the executor raises, the reserved job must not stay queued
            self._fail(job.id, job.experiment_id, f"the executor refused it: {exc}")
            self._release(job.id)
            raise ResearchError(
                f"job {job.id} could not be submitted ({exc}); it is marked failed", kind="unavailable"
            ) from None
        future.add_done_callback(lambda fut: self._on_done(job.id, job.experiment_id, fut))
        return self.info(job.id)

    def _on_start(self, job_id: str) -> OnStart:
        def started(worker: str, pid: int | None) -> None:
            with self._lock:
                self._started.setdefault(job_id, time.monotonic())
            if self.jobs.mark_running(job_id, worker, pid):
                self.events.job_changed(self.jobs.get(job_id))

        return started

    def _on_done(self, job_id: str, exp_id: int, future: JobFuture) -> None:
        # The top-level handler of a job's end (on an executor thread): whatever went wrong, the job
        # and its experiment must end up recorded, never left running.
        try:
            try:
                reply = future.result()
            except Exception as exc:  # WorkerDied, JobCrashed, Dask's KilledWorker, cancellation, ...
                self._fail(job_id, exp_id, self._reason(exc))
                return
            outcome = Outcome.model_validate(reply["outcome"])
            self.service.record_outcome(exp_id, outcome, float(reply["duration_s"]))
            self._finish(job_id, "done")
        except Exception as exc:
            log.exception("job %s: recording its end failed", job_id)
            self._fail(job_id, exp_id, f"recording the result failed: {exc}")
        finally:
            self._release(job_id)

    def _release(self, job_id: str) -> None:
        """The job has ended: wake its waiters."""
        with self._lock:
            event = self._done.pop(job_id, None)
            self._started.pop(job_id, None)
        if event is not None:
            event.set()

    def _reason(self, exc: Exception) -> str:
        text = scrub_paths(str(exc) or type(exc).__name__)
        if self._closed:
            return f"the server shut down before this job finished ({text})"
        if type(exc).__name__ == "KilledWorker":  # by name: distributed is imported only with Dask
            return f"the Dask worker running it died: {text}"
        return text

    def _fail(self, job_id: str, exp_id: int, reason: str) -> None:
        with self._lock:
            began = self._started.get(job_id)
        duration = round(time.monotonic() - began, 3) if began is not None else 0.0
        if self.service.store.get_experiment(exp_id).status == "running":
            self.service.record_interrupted(exp_id, f"job failed: {reason}", duration)
        self._finish(job_id, "failed", reason)

    def _finish(self, job_id: str, status: JobStatus, error: str | None = None) -> None:
        if self.jobs.finish(job_id, status, error):
            self.events.job_changed(self.jobs.get(job_id))

    def wait(self, job_id: str, timeout: float) -> Job:
        """The job, once it has ended or after `timeout` seconds, whichever comes first."""
        job = self.jobs.get(job_id)
        with self._lock:
            event = self._done.get(job_id)
        if event is not None and job.status in ("queued", "running"):
            event.wait(timeout)
            job = self.jobs.get(job_id)
        return job

    def info(self, job_id: str) -> JobInfo:
        """The job and, once it has ended, its experiment. Reads only."""
        job = self.jobs.get(job_id)
        if job.status in ("queued", "running"):
            return JobInfo(job=job)
        exp = self.service.store.get_experiment(job.experiment_id)
        run = self.service.store.get_run(job.run_id)
        result = ExperimentResult(
            experiment=exp,
            is_new_best=exp.kept,
            best=run.best,
            budget_left=max(run.budget - run.used, 0),
            run_status=run.status,
        )
        return JobInfo(job=job, result=result)

    def close(self) -> None:
        """Stop taking jobs; stop the executor (running local jobs fail, with that reason)."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.close()


def _payload(prepared: PreparedExperiment, settings: ServerSettings) -> dict[str, Any]:
    """Everything a worker needs to compute the experiment, as plain JSON (see worker.execute_job)."""
    task = prepared.task
    return {
        "task": task.name,
        "task_module": type(task).__module__,
        "task_settings": settings.task_settings(),
        "params": prepared.params.model_dump(),
        "source": prepared.source,
        "ctx": prepared.ctx.model_dump(),
    }
