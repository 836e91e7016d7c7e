"""The toy task, but its first experiment takes a while: something for Ctrl-C to interrupt.

Plugged in only where a test names it (AUTORESEARCH_TASK_PLUGINS=slow_toy_task), so the task list the
other tests see is unchanged. The wait is in the server's worker thread, before the sandbox: stopping the
server ends it, as it would end a long training.
"""

import time
from typing import Any

from pydantic import BaseModel

from autoresearch_mcp.server.tasks.base import ExecContext, Outcome
from autoresearch_mcp.server.tasks.registry import register
from toy_task import ToyTask

FIRST_EXPERIMENT_S = 60.0


class SlowToyTask(ToyTask):
    name = "slow-quadratic"
    title = "The toy quadratic, with a slow first experiment (test-only task)"

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        if ctx.iteration == 1:
            time.sleep(FIRST_EXPERIMENT_S)
        return super().execute(params, source, ctx)


register("slow-quadratic", SlowToyTask)
