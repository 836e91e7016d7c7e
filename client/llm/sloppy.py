"""The scripted double with a small model's habits: a robustness double for the default tests.

Small models copy the best configuration from the summary,
send a refused call again, put the params at the top level of a tool that nests them in `params` (or,
offered them at the top level, a value past its bound), and break the indentation of code they edit. This double does each of those on a fixed schedule (every third call
misbehaves, cycling through the habits that fit the task; a refused call is sent once more right away),
and otherwise answers as the scripted double does, so a test can show that the agent and the server
recover: every habit is refused without cost and the run still uses its whole budget.
"""

import json
import textwrap
from typing import Any

from autoresearch_mcp.client.llm.base import LLMRequest, LLMResponse, ToolCall, ToolSpec
from autoresearch_mcp.client.llm.scripted import ScriptedLLM
from autoresearch_mcp.client.llm.scripted_params import ParamSpace, parse_best, request_text
from autoresearch_mcp.contract.tools import ToolName

PARAMS_HABITS = ("copy_best", "flat_params")
CODE_HABITS = ("break_indent",)
EVERY = 3


class SloppyLLM:
    name = "scripted-sloppy"
    scripted = True

    def __init__(self, inner: ScriptedLLM) -> None:
        self.inner = inner
        self.cache_min_tokens = inner.cache_min_tokens
        self.space = ParamSpace(inner.task.params_schema, inner.plan)
        self.habits = PARAMS_HABITS if inner.task.kind == "params" else CODE_HABITS
        self.turn = 0
        self.used: list[str] = []  # the habits shown so far, in order (tests read it)
        self._last: LLMResponse | None = None
        self._repeated = False

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return self.inner.wire_tools(tools)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.turn += 1
        if self._refused(request) and not self._repeated:
            self._repeated = True
            self.used.append("repeat_refused")
            return self._again(self._last)
        self._repeated = False
        habit = self.habits[(self.turn // EVERY) % len(self.habits)] if self.turn % EVERY == 0 else None
        response = await self.inner.complete(request)
        if habit is not None:
            sloppy = self._with_habit(habit, request, response)
            if sloppy is not None:
                self.used.append(habit)
                response = sloppy
        self._last = response
        return response

    def _nested(self, request: LLMRequest) -> bool:
        """Whether the request's run_experiment takes the params inside `params`."""
        tool = next((t for t in request.tools if t.name == ToolName.RUN_EXPERIMENT), None)
        properties = tool.input_schema.get("properties", {}) if tool is not None else {}
        return not properties or "params" in properties

    def _refused(self, request: LLMRequest) -> bool:
        """Whether the previous reply's calls came back as errors (stateless: no tool results to see)."""
        if self._last is None or not self._last.tool_calls:
            return False
        ids = {c.id for c in self._last.tool_calls}
        results = [r for m in request.messages for r in m.tool_results if r.tool_call_id in ids]
        return bool(results) and all(r.is_error for r in results)

    def _again(self, last: LLMResponse | None) -> LLMResponse:
        assert last is not None
        calls = [c.model_copy(update={"id": f"{c.id}_again"}) for c in last.tool_calls]
        return last.model_copy(update={"tool_calls": calls})

    def _with_habit(self, habit: str, request: LLMRequest, response: LLMResponse) -> LLMResponse | None:
        if habit == "copy_best":
            best = parse_best(request_text(request), self.space.names)
            if best is None:
                return None
            params = {n: self.space.clean(n, best.get(n, self.space.defaults[n])) for n in self.space.names}
            if response.tool_calls:
                call = ToolCall(
                    id=f"{response.tool_calls[0].id}_copy",
                    name=ToolName.RUN_EXPERIMENT,
                    arguments={"params": params} if self._nested(request) else params,
                )
                return response.model_copy(update={"tool_calls": [call]})
            return response.model_copy(update={"text": json.dumps(params)})
        if habit == "flat_params" and response.tool_calls:
            call = response.tool_calls[0]
            if self._nested(request):
                wrong = {**call.arguments.get("params", {})}
            else:  # offered flat: a value past its bound instead (gamma 21 against a bound of 20)
                name = self.space.names[0]
                wrong = {**call.arguments, name: self.space.bounds[name][1] + 1}
            return response.model_copy(update={"tool_calls": [call.model_copy(update={"arguments": wrong})]})
        if habit == "break_indent":
            if response.tool_calls and "edits" in response.tool_calls[0].arguments:
                modify = response.tool_calls[0]
                edits = [
                    {"search": e["search"], "replace": textwrap.dedent(e["replace"]).replace("\n", "\n ", 1)}
                    for e in modify.arguments["edits"]
                ]
                broken = modify.model_copy(update={"arguments": {**modify.arguments, "edits": edits}})
                return response.model_copy(update={"tool_calls": [broken, *response.tool_calls[1:]]})
            if response.tool_calls and "source" in response.tool_calls[0].arguments:
                change = response.tool_calls[0]
                source = textwrap.dedent(change.arguments["source"]).replace("\n", "\n ", 1)
                broken = change.model_copy(update={"arguments": {**change.arguments, "source": source}})
                return response.model_copy(update={"tool_calls": [broken, *response.tool_calls[1:]]})
            if response.text.startswith("CODE:"):
                return response.model_copy(
                    update={"text": "CODE:\n" + textwrap.dedent(response.text[5:]).replace("\n", "\n ", 2)}
                )
        return None

    async def aclose(self) -> None:
        await self.inner.aclose()
