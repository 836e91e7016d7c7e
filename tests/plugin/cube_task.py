"""A task shipped the way a plugin package ships one: its own folder, its own sandbox harness."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task, TaskSettings, sandbox_failure
from autoresearch_mcp.server.tasks.registry import register

ENTRY = "cube_harness:run"
ENV_WALL_S = "AUTORESEARCH_CUBE_WALL_S"


class CubeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: float = Field(default=1.0, ge=-3, le=3, description="where to evaluate")


class CubeSettings(TaskSettings):
    """What an operator may set for this task alone: `--task-setting cube_wall_s=N`, or the variable."""

    cube_wall_s: int = Field(
        default=20, ge=1, le=600, description="seconds per evaluation", json_schema_extra={"env": ENV_WALL_S}
    )


class CubeTask(Task):
    name = "plugin-cube"
    title = "Minimise a cube's distance from 8 (plugin test task)"
    metric = "value"
    direction = "max"
    params_model = CubeParams
    sandbox_entries = (ENTRY,)
    settings_model = CubeSettings

    def __init__(self, settings: dict[str, Any]) -> None:
        self.wall_s = CubeSettings.model_validate(settings).cube_wall_s

    def options(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s}

    def initial_artifact(self) -> str:
        return "def cube(x):\n    return -abs(x ** 3 - 8)\n"

    def check_artifact(self, source: str) -> list[str]:
        return check_source(source, GuardPolicy(required_functions={"cube": ("x",)}))

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        result = run_sandboxed(
            ENTRY, {"source": source, **params.model_dump()}, Limits(wall_s=self.wall_s, cpu_s=self.wall_s)
        )
        if result.status != "ok" or result.result is None:
            return sandbox_failure(result)
        value = float(result.result["value"])
        return Outcome(status="ok", metrics={"value": value}, metric=value)


register(CubeTask.name, CubeTask)
