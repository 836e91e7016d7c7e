"""The server's state, owned in one place: the store, the run service and the job service.

`build_server` only declares the MCP surface over a `Research`; whoever starts a server opens one and
closes it at shutdown (which stops the job workers), so the lifecycle is explicit, not hidden in the
server object. Whoever wants to watch the runs adds an observer to `events` (build_server adds the
notifier that tells MCP hosts).
"""

from types import TracebackType
from typing import Self

from autoresearch_mcp.server.events import Observers
from autoresearch_mcp.server.jobs import JobService
from autoresearch_mcp.server.runs import RunService
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store


class Research:
    def __init__(self, settings: ServerSettings | None = None) -> None:
        self.settings = settings or ServerSettings()
        self.events = Observers()
        self._runs: RunService | None = None
        self._jobs: JobService | None = None

    def open(self) -> Self:
        """Open the store, recover what a killed server left running, start the job service."""
        if self._runs is None:
            runs = RunService(Store(self.settings.db_path), self.settings, self.events)
            runs.recover()
            jobs = JobService(runs, self.settings)
            jobs.recover()
            self._runs, self._jobs = runs, jobs
        return self

    def close(self) -> None:
        """Stop the job workers (queued jobs are marked failed by the next start's recovery)."""
        if self._jobs is not None:
            self._jobs.close()

    @property
    def runs(self) -> RunService:
        if self._runs is None:
            raise RuntimeError("Research.open() first")
        return self._runs

    @property
    def jobs(self) -> JobService:
        if self._jobs is None:
            raise RuntimeError("Research.open() first")
        return self._jobs

    @property
    def store(self) -> Store:
        return self.runs.store

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
