"""The stateful agent (REASON -> TOOLS -> CHECK): every LLM request carries the fixed system prompt,
the agent's small tool set, the run summary read fresh from the server, and a bounded window.

The window is a list of turns (an assistant message and the user message answering it), so it never
separates a tool call from its result. By default it holds only the turns since the last recorded
experiment: the summary already carries every result.
"""

import json

from pydantic import BaseModel

from autoresearch_mcp.client.check import (
    Agent,
    AgentResult,
    StopReason,
    TokenBudgetStop,
    check,
    finish,
)
from autoresearch_mcp.client.connect import ToolOutcome
from autoresearch_mcp.client.llm.base import LLMError, LLMRequest, Message, ToolCall, ToolResult
from autoresearch_mcp.client.prompts import (
    NO_EXPERIMENT_YET,
    NUDGE,
    repeat_hint,
    stateful_turn,
)
from autoresearch_mcp.client.tools import agent_tools
from autoresearch_mcp.contract.models import ArtifactInfo, ExperimentResult

EXPERIMENT_TOOLS = ("run_experiment", "run_benchmark")
MAX_RESULT_CHARS = 3000


class Turn(BaseModel):
    assistant: Message
    user: Message
    recorded_experiment: bool = False
    shows_version: int | None = None  # the full train.py of this version is in this turn
    made_version: tuple[int, int] | None = None  # (from, to): the model's own edit, applied by the server


def select_window(turns: list[Turn], window: int | None) -> list[Turn]:
    if window is None:
        last = max((i for i, t in enumerate(turns) if t.recorded_experiment), default=-1)
        return _without_repeated_refusals(turns[last + 1 :])
    # De-duplicate first, so that repeats do not eat into the N messages the window may hold.
    kept = _without_repeated_refusals(turns)
    return kept[-(window // 2) :] if window >= 2 else []


def _calls_key(turn: Turn) -> str:
    return json.dumps(
        [(c.name, c.arguments, c.parse_error) for c in turn.assistant.tool_calls], sort_keys=True
    )


def _without_repeated_refusals(window: list[Turn]) -> list[Turn]:
    """A refused call the model sent again shows once, at its latest place. Copies of its own refused
    call taught a small model to send it yet again (Qwen2.5-Coder-1.5B did so five times in a row), and
    each copy cost tokens while saying nothing new."""
    refused = [
        bool(t.assistant.tool_calls and t.user.tool_results) and all(r.is_error for r in t.user.tool_results)
        for t in window
    ]
    latest = {_calls_key(t): i for i, t in enumerate(window) if t.assistant.tool_calls}
    return [t for i, t in enumerate(window) if not refused[i] or latest[_calls_key(t)] == i]


def known_version(window: list[Turn]) -> int | None:
    """The train.py version the model can see in its window: shown in full, or derived from it by
    its own edits."""
    known = None
    for turn in window:
        if turn.shows_version is not None:
            known = turn.shows_version
        elif turn.made_version is not None and turn.made_version[0] == known:
            known = turn.made_version[1]
    return known


def result_text(tool: str, outcome: ToolOutcome) -> str:
    """A compact tool result for the model (the full record stays on the server)."""
    if not outcome.ok:
        return outcome.text[:MAX_RESULT_CHARS]
    if tool in EXPERIMENT_TOOLS:
        result = outcome.as_model(ExperimentResult)
        exp, best = result.experiment, result.best
        metric = f" {exp.metric:.4f}" if exp.metric is not None else ""
        line = f"#{exp.iteration} {exp.status}{metric}" + (" NEW BEST" if result.is_new_best else "")
        if exp.status != "ok" and exp.error_tail and exp.error_tail.strip():
            line += f": {exp.error_tail.strip().splitlines()[0][:200]}"
        if best:
            line += f"; best {best.metric:.4f} (#{best.iteration})"
        return line + f"; budget left {result.budget_left}"
    if tool in ("modify_train_py", "revert_train_py"):
        info = outcome.as_model(ArtifactInfo)
        return f"train.py is now v{info.version} ({info.lines} lines)"
    if tool == "get_current_train_py":
        info = outcome.as_model(ArtifactInfo)
        return f"train.py v{info.version}:\n{info.source}"
    return json.dumps(outcome.data, separators=(",", ":"))[:MAX_RESULT_CHARS]


class StatefulAgent(Agent):
    turns: list[Turn]  # every exchange of this run; the window is chosen from them
    repeats: int  # exact-repeat refusals so far

    async def run(self) -> AgentResult:
        self.turns, self.repeats = [], 0
        tools = agent_tools(await self.rc.tools(), self.config.task)
        names = {tool.name for tool in tools}
        system = self.config.task.agent.system_prompt
        stop: tuple[StopReason, str] | None = None
        while True:
            run = await self.rc.run(self.run_id)
            stop = stop or check(run, self.failures, self.config, self.calls)
            if stop:
                break
            window = select_window(self.turns, self.config.window)
            if self.config.task.kind == "code":
                window = await self._show_code_if_unseen(window)
            summary = await self.rc.summary(self.run_id)
            messages = [Message(role="user", text=stateful_turn(summary))]
            for turn in window:
                messages += [turn.assistant, turn.user]
            request = LLMRequest(
                system=system, tools=tools, messages=messages, max_tokens=self.config.max_tokens
            )
            try:
                response = await self.ask(request, run)
            except LLMError as exc:
                stop = ("llm-error", str(exc))
                break
            except TokenBudgetStop as exc:
                stop = exc.stop
                break
            assistant = Message(role="assistant", text=response.text, tool_calls=response.tool_calls)
            if not response.tool_calls:
                # A DONE before any experiment ran is a misfire (small models do this), not a decision.
                if "DONE" in response.text and run.used > 0:
                    stop = ("llm-done", response.text.strip()[:300])
                    break
                self.failures += 1
                nudge = NUDGE if run.used > 0 else NO_EXPERIMENT_YET
                self.turns.append(Turn(assistant=assistant, user=Message(role="user", text=nudge)))
                continue
            self.turns.append(await self._run_tools(assistant, response.tool_calls, names))
        return await finish(self.rc, self.run_id, "stateful", stop, self.calls, self.transcript)

    async def _show_code_if_unseen(self, window: list[Turn]) -> list[Turn]:
        """Put the current train.py in the window (as a get_current_train_py exchange) unless the model
        can already see it there."""
        current = await self.rc.typed("get_current_train_py", {"run_id": self.run_id}, ArtifactInfo)
        if known_version(window) == current.version:
            return window
        call = ToolCall(
            id=f"code-v{current.version}-{len(self.turns)}", name="get_current_train_py", arguments={}
        )
        outcome = ToolOutcome(ok=True, text="", data=current.model_dump(mode="json"))
        turn = Turn(
            assistant=Message(role="assistant", tool_calls=[call]),
            user=Message(
                role="user",
                tool_results=[ToolResult(tool_call_id=call.id, content=result_text(call.name, outcome))],
            ),
            shows_version=current.version,
        )
        self.turns.append(turn)
        return [*window, turn]

    async def _run_tools(self, assistant: Message, calls: list[ToolCall], names: set[str]) -> Turn:
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
            elif call.name not in names:
                text, is_error = f"unknown tool {call.name!r}; use one of {sorted(names)}", True
            else:
                outcome = await self.rc.call(call.name, {**call.arguments, "run_id": self.run_id})
                text, is_error = result_text(call.name, outcome), not outcome.ok
                if outcome.refusal is not None and outcome.refusal.kind == "exact_repeat":
                    params = call.arguments.get("params")
                    hint = repeat_hint(call.name, params if isinstance(params, dict) else {}, self.repeats)
                    text += " " + hint
                    self.repeats += 1
                self._account(call, outcome, turn)
                edit_refused = edit_refused or (call.name == "modify_train_py" and not outcome.ok)
                ended = (
                    outcome.ok
                    and call.name in EXPERIMENT_TOOLS
                    and (outcome.as_model(ExperimentResult).run_status != "running")
                )
            failed = failed or is_error
            results.append(ToolResult(tool_call_id=call.id, content=text, is_error=is_error))
        if failed and not turn.recorded_experiment:
            self.failures += 1  # one reply, one attempt: its refused calls count as one failure
        turn.user = Message(role="user", tool_results=results)
        return turn

    def _account(self, call: ToolCall, outcome: ToolOutcome, turn: Turn) -> None:
        if not outcome.ok:
            return
        if call.name in EXPERIMENT_TOOLS:
            turn.recorded_experiment = True
            if outcome.as_model(ExperimentResult).experiment.status == "ok":
                self.failures = 0
            else:
                self.failures += 1
        elif call.name == "modify_train_py":
            version = outcome.as_model(ArtifactInfo).version
            turn.made_version = (version - 1, version)
        elif call.name == "get_current_train_py":
            turn.shows_version = outcome.as_model(ArtifactInfo).version
