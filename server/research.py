"""The server's state, owned in one place: the store, the tasks, and a service per subject of the
tools, each with its methods named like the tools:

    runs         start_run, list_runs, get_run_summary, add_note, finish_run   (runs.py)
    experiments  run_experiment, run_benchmark, get_experiment_history         (experiments.py)
    train_py     get_current_train_py, modify_train_py, revert_train_py        (train_py.py)
    jobs         submit_training_job, get_job                                  (jobs/)

`build_server` only declares the MCP surface over a `Research`; whoever starts a server opens one and
closes it at shutdown (which stops the job workers), so the lifecycle is explicit, not hidden in the
server object. Whoever wants to watch the runs adds an observer to `events` (build_server adds the
notifier that tells MCP hosts).
"""

from dataclasses import dataclass
from types import TracebackType
from typing import Self

from autoresearch_mcp.server.events import Observers
from autoresearch_mcp.server.experiments import ExperimentService
from autoresearch_mcp.server.jobs.service import JobService
from autoresearch_mcp.server.runs import RunService
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.tasks.registry import Tasks
from autoresearch_mcp.server.train_py import TrainPyService


@dataclass(frozen=True)
class _Services:
    runs: RunService
    experiments: ExperimentService
    train_py: TrainPyService
    jobs: JobService


class Research:
    def __init__(self, settings: ServerSettings | None = None, store: Store | None = None) -> None:
        """`store`: one already open (on settings.db_path), to share with its opener."""
        self.settings = settings or ServerSettings()
        self.events = Observers()
        self.tasks = Tasks(self.settings.task_settings())
        self._store = store
        self._services: _Services | None = None

    def open(self) -> Self:
        """Open the store, recover what a killed server left running, start the job service."""
        if self._services is None:
            store = self._store or Store(self.settings.db_path)
            experiments = ExperimentService(store, self.tasks, self.events)
            runs = RunService(experiments)
            runs.recover()
            jobs = JobService(experiments, self.settings)
            jobs.recover()
            self._services = _Services(runs, experiments, TrainPyService(experiments), jobs)
        return self

    def close(self) -> None:
        """Stop the job workers (queued jobs are marked failed by the next start's recovery)."""
        if self._services is not None:
            self._services.jobs.close()

    @property
    def services(self) -> _Services:
        if self._services is None:
            raise RuntimeError("Research.open() first")
        return self._services

    @property
    def runs(self) -> RunService:
        return self.services.runs

    @property
    def experiments(self) -> ExperimentService:
        return self.services.experiments

    @property
    def train_py(self) -> TrainPyService:
        return self.services.train_py

    @property
    def jobs(self) -> JobService:
        return self.services.jobs

    @property
    def store(self) -> Store:
        return self.experiments.store

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
