"""The stateless baseline: every iteration one fresh request, a single user message holding the
instructions and the full history in the paper's format, against the same server and tasks.

Only the context strategy differs from the stateful agent; the history is kept here, on the client,
as the paper's runner kept it, and re-sent in full every time.
"""

from typing import Any

from autoresearch_mcp.client.check import (
    Agent,
    AgentConfig,
    AgentResult,
    Progress,
    StopReason,
    check,
    finish,
)
from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.llm.base import LLMError, LLMRequest, Message
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.prompts import (
    benchmark_text,
    parse_code,
    parse_json_object,
    stateless_code,
    stateless_hpo,
)
from autoresearch_mcp.client.tools import task_params_schema


class StatelessAgent(Agent):
    def __init__(
        self,
        rc: ResearchClient,
        transcript: Transcript,
        run_id: str,
        config: AgentConfig,
        task_description: str,
        progress: Progress | None = None,
    ) -> None:
        super().__init__(rc, transcript, run_id, config, progress)
        self.description = task_description
        self.history: list[dict[str, Any]] = []  # HPO: experiments; code: versions with benchmarks

    async def run(self) -> AgentResult:
        code_task = self.config.experiment_tool == "run_benchmark"
        if code_task:
            original = await self.rc.must("get_current_train_py", {"run_id": self.run_id})
            self.history.append(
                {
                    "iteration": 0,
                    "code": original["source"],
                    "headline": "original",
                    "benchmark": "Not timed yet: the first benchmark times it as the baseline.",
                }
            )
        else:
            tools = {tool.name: tool for tool in await self.rc.tools()}
            schema = tools["run_experiment"].input_schema["properties"]["params"]
            self.params_schema = task_params_schema(schema, self.config.task)
        stop: tuple[StopReason, str] | None = None
        while True:
            run = await self.rc.run(self.run_id)
            stop = stop or check(run, self.failures, self.config, self.calls)
            if stop:
                break
            prompt = (
                stateless_code(self.description, self.history)
                if code_task
                else stateless_hpo(self.description, self.params_schema, run["metric_name"], self.history)
            )
            request = LLMRequest(
                system="", messages=[Message(role="user", text=prompt)], max_tokens=self.config.max_tokens
            )
            try:
                response = await self.ask(request, run)
            except LLMError as exc:
                stop = ("llm-error", str(exc))
                break
            if code_task:
                stop = await self._code_step(response.text)
            else:
                stop = await self._hpo_step(response.text)
        return await finish(self.rc, self.run_id, "stateless", stop, self.calls, self.transcript)

    async def _hpo_step(self, text: str) -> tuple[StopReason, str] | None:
        params = parse_json_object(text)
        if params is None:
            if "DONE" in text and self.history:
                return ("llm-done", text.strip()[:300])
            self.failures += 1
            return None
        if isinstance(params.get("params"), dict):
            params = params["params"]
        outcome = await self.rc.call("run_experiment", {"params": params, "run_id": self.run_id})
        if not outcome.ok or outcome.data is None:
            self.failures += 1
            return None
        experiment = outcome.data["experiment"]
        self.history.append(experiment)
        self.failures = 0 if experiment["status"] == "ok" else self.failures + 1
        return None

    async def _code_step(self, text: str) -> tuple[StopReason, str] | None:
        code = parse_code(text)
        if code is None:
            if "DONE" in text and len(self.history) > 1:
                return ("llm-done", text.strip()[:300])
            self.failures += 1
            return None
        iteration = len(self.history)
        changed = await self.rc.call(
            "modify_train_py",
            {"source": code, "description": f"stateless iteration {iteration}", "run_id": self.run_id},
        )
        if not changed.ok:
            self.failures += 1
            return None
        outcome = await self.rc.call("run_benchmark", {"run_id": self.run_id})
        if not outcome.ok or outcome.data is None:
            self.failures += 1
            return None
        exp = outcome.data["experiment"]
        metrics = exp.get("metrics") or {}
        repeats = int(metrics["repeats"]) if "repeats" in metrics else None
        if self.history[0]["headline"] == "original" and "baseline_ms" in metrics:
            base = metrics["baseline_ms"]
            self.history[0]["headline"] = f"time={base:.2f}ms, speedup=1.00x"
            self.history[0]["benchmark"] = benchmark_text(
                "ok", {"time_ms": base, "baseline_ms": base, "speedup": 1.0}, None, repeats
            )[1]
        headline, block = benchmark_text(exp["status"], metrics, exp.get("error_tail"), repeats)
        self.history.append({"iteration": iteration, "code": code, "headline": headline, "benchmark": block})
        self.failures = 0 if exp["status"] == "ok" else self.failures + 1
        return None
