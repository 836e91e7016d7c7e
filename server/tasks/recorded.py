"""A run's task as its record knows it, for a server where that task is not registered (a task folder
registered by another server, or a plugin no longer installed): enough to read the run (its summary,
show, report), never to run it."""

from typing import Any

from pydantic import BaseModel, ConfigDict

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task


class AnyParams(BaseModel):
    model_config = ConfigDict(extra="allow")


def recorded_task(run: Run) -> Task:
    """A read-only stand-in for `run`'s task, from what the run recorded at start."""
    return type(
        "RecordedTask",
        (RecordedTask,),
        {
            "name": run.task,
            "title": f"{run.task} (not registered on this server)",
            "metric": run.metric_name,
            "direction": run.direction,
        },
    )()


class RecordedTask(Task):
    params_model = AnyParams

    def _refuse(self) -> ResearchError:
        return ResearchError(
            f"task {self.name} is not registered on this server, so its runs can be read but not run; "
            "register it (a task folder: serve --task-dir PATH) to go on",
            kind="unknown_task",
        )

    def options(self) -> dict[str, Any]:
        raise self._refuse()

    def initial_artifact(self) -> str:
        raise self._refuse()

    def check_artifact(self, source: str) -> list[str]:
        raise self._refuse()

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        raise self._refuse()
