"""What the stateful agent keeps and does whatever the model's reply protocol: its state between
turns, the code turn's part it owns (set_aside.py), its tool calls and their accounting. The protocols
are protocol_tools.py (tool calls), protocol_json.py (params as a JSON object in text) and
protocol_text.py (code in text); stateful.py is the loop."""

import json
from typing import Any

from autoresearch_mcp.client.agent import Agent
from autoresearch_mcp.client.batch import over_batch
from autoresearch_mcp.client.check import (
    AgentConfig,
    Progress,
)
from autoresearch_mcp.client.connect import ResearchClient, ToolOutcome
from autoresearch_mcp.client.llm.base import Message, ToolCall, ToolResult, ToolSpec
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.set_aside import SetAside, set_aside_note
from autoresearch_mcp.client.tools import server_arguments
from autoresearch_mcp.client.window import Turn, window_texts
from autoresearch_mcp.contract.arguments import GetJobArgs, RunBenchmarkArgs
from autoresearch_mcp.contract.code_focus import changed_functions, held_functions
from autoresearch_mcp.contract.focus import result_line, version_line
from autoresearch_mcp.contract.models import ArtifactInfo, ExperimentResult, JobInfo, Run
from autoresearch_mcp.contract.tools import EDIT_TOOLS, EXPERIMENT_TOOLS, ToolName

# The changes of train.py the agent benchmarks at once, where the task's profile says so.
CHANGE_TOOLS = (ToolName.MODIFY_TRAIN_PY, ToolName.REPLACE_FUNCTION)
MAX_RESULT_CHARS = 3000
JOB_WAIT_S = 60.0  # one get_job's wait; the agent asks again until the job ends


def result_text(tool: str, outcome: ToolOutcome) -> str:
    """A compact tool result for the model (the full record stays on the server)."""
    if not outcome.ok:
        return outcome.text[:MAX_RESULT_CHARS]
    if tool in EXPERIMENT_TOOLS:
        return result_line(outcome.as_model(ExperimentResult))
    if tool in EDIT_TOOLS:
        return version_line(outcome.as_model(ArtifactInfo))
    if tool == ToolName.GET_CURRENT_TRAIN_PY:  # the source comes as plain text, once
        return outcome.text
    return json.dumps(outcome.data, separators=(",", ":"))[:MAX_RESULT_CHARS]


def first_line(refusal: str) -> str:
    """A batch item's refusal in one line: an invalid item's reason without the list of every param
    that follows it (the system prompt gives their ranges; a batch may refuse several items)."""
    return refusal.partition("\n")[0].removesuffix(" Allowed parameters:")


class StatefulBase(Agent):
    turns: list[Turn]  # every exchange of this run; the window is chosen from them
    latest_version: int  # text replies: the newest train.py version the model was told of
    specs: dict[str, ToolSpec]  # the tools offered, by name
    current_code: str  # code tasks: train.py as the last request had it
    changed: list[str]  # code tasks: the functions the last change of train.py touched
    last_result: ExperimentResult | None  # the latest experiment this agent recorded

    def __init__(
        self,
        rc: ResearchClient,
        transcript: Transcript,
        run_id: str,
        config: AgentConfig,
        progress: Progress | None = None,
    ) -> None:
        super().__init__(rc, transcript, run_id, config, progress)
        self.turns, self.latest_version, self.specs = [], 1, {}
        self.current_code, self.changed, self.last_result = "", [], None
        self.whole_file = False  # the last text turn showed the whole file and asked for it whole
        self.aside = SetAside()  # functions whose versions kept failing (set_aside.py)
        # --batch: the last batch's items that recorded no experiment (refused, over K, a failed job),
        # each with its reason, and how many did: the next turn's summary lists those
        self.batch_lines: list[str] = []
        self.batch_recorded = 0

    async def _batch(
        self, items: "list[dict[str, Any]] | list[dict[str, Any] | str]", turn: Turn
    ) -> list[tuple[str, bool]]:
        """Submit every item (up to --batch) as a background job, then wait for each: one line per item,
        and whether it was refused. A refusal costs nothing (the server takes budget only for a job it
        accepts); a reply whose items all were refused counts as one failure, as one reply is one try."""
        k = self.config.batch
        fixed = self.config.task.agent.fixed_arguments.get(ToolName.RUN_EXPERIMENT, {})
        said: list[tuple[str, bool]] = []
        jobs: dict[int, str] = {}  # item position -> job id
        for index, item in enumerate(items, 1):
            if isinstance(item, str):
                said.append((f"item {index}: {item}", True))
                continue
            if index > k:
                self.refused(kind="over_batch")
                said.append((over_batch(index, k), True))
                continue
            arguments = {"params": item, **fixed, "run_id": self.run_id}
            outcome = await self.rc.call_tool(ToolName.SUBMIT_TRAINING_JOB, arguments)
            if not outcome.ok:
                self.refused(outcome)
                why = self.refusal_text(ToolName.RUN_EXPERIMENT, outcome, item)
                said.append((f"item {index} refused: {first_line(why)}", True))
                continue
            jobs[index] = outcome.as_model(JobInfo).job.id
            said.append(("", False))
        for index, job_id in jobs.items():
            said[index - 1] = await self._collect(index, job_id, turn)
        if not turn.recorded_experiment:
            self.failures += 1
        else:  # a batch with nothing recorded stays in the window, which says the same
            self.batch_lines = [text for text, unrecorded in said if unrecorded]
            self.batch_recorded = len(said) - len(self.batch_lines)
        return said

    async def _collect(self, index: int, job_id: str, turn: Turn) -> tuple[str, bool]:
        """Wait for one job of a batch and account for its experiment."""
        while True:
            outcome = await self.rc.call(GetJobArgs(job_id=job_id, wait_seconds=JOB_WAIT_S))
            if not outcome.ok:
                return f"item {index}: {outcome.text[:MAX_RESULT_CHARS]}", True
            info = outcome.as_model(JobInfo)
            if info.job.status in ("queued", "running"):
                continue
            if info.result is None:
                return f"item {index}: the job failed: {info.job.error or 'no reason given'}", True
            call = ToolCall(id=f"job-{job_id}", name=ToolName.RUN_EXPERIMENT, arguments={})
            recorded = ToolOutcome(ok=True, text="", data=info.result.model_dump(mode="json"))
            self._account(call, recorded, turn)
            return f"item {index}: {result_line(info.result)}", False

    async def _focus(self, window: list[Turn], run: Run) -> tuple[str, list[str], frozenset[str]]:
        """What a code turn needs of this agent (the server renders the view of train.py: server/turn.py):
        a note when a function's versions failed again and again and it is set aside (set_aside.py),
        the functions the window holds as they are now, and the ones set aside."""
        files = self.config.task.files or None  # one file: its own name (slow.py), not train.py
        code = await self.rc.train_py(self.run_id)
        if self.current_code and code != self.current_code:
            self.changed = changed_functions(self.current_code, code, files)
        self.current_code = self.code_now = code
        info = await self.rc.profile(self.run_id)
        failed = False
        last = self.last_result.experiment if self.last_result is not None else None
        current = info is None or (last is not None and info.version == last.artifact_version)
        if last is not None and last.status not in ("ok", "running") and current:
            failed = True
        note = ""
        stuck = self.aside.record(last.iteration, last.status, self.changed) if last is not None else []
        if stuck:
            note, went_back = await self._move_on(stuck, run, on_failed=failed)
            if went_back:
                code = self.current_code = self.code_now = await self.rc.train_py(self.run_id)
                info = await self.rc.profile(self.run_id)
                self.changed, failed = [], False
                self.turns.clear()  # the failed versions' turns: the summary keeps their results
                window = []
        self.code_broken = failed
        skip = self.aside.skip(info.profile if info is not None else None)
        return note, held_functions(code, files, window_texts(window)), skip

    async def _move_on(self, stuck: list[str], run: Run, on_failed: bool) -> tuple[str, bool]:
        """Set `stuck` aside: back to the best version (the original when nothing ran well) when
        train.py is still the failed version. The agent's own step, not the model's: it counts nothing."""
        if not on_failed:
            return set_aside_note(stuck, None, 0, False, run.metric_name), False
        back = run.best.artifact_version if run.best is not None else 1
        outcome = await self.rc.call_tool(ToolName.REVERT_TRAIN_PY, {"version": back, "run_id": self.run_id})
        if not outcome.ok:
            refused = (outcome.text or "no reason given")[:200]
            return set_aside_note(stuck, None, back, False, run.metric_name, refused=refused), False
        version = outcome.as_model(ArtifactInfo).version
        self.latest_version = max(self.latest_version, version)
        return set_aside_note(stuck, version, back, run.best is not None, run.metric_name), True

    async def _run_tools(self, assistant: Message, calls: list[ToolCall], names: set[str]) -> Turn:
        profile = self.config.task.agent
        results: list[ToolResult] = []
        turn = Turn(assistant=assistant, user=Message(role="user"))
        ended = edit_refused = failed = False
        for call in calls:
            if ended:
                text, is_error = "not run: the run has ended", True
            elif edit_refused and call.name in EXPERIMENT_TOOLS:
                # Benchmarking the unchanged file would cost a unit of budget (or be refused as a repeat).
                text, is_error = "not run: the edit before it in this reply was refused", True
            elif call.parse_error is not None:
                text, is_error = f"invalid arguments: {call.parse_error}", True
                self.refused(kind="invalid_arguments")
            elif call.name not in names:
                text, is_error = f"unknown tool {call.name!r}; use one of {sorted(names)}", True
                self.refused(kind="unknown_tool")
            else:
                fixed = profile.fixed_arguments.get(call.name, {})
                arguments = server_arguments(self.specs.get(call.name), call.arguments)
                outcome = await self.rc.call_tool(call.name, {**arguments, **fixed, "run_id": self.run_id})
                text, is_error = result_text(call.name, outcome), not outcome.ok
                if not outcome.ok:
                    self.refused(outcome)
                    sent = arguments.get("params")
                    text = self.refusal_text(call.name, outcome, sent if isinstance(sent, dict) else {})
                ended = self._account(call, outcome, turn)
                edit_refused = edit_refused or (call.name in CHANGE_TOOLS and not outcome.ok)
                if call.name in CHANGE_TOOLS and outcome.ok and profile.benchmark_after_edit:
                    # The agent's own step, shown to the model with its edit's result.
                    bench = ToolCall(id=f"{call.id}-bench", name=ToolName.RUN_BENCHMARK, arguments={})
                    measured = await self.rc.call(RunBenchmarkArgs(run_id=self.run_id))
                    text += "; benchmarked: " + result_text(ToolName.RUN_BENCHMARK, measured)
                    is_error = not measured.ok
                    ended = self._account(bench, measured, turn)
            failed = failed or is_error
            results.append(ToolResult(tool_call_id=call.id, content=text, is_error=is_error))
        if failed and not turn.recorded_experiment:
            self.failures += 1  # one reply, one attempt: its refused calls count as one failure
        turn.user = Message(role="user", tool_results=results)
        return turn

    @property
    def reverted(self) -> bool:
        """Text replies: whether a revert happened since the last experiment."""
        for turn in reversed(self.turns):
            if turn.recorded_experiment:
                return False
            if turn.reverted:
                return True
        return False

    def _account(self, call: ToolCall, outcome: ToolOutcome, turn: Turn) -> bool:
        """Count an experiment the call recorded; whether the run has ended with it."""
        if not outcome.ok or call.name not in EXPERIMENT_TOOLS:
            return False
        turn.recorded_experiment = True
        result = outcome.as_model(ExperimentResult)
        self.last_result = result
        turn.failed_experiment = result.experiment.status not in ("ok", "running")
        if result.experiment.status == "ok":
            self.failures = 0
        else:
            self.failures += 1
        return result.run_status != "running"
