"""A tiny test-only task: scores a quadratic in a sandboxed script, in milliseconds.

Plugged in the way outside tasks are (the registry), so server tests run the real experiment path
(store, sandbox subprocess, summary) without XGBoost. `sleep` lets a test hold an experiment open.
"""

import textwrap
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.contract.models import ScriptedPlan
from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task, sandbox_failure
from autoresearch_mcp.server.tasks.registry import register


class ToyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: float = Field(default=0.0, ge=-10, le=10, description="first coordinate")
    y: float = Field(default=0.0, ge=-10, le=10, description="second coordinate")
    sleep: float = Field(default=0.0, ge=0, le=60, description="seconds to wait inside the experiment")


SOURCE = textwrap.dedent(
    """\
    import time


    def score(params):
        time.sleep(params["sleep"])
        if params["x"] == 9.0:
            raise ValueError("x=9 always crashes")
        return -((params["x"] - 0.3) ** 2) - (params["y"] + 0.2) ** 2
    """
)

GUARD = GuardPolicy(allowed_imports=frozenset({"time", "math"}), required_functions={"score": ("params",)})


class ToyTask(Task):
    sandbox_entries = ("autoresearch_mcp.sandbox.script:run_script",)
    name = "toy-quadratic"
    title = "Maximise a quadratic (test-only task)"
    metric = "score"
    direction = "max"
    params_model = ToyParams

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    def options(self) -> dict[str, Any]:
        return {"limits": Limits(wall_s=30, cpu_s=30, memory_mb=256).model_dump()}

    def scripted_plan(self) -> ScriptedPlan:
        # The double draws every numeric param; `sleep` is for tests that hold an experiment open, and
        # drawn from its bounds it made scripted runs wait up to the 30 s limit per experiment.
        return ScriptedPlan(prior={"sleep": (0.0, 0.0)})

    def initial_artifact(self) -> str:
        return SOURCE

    def check_artifact(self, source: str) -> list[str]:
        return check_source(source, GUARD)

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        payload = {"source": source, "call": "score", "args": [params.model_dump()]}
        result = run_sandboxed(
            "autoresearch_mcp.sandbox.script:run_script", payload, Limits(**ctx.options["limits"])
        )
        if result.status != "ok" or result.result is None:
            return sandbox_failure(result)
        value = float(result.result["value"])
        return Outcome(status="ok", metrics={"score": value}, metric=value)


register("toy-quadratic", ToyTask)
