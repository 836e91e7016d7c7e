"""Background jobs: submit_training_job, get_job. Plain logic; the MCP glue is in server/tools/jobs.py.

A job is an experiment measured on an executor (executors.py) instead of in the calling thread, through
the same lifecycle as any (experiments.py): asked at submit time exactly as run_experiment asks (same
validation, refusals and budget, so a flood of submissions cannot overrun the budget), measured by a
worker, told here. A would-be best of a run with reeval_seeds is measured again on the same executor
before it is kept. The worker computes; this process records. Each state change (queued, running,
done, failed) is told to `events`.
"""

import logging
import threading
import time
from typing import Any

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Job, JobInfo, JobStatus, ParamsBase
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.contract.workers import threads_per_worker
from autoresearch_mcp.server.events import Progress, ResearchEvents
from autoresearch_mcp.server.experiments import ExperimentService, Measured, Trial, experiment_result
from autoresearch_mcp.server.jobs.executors import Executor, JobFuture, OnStart, local_workers, make_executor
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import RunRef
from autoresearch_mcp.server.tasks.base import Outcome
from autoresearch_mcp.server.text import scrub_paths

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 1.0  # get_job's progress while it waits


class JobService:
    def __init__(self, experiments: ExperimentService, settings: ServerSettings) -> None:
        self.experiments = experiments
        self.settings = settings
        self.jobs = experiments.store.jobs
        self._executor: Executor | None = None
        self._lock = threading.Lock()
        self._done: dict[str, threading.Event] = {}
        self._started: dict[str, float] = {}
        self._telling: set[threading.Thread] = set()
        self._closed = False

    @property
    def events(self) -> ResearchEvents:
        return self.experiments.events

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

    def submit_training_job(
        self, run: RunRef, params: dict[str, Any], note: str | None = None, base: ParamsBase = "defaults"
    ) -> JobInfo:
        """Ask for the experiment and queue it; returns at once with the job (queued)."""
        executor = self.executor()  # an unreachable scheduler fails here, before any budget is spent
        trial = self.experiments.ask(run, params, note, ToolName.SUBMIT_TRAINING_JOB, base)
        job = self.jobs.create(trial.run.id, trial.experiment.id, executor.name)
        self.events.job_changed(job)
        with self._lock:
            self._done[job.id] = threading.Event()
        try:
            future = executor.submit(job.id, _payload(trial, self.settings), self._on_start(job.id))
        except Exception as exc:  # whatever the executor raises, the reserved job must not stay queued
            self._fail(job.id, trial, f"the executor refused it: {exc}")
            self._release(job.id)
            raise ResearchError(
                f"job {job.id} could not be submitted ({exc}); it is marked failed", kind="unavailable"
            ) from None
        future.add_done_callback(lambda fut: self._on_done(job.id, trial, fut))
        return self.info(job.id)

    def _on_start(self, job_id: str) -> OnStart:
        def started(worker: str, pid: int | None) -> None:
            with self._lock:
                self._started.setdefault(job_id, time.monotonic())
            if self.jobs.mark_running(job_id, worker, pid):
                self.events.job_changed(self.jobs.get(job_id))

        return started

    def _on_done(self, job_id: str, trial: Trial, future: JobFuture) -> None:
        # On the executor's thread, which stays taken until the job is recorded (so the next queued
        # job starts after it). A run with reeval_seeds is told on a thread of its own: it may wait
        # for re-evaluations on the same executor, and this thread may be the one they need.
        if not trial.run.config.get("reeval_seeds"):
            self._tell(job_id, trial, future)
            return
        teller = threading.Thread(
            target=self._tell, args=(job_id, trial, future), name=f"autoresearch-tell-{job_id}", daemon=True
        )
        with self._lock:
            self._telling.add(teller)
        teller.start()

    def _tell(self, job_id: str, trial: Trial, future: JobFuture) -> None:
        # The top-level handler of a job's end: whatever went wrong, the job and its experiment must
        # end up recorded, never left running.
        try:
            try:
                reply = future.result()
            except Exception as exc:  # WorkerDied, JobCrashed, Dask's KilledWorker, cancellation, ...
                self._fail(job_id, trial, self._reason(exc))
                return
            measured = Measured(Outcome.model_validate(reply["outcome"]), float(reply["duration_s"]))
            told = self.experiments.tell(trial, measured, measure=self._measure_on_executor)
            self._finish(job_id, "done", message=told.message)
        except Exception as exc:
            log.exception("job %s: recording its end failed", job_id)
            self._fail(job_id, trial, f"recording the result failed: {exc}")
        finally:
            self._release(job_id)
            with self._lock:
                self._telling.discard(threading.current_thread())

    def _measure_on_executor(self, trial: Trial) -> Measured:
        """A re-evaluation of a job's would-be best, measured where the job was (waits for it)."""
        started = time.monotonic()
        key = f"{trial.run.id}-{trial.experiment.iteration}"
        try:
            reply = self.executor().submit(key, _payload(trial, self.settings), _nowhere).result()
            return Measured(Outcome.model_validate(reply["outcome"]), float(reply["duration_s"]))
        except Exception as exc:  # the executor closed or the worker died: this measurement crashed
            reason = str(exc) if isinstance(exc, ResearchError) else self._reason(exc)
            return Measured(Outcome(status="crash", error_tail=reason), round(time.monotonic() - started, 3))

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

    def _fail(self, job_id: str, trial: Trial, reason: str) -> None:
        with self._lock:
            began = self._started.get(job_id)
        duration = round(time.monotonic() - began, 3) if began is not None else 0.0
        if self.experiments.store.get_experiment(trial.experiment.id).status == "running":
            self.experiments.record_interrupted(trial, f"job failed: {reason}", duration)
        self._finish(job_id, "failed", reason)

    def _finish(
        self, job_id: str, status: JobStatus, error: str | None = None, message: str | None = None
    ) -> None:
        if self.jobs.finish(job_id, status, error, message):
            self.events.job_changed(self.jobs.get(job_id))

    def get_job(self, job_id: str, wait_seconds: float = 0, progress: Progress | None = None) -> JobInfo:
        """The job and, once it has ended, its experiment; with `wait_seconds`, once it has ended or
        that long has passed, telling `progress` every PROGRESS_EVERY_S seconds meanwhile."""
        job = self.jobs.get(job_id)
        deadline = time.monotonic() + wait_seconds
        while job.status in ("queued", "running") and (left := deadline - time.monotonic()) > 0:
            job = self.wait(job_id, min(left, PROGRESS_EVERY_S))
            if progress is not None:
                waited = wait_seconds - max(deadline - time.monotonic(), 0)
                where = f" on {job.worker}" if job.worker else ""
                progress(waited, wait_seconds, f"job {job_id} {job.status}{where}")
        return self.info(job_id)

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
        store = self.experiments.store
        result = experiment_result(store.get_run(job.run_id), store.get_experiment(job.experiment_id))
        return JobInfo(job=job, result=result.model_copy(update={"message": self.jobs.message(job_id)}))

    def close(self) -> None:
        """Stop taking jobs; stop the executor (running local jobs fail, with that reason)."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.close()
        with self._lock:
            telling = list(self._telling)
        for teller in telling:  # each records its job's end (failed, when the executor went with it)
            teller.join()


def _nowhere(worker: str, pid: int | None) -> None:
    """A re-evaluation's start: its job is already running."""


def _payload(trial: Trial, settings: ServerSettings) -> dict[str, Any]:
    """Everything a worker needs to measure the trial, as plain JSON (see job.execute_job). Local
    workers share this machine's cores: each takes its share of training threads, so N at once do not
    oversubscribe them (a Dask worker takes its own machine's share, job.execute_dask_job)."""
    task = trial.task
    ctx = trial.ctx
    if not settings.dask_scheduler:
        ctx = ctx.model_copy(update={"threads": threads_per_worker(local_workers(settings))})
    return {
        "task": task.name,
        "task_module": type(task).__module__,
        "task_settings": settings.task_settings(),
        "params": trial.params.model_dump(),
        "source": trial.source,
        "ctx": ctx.model_dump(),
    }
