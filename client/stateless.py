"""The stateless baseline: every iteration one fresh request, a single user message holding the
instructions and the full history, against the same server and tasks.

Only the context strategy differs from the stateful agent; the history is kept here, on the client,
as the paper's runner kept it, and re-sent in full every time. Two of them:
- `stateless`, the paper's: its history lines and nothing else, byte for byte;
- `stateless-strong`, the strongest honest one: a reply that recorded nothing is answered with what
  the stateful agent is told (the server's refusal, the value to change after an exact repeat), in
  one line after the history, and HPO history lines carry the same values as `k=v` (half the tokens).
Both mark where a provider should cache the message (after the history the previous call held), as a
careful client would; the anthropic backend sends those marks as cache_control breakpoints.
"""

from autoresearch_mcp.client.agent import Agent
from autoresearch_mcp.client.check import (
    AgentConfig,
    AgentResult,
    AgentStop,
    Mode,
    Progress,
    StopReason,
    check,
    finish,
)
from autoresearch_mcp.client.code_blocks import function_versions, parse_code
from autoresearch_mcp.client.connect import ResearchClient, ToolOutcome
from autoresearch_mcp.client.llm.base import LLMError, LLMRequest, Message
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.prompts import (
    CodeVersion,
    benchmark_text,
    refusal_feedback,
    stateless_code,
    stateless_hpo,
)
from autoresearch_mcp.client.replies import parse_json_object, says_done
from autoresearch_mcp.contract.arguments import RunBenchmarkArgs, RunExperimentArgs
from autoresearch_mcp.contract.code_focus import lines_line, time_line
from autoresearch_mcp.contract.models import Experiment, ExperimentResult, Run
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.contract.tools import ToolName


class StatelessAgent(Agent):
    def __init__(
        self,
        rc: ResearchClient,
        transcript: Transcript,
        run_id: str,
        config: AgentConfig,
        task_description: str,
        progress: Progress | None = None,
        *,
        strong: bool = False,
    ) -> None:
        super().__init__(rc, transcript, run_id, config, progress)
        self.description = task_description
        self.strong = strong
        self.mode: Mode = "stateless-strong" if strong else "stateless"
        self.feedback: str | None = None  # strong: why the last reply recorded nothing
        self.experiments: list[Experiment] = []  # HPO: every experiment so far
        self.versions: list[CodeVersion] = []  # code: every version with its benchmark
        self.ran_well = False  # an experiment ended ok: before that, DONE is a misfire (as in stateful)
        self.source = ""  # code: the current train.py
        self.profile: Profile | None = None  # code: where the latest version spends its time

    async def run(self) -> AgentResult:
        code_task = self.config.task.kind == "code"
        # A run resumed, or started from an earlier run (whose best the server re-measured as #1), has
        # experiments already: the history this baseline keeps starts with them.
        earlier = await self.rc.history(self.run_id)
        if code_task:
            current = await self.rc.train_py(self.run_id)
            headline, block = "original", self.config.task.agent.stateless.not_run
            if earlier:
                last = earlier[-1]
                repeats = int(last.metrics["repeats"]) if "repeats" in last.metrics else None
                headline, block = benchmark_text(
                    self.config.task, last.status, last.metrics, last.error_tail, repeats
                )
            self.versions.append(CodeVersion(iteration=0, code=current, headline=headline, benchmark=block))
            self.source = self.code_now = current
            info = await self.rc.profile(self.run_id)
            self.profile = info.profile if info is not None else None
        else:
            self.experiments = list(earlier)
            self.ran_well = any(e.status == "ok" for e in earlier)
        stop: tuple[StopReason, str] | None = None
        while True:
            run = await self.rc.run(self.run_id)
            stop = stop or check(run, self.failures, self.config, self.calls)
            if stop:
                break
            task = self.config.task.model_copy(update={"description": self.description})
            feedback = self.feedback if self.strong else None
            prompt = (
                stateless_code(task, self.versions, self._profile_text(), feedback=feedback)
                if code_task
                else stateless_hpo(task, self.experiments, compact=self.strong, feedback=feedback)
            )
            message = Message(role="user", text=prompt.text, cache_points=prompt.cache_points)
            request = LLMRequest(system="", messages=[message], max_tokens=self.config.max_tokens)
            try:
                response = await self.ask(request, run)
            except LLMError as exc:
                stop = ("llm-error", str(exc))
                break
            except AgentStop as exc:
                stop = exc.stop
                break
            if code_task:
                stop = await self._code_step(response.text, run)
            else:
                stop = await self._hpo_step(response.text, run)
        return await finish(self.rc, self.run_id, self.mode, stop, self.calls, self.transcript, self.refusals)

    def _unused(self, reason: str, outcome: ToolOutcome | None = None, kind: str | None = None) -> None:
        """A reply that recorded nothing: one failure, its refusal counted, and (strong) its reason kept
        for the next prompt."""
        self.failures += 1
        self.refused(outcome, kind=kind)
        self.feedback = refusal_feedback(reason)

    def _done(self, text: str, run: Run) -> tuple[StopReason, str] | None:
        """A DONE after something ran well: the end of the run, unless it is early (Agent.early_done).
        The strong baseline is told why its reply was not used; the paper's is asked again unchanged."""
        question = self.early_done(run)
        if question is None:
            return ("llm-done", text.strip()[:300])
        self.feedback = refusal_feedback(question)
        return None

    async def _hpo_step(self, text: str, run: Run) -> tuple[StopReason, str] | None:
        params = parse_json_object(text)
        if params is None:
            if says_done(text) and self.ran_well:
                return self._done(text, run)
            self._unused("it held no JSON object of hyperparameters.", kind="unparsed_reply")
            return None
        if isinstance(params.get("params"), dict):
            params = params["params"]
        outcome = await self.rc.call(RunExperimentArgs(params=params, run_id=self.run_id))
        if not outcome.ok:
            self._unused(self.refusal_text(ToolName.RUN_EXPERIMENT, outcome, params), outcome)
            return None
        experiment = outcome.as_model(ExperimentResult).experiment
        self.experiments.append(experiment)
        self.feedback = None
        self.failures = 0 if experiment.status == "ok" else self.failures + 1
        self.ran_well = self.ran_well or experiment.status == "ok"
        return None

    def _profile_text(self) -> str:
        if self.profile is None:
            return ""
        return " ".join(part for part in (time_line(self.profile), lines_line(self.profile)) if part)

    async def _code_step(self, text: str, run: Run) -> tuple[StopReason, str] | None:
        code = parse_code(text)
        if code is None:
            if says_done(text) and self.ran_well:
                return self._done(text, run)
            self._unused("it held no code (CODE: and a complete function or file).", kind="unparsed_reply")
            return None
        iteration = len(self.versions)
        description = f"stateless iteration {iteration}"
        files = self.config.task.files or None  # one file: its own name (slow.py), not train.py
        calls = [
            (ToolName.REPLACE_FUNCTION, {"name": name, "source": source, "description": description})
            for name, source in function_versions(code, self.source, files) or []
        ] or [(ToolName.MODIFY_TRAIN_PY, {"source": code, "description": description})]
        for tool, arguments in calls:  # the model's code as it sent it (the server judges it)
            changed = await self.rc.call_tool(tool, {**arguments, "run_id": self.run_id})
            if not changed.ok:
                self._unused(self.refusal_text(tool, changed, {}), changed)
                return None
        self.source = self.code_now = await self.rc.train_py(self.run_id)
        outcome = await self.rc.call(RunBenchmarkArgs(run_id=self.run_id))
        if not outcome.ok:
            self._unused(self.refusal_text(ToolName.RUN_BENCHMARK, outcome, {}), outcome)
            return None
        exp = outcome.as_model(ExperimentResult).experiment
        metrics = exp.metrics
        repeats = int(metrics["repeats"]) if "repeats" in metrics else None
        original = self.versions[0]
        if original.headline == "original" and "baseline_ms" in metrics:
            base = metrics["baseline_ms"]
            original.headline = f"time={base:.2f}ms, speedup=1.00x"
            original.benchmark = benchmark_text(
                self.config.task, "ok", {"time_ms": base, "baseline_ms": base, "speedup": 1.0}, None, repeats
            )[1]
        headline, block = benchmark_text(self.config.task, exp.status, metrics, exp.error_tail, repeats)
        self.versions.append(
            CodeVersion(iteration=iteration, code=self.source, headline=headline, benchmark=block)
        )
        self.profile = outcome.as_model(ExperimentResult).profile
        self.code_broken = exp.status != "ok"
        self.feedback = None
        self.failures = 0 if exp.status == "ok" else self.failures + 1
        self.ran_well = self.ran_well or exp.status == "ok"
        return None
