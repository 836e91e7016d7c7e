"""What the run logic tells whoever watches it: plain callbacks, no MCP.

The services (runs, experiments, jobs) call these as things happen; the MCP side (notify.py) turns them into log
notifications and resource updates for hosts. The default does nothing, so the run logic runs and tests
the same with no one watching.
"""

import logging
from collections.abc import Callable

from autoresearch_mcp.contract.models import Experiment, Job, Run

log = logging.getLogger(__name__)

# How long work tells its caller where it stands: (done so far, total or None, a message).
Progress = Callable[[float, float | None, str], None]


class ResearchEvents:
    """An observer of runs, experiments and jobs; every method is a no-op here.

    Called on whichever thread did the work (a tool's worker thread, an executor's callback thread), in
    the order things happened. Implementations must be quick and thread-safe."""

    def run_started(self, run: Run) -> None:
        """A run was created."""

    def run_finished(self, run: Run) -> None:
        """A run left `running` (stopped, converged, exhausted)."""

    def experiment_started(self, run: Run, experiment: Experiment) -> None:
        """An experiment was reserved and is about to run (here, or queued as a job)."""

    def experiment_ended(self, run: Run, experiment: Experiment) -> None:
        """An experiment was recorded with its status and metric; `run` is the run after it."""

    def job_changed(self, job: Job) -> None:
        """A background job was queued, started running, or ended (done or failed)."""

    def refused(self, run_id: str | None, tool: str, kind: str, message: str) -> None:
        """A call was refused without cost (invalid params, a repeat, a rejected edit, ...)."""


class Observers(ResearchEvents):
    """Fans each event out to every added observer. An observer that raises is logged and skipped:
    watching a run must never break it."""

    def __init__(self) -> None:
        self._observers: list[ResearchEvents] = []

    def add(self, observer: ResearchEvents) -> None:
        self._observers.append(observer)

    def _each(self, event: str, *args: object) -> None:
        for observer in list(self._observers):
            try:
                getattr(observer, event)(*args)
            except Exception:  # the observer's bug, not the run's: log it and carry on
                log.exception("observer %r failed on %s", observer, event)

    def run_started(self, run: Run) -> None:
        self._each("run_started", run)

    def run_finished(self, run: Run) -> None:
        self._each("run_finished", run)

    def experiment_started(self, run: Run, experiment: Experiment) -> None:
        self._each("experiment_started", run, experiment)

    def experiment_ended(self, run: Run, experiment: Experiment) -> None:
        self._each("experiment_ended", run, experiment)

    def job_changed(self, job: Job) -> None:
        self._each("job_changed", job)

    def refused(self, run_id: str | None, tool: str, kind: str, message: str) -> None:
        self._each("refused", run_id, tool, kind, message)
