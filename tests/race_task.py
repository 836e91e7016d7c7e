"""A test-only task for experiments measured at once: no sandbox, a metric in microseconds after an
optional wait, so that K jobs finish together and race to be recorded.

`luck` is added on the run's own seed only (as one lucky seed flatters a configuration), and the keep
rule asks for a margin over the best's mean, as a noise-aware rule does: whether a result is kept
depends on which best it meets, the case concurrency can get wrong.
"""

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.server.store import Incumbent
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task, Verdict
from autoresearch_mcp.server.tasks.registry import register

MARGIN = 0.05  # a result is kept only this far beyond the best's mean


class RaceParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: float = Field(default=0.0, ge=-10, le=10)
    luck: float = Field(default=0.0, ge=0, le=10, description="added on the run's own seed only")
    sleep: float = Field(default=0.0, ge=0, le=60, description="seconds to wait before the result")


class RaceTask(Task):
    name = "race-luck"
    title = "A seed-dependent quadratic with a margin to beat (test-only)"
    metric = "score"
    params_model = RaceParams

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    def options(self) -> dict[str, Any]:
        return {"limits": {"wall_s": 30, "cpu_s": 30, "memory_mb": 256, "threads": 64}}

    def initial_artifact(self) -> str:
        return "# nothing to run\n"

    def check_artifact(self, source: str) -> list[str]:
        return []

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        assert isinstance(params, RaceParams)
        time.sleep(params.sleep)
        value = -((params.x - 0.3) ** 2) + (params.luck if ctx.seed == 42 else 0.0)
        threads = float(ctx.limits().threads)  # the training threads this measurement was given
        return Outcome(status="ok", metric=value, metrics={"score": value, "threads": threads})

    def verdict(self, outcome: Outcome, best: Incumbent | None) -> Verdict:
        assert outcome.metric is not None
        if best is None or outcome.metric > best.value + MARGIN:
            return Verdict(True, "kept: beyond the margin")
        return Verdict(False, "not kept: within the margin of the best")


register("race-luck", RaceTask)
