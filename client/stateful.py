"""The stateful agent (REASON -> TOOLS -> CHECK): every LLM request carries the fixed system prompt,
the agent's small tool set, the run summary read fresh from the server, and a bounded window.

The window is a list of turns (an assistant message and the user message answering it), so it never
separates a tool call from its result. By default it holds only the turns since the last recorded
experiment: the summary already carries every result. In a code task the turn's message also holds
where train.py spends its time and the function in focus (focus.py: the hottest, or the one that just
failed), never the whole file; the window then also keeps the turn of the last experiment when it
failed, so that the model sees what it wrote beside what went wrong, and that code is not sent again.
The agent benchmarks each accepted change itself, so the model needs one tool call per reply
(replace_function with a function's new version, or modify_train_py with edits). With `code_replies=
"text"` the model offers no tool call at all: it answers with a function's new version in a python
block, or SEARCH/REPLACE edits (small models cannot write code inside a JSON string), which the agent
sends as those calls and benchmarks. In a params task with `param_replies="text"` (the default) the
model answers with one JSON object of the params it changes, which the agent sends as run_experiment:
no tool definitions ride on every request (a provider bills them, and its tool-use preamble, on each
call: 313-346 hidden tokens on Claude 4 models, about 230 in llama.cpp's chatml-function-calling).
"""

import json
from typing import Any

from autoresearch_mcp.client.batch import batch_turn, over_batch, parse_proposals
from autoresearch_mcp.client.check import (
    Agent,
    AgentConfig,
    AgentResult,
    AgentStop,
    Progress,
    StopReason,
    check,
    finish,
)
from autoresearch_mcp.client.connect import ResearchClient, ToolOutcome
from autoresearch_mcp.client.llm.base import LLMError, LLMRequest, Message, ToolCall, ToolResult, ToolSpec
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.prompts import (
    NO_EXPERIMENT_YET,
    NUDGE,
    NUDGE_TOOL,
    TEXT_SYSTEM_PROMPT,
    json_nudge,
    text_format,
    text_nudge,
)
from autoresearch_mcp.client.replies import describe_reply, parse_json_object, read_text_reply, says_done
from autoresearch_mcp.client.set_aside import SetAside, set_aside_note
from autoresearch_mcp.client.tools import agent_tools, server_arguments
from autoresearch_mcp.client.window import Turn, select_window, text_messages, window_texts
from autoresearch_mcp.contract.arguments import GetJobArgs, RunBenchmarkArgs
from autoresearch_mcp.contract.code_focus import changed_functions, held_functions, shows_whole_file
from autoresearch_mcp.contract.errors import RepeatDetail
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


class StatefulAgent(Agent):
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
        self.batch_lines: list[str] = []  # --batch: the last batch's line per item, for the next turn

    async def run(self) -> AgentResult:
        task = self.config.task
        text_mode = task.kind == "code" and self.config.code_replies == "text"
        json_mode = self.json_replies
        tools = [] if text_mode else agent_tools(await self.rc.tools(), task)
        self.specs = {tool.name: tool for tool in tools}
        names = set(self.specs)
        if json_mode:
            tools = []  # the agent makes the call: the model only writes its arguments
        system = (
            (task.agent.text_system_prompt or TEXT_SYSTEM_PROMPT)
            if text_mode or json_mode
            else task.agent.system_prompt
        )
        stop: tuple[StopReason, str] | None = None
        while True:
            run = await self.rc.run(self.run_id)
            stop = stop or check(run, self.failures, self.config, self.calls)
            if stop:
                break
            window = select_window(self.turns, self.config.window, keep_failed=task.kind == "code")
            note, shown, skip = (
                await self._focus(window, run) if task.kind == "code" else ("", [], frozenset())
            )
            if not self.turns:
                window = []  # the focus went back to an earlier version and dropped the turns about it
            # After the focus, which may have gone back: the turn says where train.py is now.
            reply = "text" if text_mode else "json" if json_mode else "tool"
            words = await self.rc.turn(self.run_id, self.config.profile, reply, shown, skip)
            if text_mode:
                self.whole_file = shows_whole_file(words)
            said = [note] if note else []
            if self.batch_lines:
                # The summary lists the last few experiments only: the batch's every result, item by item.
                said += ["Your last batch:", *self.batch_lines]
                self.batch_lines = []
            if said:  # the agent's own words, just before the request (the turn's last line)
                head, _, asked = words.rpartition("\n")
                words = "\n".join([head, *said, asked])
            words = batch_turn(words, self.config.batch, json_mode)
            messages = [Message(role="user", text=words)]
            if text_mode or json_mode:
                messages = text_messages(messages[0], window)
            else:
                for turn in window:
                    messages += [turn.assistant, turn.user]
            request = LLMRequest(
                system=system,
                tools=tools,
                messages=messages,
                max_tokens=self.config.max_tokens,
                json_reply=json_mode,
            )
            try:
                response = await self.ask(request, run)
            except LLMError as exc:
                stop = ("llm-error", str(exc))
                break
            except AgentStop as exc:
                stop = exc.stop
                break
            assistant = Message(role="assistant", text=response.text, tool_calls=response.tool_calls)
            if json_mode:
                outcome = await self._json_step(assistant, run, names)
                if isinstance(outcome, Turn):
                    self.turns.append(outcome)
                    continue
                stop = outcome
                break
            if text_mode:
                outcome = await self._text_step(assistant, run)
                if isinstance(outcome, Turn):
                    self.turns.append(outcome)
                    continue
                stop = outcome
                break
            if not response.tool_calls:
                # A DONE before anything ran well is a misfire (small models do this), not a decision:
                # Qwen2.5-Coder-1.5B ended a 15-experiment run after one crash, "after the 14th run".
                if says_done(response.text) and run.best is not None:
                    question = self.early_done(run)
                    if question is None:
                        stop = ("llm-done", response.text.strip()[:300])
                        break
                    self.turns.append(
                        Turn(
                            assistant=assistant,
                            user=Message(role="user", text=f"{question} {NUDGE_TOOL}"),
                            refused=True,
                        )
                    )
                    continue
                self.failures += 1
                self.refused(kind="no_tool_call")
                nudge = (NUDGE if self.may_finish(run) else NUDGE_TOOL) if run.used > 0 else NO_EXPERIMENT_YET
                self.turns.append(
                    Turn(assistant=assistant, user=Message(role="user", text=nudge), refused=True)
                )
                continue
            batch = self.config.batch > 1 and all(
                c.name == ToolName.RUN_EXPERIMENT for c in response.tool_calls
            )
            if batch:
                self.turns.append(await self._batch_tools(assistant, response.tool_calls))
            else:
                self.turns.append(await self._run_tools(assistant, response.tool_calls, names))
        return await finish(
            self.rc, self.run_id, "stateful", stop, self.calls, self.transcript, self.refusals
        )

    @property
    def json_replies(self) -> bool:
        """A params task answered with a JSON object in text (its profile has the words for it)."""
        task = self.config.task
        return (
            task.kind == "params"
            and self.config.param_replies == "text"
            and task.agent.text_system_prompt is not None
        )

    async def _json_step(
        self, assistant: Message, run: Run, names: set[str]
    ) -> "Turn | tuple[StopReason, str]":
        """A params reply in text: its JSON object is sent as run_experiment's params (the agent's own
        call, as if the model had made it); DONE ends the run as a tool-less reply does. The turn is
        kept as text: the reply, then the result or refusal as the user's next words."""
        text = assistant.text
        items = parse_proposals(text) if self.config.batch > 1 else None
        if items is not None:
            return await self._batch_text(assistant, items)
        params = parse_json_object(text)
        if params is None:
            example = self.config.task.agent.stateless.example or '{"name": value}'
            if says_done(text) and run.best is not None:
                question = self.early_done(run)
                if question is None:
                    return ("llm-done", text.strip()[:300])
                said = f"{question} {json_nudge(example, offer_done=False)}"
                return Turn(assistant=assistant, user=Message(role="user", text=said), refused=True)
            self.failures += 1
            self.refused(kind="unparsed_reply")
            said = f"It held no JSON object of params. {json_nudge(example, self.may_finish(run))}"
            return Turn(assistant=assistant, user=Message(role="user", text=said), refused=True)
        if set(params) == {"params"} and isinstance(params["params"], dict):
            params = params["params"]  # the server's own shape, sent nested
        spec = self.specs.get(ToolName.RUN_EXPERIMENT)
        flat = spec is not None and spec.nest == "params"  # else the tool takes them inside `params`
        arguments = params if flat else {"params": params}
        call = ToolCall(id=f"json-{self.calls}", name=ToolName.RUN_EXPERIMENT, arguments=arguments)
        turn = await self._run_tools(assistant.model_copy(update={"tool_calls": [call]}), [call], names)
        results = turn.user.tool_results
        turn.assistant = assistant
        said = "\n".join(r.content for r in results)
        turn.refused = not turn.recorded_experiment and all(r.is_error for r in results)
        if turn.refused and (kept := self._best_already(params, run)):
            said = f"{kept}. {said}"
        turn.user = Message(role="user", text=said)
        return turn

    async def _batch_text(self, assistant: Message, items: list[dict[str, Any]]) -> Turn:
        """A JSON list of params (--batch): each item submitted and collected; the next turn's words are
        one line per item."""
        turn = Turn(assistant=assistant, user=Message(role="user"))
        lines = [text for text, _ in await self._batch(items, turn)]
        turn.refused = not turn.recorded_experiment
        turn.user = Message(role="user", text="\n".join(lines))
        return turn

    async def _batch_tools(self, assistant: Message, calls: list[ToolCall]) -> Turn:
        """Several run_experiment calls in one reply (--batch): submitted and collected as one batch."""
        turn = Turn(assistant=assistant, user=Message(role="user"))
        items: list[dict[str, Any] | str] = []
        for call in calls:
            if call.parse_error is not None:
                self.refused(kind="invalid_arguments")
                items.append(f"invalid arguments: {call.parse_error}")
                continue
            arguments = server_arguments(self.specs.get(call.name), call.arguments)
            sent = arguments.get("params")
            items.append(sent if isinstance(sent, dict) else {})
        said = await self._batch(items, turn)
        results = [
            ToolResult(tool_call_id=call.id, content=text, is_error=is_error)
            for call, (text, is_error) in zip(calls, said, strict=True)
        ]
        turn.user = Message(role="user", tool_results=results)
        return turn

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
                said.append((f"item {index} refused: {why}", True))
                continue
            jobs[index] = outcome.as_model(JobInfo).job.id
            said.append(("", False))
        for index, job_id in jobs.items():
            said[index - 1] = await self._collect(index, job_id, turn)
        if not turn.recorded_experiment:
            self.failures += 1
        else:  # a batch with nothing recorded stays in the window, which says the same
            self.batch_lines = [text for text, _ in said]
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

    def _best_already(self, params: dict[str, Any], run: Run) -> str:
        """Where a reply applied to the best (base="best") was refused as an exact repeat of the best
        itself, every value it sent is the best's own: the words for it. Qwen2.5-Coder-1.5B sent
        `{"max_depth": 12}` when the best had max_depth=12, and after "exact repeat of experiment #12"
        alone sent the same again. Empty otherwise. The server judged the repeat (its detail names the
        experiment repeated), not this agent."""
        fixed = self.config.task.agent.fixed_arguments.get(ToolName.RUN_EXPERIMENT, {})
        repeat = self.last_refusal.details(RepeatDetail) if self.last_refusal is not None else None
        best = run.best
        if not self.small or fixed.get("base") != "best" or best is None or not params or repeat is None:
            return ""
        if repeat.iteration != best.iteration:
            return ""
        values = " ".join(f"{name}={value}" for name, value in params.items())
        held = "these values" if len(params) > 1 else "this value"
        return f"{values} changed nothing: the best (#{best.iteration}) has {held} already"

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

    async def _text_step(self, assistant: Message, run: Run) -> "Turn | tuple[StopReason, str]":
        """A code task answered in text: SEARCH/REPLACE edits or the whole file in a python block (sent
        as modify_train_py's edits or source, unchanged, then benchmarked), `REVERT v<N>`, or DONE. The
        model's words become the version's description."""
        text = assistant.text
        turn = Turn(assistant=assistant, user=Message(role="user"))
        files = self.config.task.files or None  # one file: its own name (slow.py), not train.py
        ran_well, offer_done = run.best is not None, self.may_finish(run)
        reply = read_text_reply(text, self.current_code, ran_well, files)
        if reply.action == "done":
            question = self.early_done(run)
            if question is None:
                return ("llm-done", text.strip()[:300])
            turn.refused = True  # DONE is not offered again in this answer: it was just questioned
            turn.user.text = f"{question} {self._format(False)}"
            return turn
        if reply.action == "refused":
            self.failures += 1
            self.refused(kind=reply.kind)
            turn.refused = True
            turn.user.text = (
                f"{reply.why_not} {self._format(offer_done)}"
                if reply.why_not
                else text_nudge(
                    text, self.latest_version, ran_well, self.whole_file, offer_done, revert=not self.reverted
                )
            )
            return turn
        if reply.action == "revert":
            if self.reverted and self.small:
                # One revert between experiments: a second measures nothing either, and the real model,
                # answered after each, counted up REVERT v2, v3... v9 (seed 456 of digits-mlp).
                self.failures += 1
                self.refused(kind="second_revert")
                turn.refused = True
                went_back = self.with_idea(
                    "train.py went back to an earlier version with your last REVERT, and nothing has run"
                    " since: make a change now."
                )
                turn.user.text = f"{went_back} {self._format(offer_done)}"
                return turn
            outcome = await self._text_call(turn, ToolName.REVERT_TRAIN_PY, {"version": reply.version})
            turn.user.text = self._text_result(ToolName.REVERT_TRAIN_PY, outcome, offer_done)
            if outcome.ok:
                # Reverts are free and record nothing: a small model went v3, v4, v3, v4... one per
                # call, so its profile counts them toward --max-failures' streak.
                self.failures += 1 if self.small else 0
                turn.reverted = True
                turn.user.text = f"Your REVERT v{reply.version} is done: {turn.user.text}"
            return turn
        arguments: dict[str, Any] = {"description": describe_reply(text)}
        if reply.functions is not None:
            for name, source in reply.functions:  # one version per function; benchmarked once, after
                changed = await self._text_call(
                    turn, ToolName.REPLACE_FUNCTION, {"name": name, "source": source, **arguments}
                )
                turn.user.text = self._text_result(ToolName.REPLACE_FUNCTION, changed, offer_done)
                if not changed.ok:
                    return turn
        else:
            if reply.edits is not None:
                arguments["edits"] = [
                    {"search": search, "replace": replace} for search, replace in reply.edits
                ]
            else:
                arguments["source"] = reply.source
            changed = await self._text_call(turn, ToolName.MODIFY_TRAIN_PY, arguments)
            turn.user.text = self._text_result(ToolName.MODIFY_TRAIN_PY, changed, offer_done)
            if not changed.ok:
                return turn
        measured = await self._text_call(turn, ToolName.RUN_BENCHMARK, {})
        turn.user.text += "; benchmarked: " + result_text(ToolName.RUN_BENCHMARK, measured)
        self._account(ToolCall(id="text-bench", name=ToolName.RUN_BENCHMARK, arguments={}), measured, turn)
        return turn

    def _text_result(self, tool: str, outcome: ToolOutcome, offer_done: bool) -> str:
        """A modify or revert result. A refusal or a revert, which no benchmark follows, restates the
        format: after "train.py has no version 3" or "train.py is now v4" alone the real model answered
        DONE or "Done: The code was optimized..."."""
        if outcome.ok:
            self.latest_version = max(self.latest_version, outcome.as_model(ArtifactInfo).version)
        if outcome.ok and tool in CHANGE_TOOLS:
            return result_text(tool, outcome)
        # A revert that happened, or found the file there already, is answered with a change to make; one
        # to a version that does not exist with the versions that do.
        went_back = tool == ToolName.REVERT_TRAIN_PY and (
            outcome.ok or (outcome.refusal is not None and outcome.refusal.kind != "unknown_version")
        )
        answer = self._format(offer_done, revert=not went_back)
        said = result_text(tool, outcome)
        if outcome.refusal is not None and outcome.refusal.kind == "no_change":
            said = self.with_idea(said)
        return f"{said}\n{answer}"

    @property
    def reverted(self) -> bool:
        """Text replies: whether a revert happened since the last experiment."""
        for turn in reversed(self.turns):
            if turn.recorded_experiment:
                return False
            if turn.reverted:
                return True
        return False

    def _format(self, offer_done: bool, revert: bool = True) -> str:
        """The reply format to restate; REVERT is not offered again before something has run."""
        return text_format(
            self.latest_version, offer_done, self.whole_file, revert=revert and not self.reverted
        )

    async def _text_call(self, turn: Turn, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """A call on behalf of a text reply; a refusal counts as a failure and marks the turn."""
        outcome = await self.rc.call_tool(tool, {**arguments, "run_id": self.run_id})
        if not outcome.ok:
            self.failures += 1
            self.refused(outcome)
            turn.refused = True
        return outcome

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
