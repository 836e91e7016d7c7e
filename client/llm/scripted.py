"""The deterministic offline test double: no model, the same kind of output a real LLM gives.

Its choices depend only on the request and its own seeded state, so a run is reproducible for a seed.
Use one instance per run: it remembers what it proposed.
It knows a task only through what the server says of it: the params schema (`autoresearch://tasks/{name}`)
and the task's plan for the double (`autoresearch://tasks/{name}/scripted-plan`, read by the double alone:
no host is sent it), so a new task needs no edit here.
- params tasks (hpo-covertype): the defaults first, then random draws from the plan's prior mixed with
  perturbations of the best configuration, which it reads from the "Best ..." line of the summary or
  prompt (`Best: macro_f1=0.77 at #3, params n_estimators=300 ...`, or a JSON object on that line).
  It never proposes the same configuration twice.
- code tasks (codeopt-records): walks the plan's chain of steps (real rewrites, then semantically
  equivalent one-line variants: the kind of non-improving attempt a real model keeps making), one
  cumulative step per call, then says it is done. A step is edits (sent with modify_train_py) or a
  function's new version (sent with replace_function where the request offers it, else as an edit).
  It follows its plan, not what the request shows: the plan was ordered to rewrite the function the
  profile names as the hottest.
"""

import json
import random
import re
from typing import Any

from autoresearch_mcp.client.batch import batch_size
from autoresearch_mcp.client.llm.base import (
    LLMError,
    LLMRequest,
    LLMResponse,
    ToolCall,
    ToolSpec,
    anthropic_cache_min,
    anthropic_wire_tools,
)
from autoresearch_mcp.client.llm.scripted_params import ParamSpace, ParamsPolicy, parse_best, request_text
from autoresearch_mcp.contract.edits import apply_edits
from autoresearch_mcp.contract.functions import replace_function
from autoresearch_mcp.contract.models import ScriptedPlan, TaskInfo
from autoresearch_mcp.contract.tools import ToolName


class _CodePolicy:
    def __init__(self, plan: ScriptedPlan, original: str) -> None:
        self.steps = plan.steps
        self.sources = [original]  # the file after each step, built as the steps are taken
        self.step = 0  # steps taken so far (cumulative from the original)

    @property
    def total(self) -> int:
        return len(self.steps)

    def retry(self) -> None:
        """Take back the last step (its edit was refused), so that the next call sends it again."""
        if self.step > 0:
            self.step -= 1
            self.sources.pop()

    def next_step(self) -> int | None:
        if self.step >= self.total:
            return None
        self.step += 1
        step = self.steps[self.step - 1]
        if step.function is not None:
            name = function_name(step.function)
            self.sources.append(replace_function(self.sources[-1], name, step.function))
        else:
            self.sources.append(apply_edits(self.sources[-1], step.edits))
        return self.step


def function_name(definition: str) -> str:
    """The name of the def in a function step's text (import lines may come first)."""
    match = re.search(r"^(?:async\s+)?def\s+(\w+)", definition, re.MULTILINE)
    if match is None:
        raise LLMError("scripted backend: a function step holds no def")
    return match.group(1)


def _last_edit_refused(request: LLMRequest) -> bool:
    """Whether the latest change of train.py the request shows (whoever's call it was) came back an
    error."""
    changes = (ToolName.MODIFY_TRAIN_PY, ToolName.REPLACE_FUNCTION)
    edits = {c.id for m in request.messages for c in m.tool_calls if c.name in changes}
    results = [r for m in request.messages for r in m.tool_results if r.tool_call_id in edits]
    return bool(results) and results[-1].is_error


def _offered_batch(request: LLMRequest) -> int:
    """The K of `--batch K` as the turn's words offer it (the turn message, wherever the window puts it)."""
    return batch_size("\n".join(m.text for m in request.messages if m.role == "user"))


class ScriptedLLM:
    name = "scripted"
    scripted = True
    # Counted as the paper's model would be paid: Claude Haiku 4.5 over the Anthropic API.
    cache_min_tokens: int | None = anthropic_cache_min("claude-haiku-4-5")

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return anthropic_wire_tools(tools)

    def __init__(
        self, *, task: TaskInfo, plan: ScriptedPlan | None = None, original: str = "", seed: int = 42
    ) -> None:
        """`task` as the server describes it, `plan` its plan for the double; `original`: train.py v1
        (code tasks build on it)."""
        plan = plan or ScriptedPlan()
        if (problem := self.cannot_play(task, plan)) is not None:
            raise LLMError(problem)
        self.task = task
        self.plan = plan
        self.seed = seed
        self.rng = random.Random(seed)
        self._hpo = ParamsPolicy(task, plan, self.rng) if task.kind == "params" else None
        self._code = _CodePolicy(plan, original) if task.kind == "code" else None
        self._calls = 0

    @staticmethod
    def cannot_play(task: TaskInfo, plan: ScriptedPlan) -> str | None:
        """Why the double cannot play `task`, asked before a run is started for nothing; else None."""
        if task.kind == "params" and not ParamSpace(task.params_schema, plan).names:
            return (
                f"the scripted backend has no numeric params to search in task {task.name!r}; run it with "
                "--llm openai or --llm anthropic"
            )
        if task.kind == "code" and not plan.steps:
            return (
                f"the scripted backend has no scripted steps for task {task.name!r}: it plays the built-in "
                "tasks and task folders in params work; run a folder in code work with --llm openai or "
                "--llm anthropic"
            )
        return None

    def _id(self) -> str:
        self._calls += 1
        return f"scripted_{self.seed}_{self._calls:04d}"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        tools = {t.name for t in request.tools}
        if self._hpo is not None:
            # The stateless baselines send one user message and no system prompt; the stateful agent
            # always has a system prompt, and offers no tool when the model answers in JSON text.
            if not tools and request.system:
                return self._hpo_text_reply(request)
            return self._hpo_reply(request, stateful=bool(tools), tools=tools)
        return self._code_reply(request, stateful=bool(tools), tools=tools)

    def _reply(self, text: str, calls: list[ToolCall] | None = None) -> LLMResponse:
        calls = calls or []
        stop = "tool_use" if calls else "end_turn"
        return LLMResponse(text=text, tool_calls=calls, stop_reason=stop, usage=None, model="scripted")

    def _changes(self, request: LLMRequest, params: dict[str, Any]) -> dict[str, Any]:
        """The profile's protocol: send only what changes from the best (as the summary shows it)."""
        if self.task.agent.fixed_arguments.get(ToolName.RUN_EXPERIMENT, {}).get("base") != "best":
            return params
        assert self._hpo is not None
        best = parse_best(request_text(request), self._hpo.space.names) or {}
        reference = {**self._hpo.space.defaults, **best}
        return {k: v for k, v in params.items() if reference.get(k) != v}

    def _proposals(self, request: LLMRequest) -> list[tuple[dict[str, Any], str]]:
        """As many new configurations as the turn offers to take at once (--batch K: K), or fewer where
        no untried one is left."""
        text = request_text(request)
        wanted = _offered_batch(request)
        found: list[tuple[dict[str, Any], str]] = []
        assert self._hpo is not None
        while len(found) < wanted and (proposal := self._hpo.propose(text)) is not None:
            found.append(proposal)
        return found

    def _hpo_text_reply(self, request: LLMRequest) -> LLMResponse:
        """The stateful agent's JSON-in-text protocol: the changes as one JSON object, nothing else (a
        JSON list of them where the turn offers a batch)."""
        proposals = self._proposals(request)
        if not proposals:
            return self._reply("DONE: no untried configuration left near the best.")
        changes = [self._changes(request, params) for params, _ in proposals]
        if _offered_batch(request) > 1:
            return self._reply(json.dumps(changes))
        return self._reply(json.dumps(changes[0]))

    def _hpo_reply(self, request: LLMRequest, *, stateful: bool, tools: set[str]) -> LLMResponse:
        assert self._hpo is not None
        if stateful and ToolName.RUN_EXPERIMENT not in tools:
            raise LLMError("scripted backend: the request offers no run_experiment tool")
        proposals = self._proposals(request) if stateful else []
        if not stateful and (proposal := self._hpo.propose(request_text(request))) is not None:
            proposals = [proposal]
        if not proposals:
            return self._reply("DONE: no untried configuration left near the best.")
        if stateful:
            offered = next((t for t in request.tools if t.name == ToolName.RUN_EXPERIMENT), None)
            offered_args = offered.input_schema.get("properties", {}) if offered is not None else {}
            calls = []
            for params, why in proposals:  # one call each: a turn offering a batch gets several
                changes = self._changes(request, params)
                if offered_args and "params" not in offered_args:
                    arguments: dict[str, Any] = changes  # the params at the top level: the agent nests them
                else:
                    arguments = {"params": changes}
                if "note" in offered_args:
                    # The reason travels once in each mode: as the note here, as the reply text when stateless.
                    arguments["note"] = why
                calls.append(ToolCall(id=self._id(), name=ToolName.RUN_EXPERIMENT, arguments=arguments))
            return self._reply("", calls)
        params, why = proposals[0]
        return self._reply(f"{why}\n{json.dumps(params)}")

    def _code_reply(self, request: LLMRequest, *, stateful: bool, tools: set[str]) -> LLMResponse:
        assert self._code is not None
        benchmarks_itself = not self.task.agent.benchmark_after_edit
        needed = (
            {ToolName.MODIFY_TRAIN_PY, ToolName.RUN_BENCHMARK}
            if benchmarks_itself
            else {ToolName.MODIFY_TRAIN_PY}
        )
        if stateful and not needed <= tools:
            raise LLMError(f"scripted backend: the request offers no {' + '.join(sorted(needed))} tools")
        # A refused edit means the server's train.py is not what the catalogue expects: resend in full.
        refused = _last_edit_refused(request)
        offered = next((t for t in request.tools if t.name == ToolName.MODIFY_TRAIN_PY), None)
        whole_file = offered is None or "source" in offered.input_schema.get("properties", {"source": {}})
        if refused and not whole_file:
            self._code.retry()  # no whole file to fall back on: send the refused step's edits again
        step = self._code.next_step()
        total = self._code.total
        if step is None:
            return self._reply(f"DONE: the {total} scripted steps are tried.")
        move = self._code.steps[step - 1]
        description, edits, source = move.description, move.edits, self._code.sources[step]
        if not stateful:
            return self._reply("CODE:\n" + source)
        change: dict[str, Any] = {"description": description}
        tool = ToolName.MODIFY_TRAIN_PY
        if refused and whole_file:
            change["source"] = source
        elif move.function is not None and ToolName.REPLACE_FUNCTION in tools:
            tool = ToolName.REPLACE_FUNCTION
            change.update(name=function_name(move.function), source=move.function)
        elif move.function is not None:  # no replace_function offered: the whole file instead
            if not whole_file:
                raise LLMError("scripted backend: a function step needs replace_function or a whole file")
            change["source"] = source
        else:
            change["edits"] = [{"search": s, "replace": r} for s, r in edits]
        calls = [ToolCall(id=self._id(), name=tool, arguments=change)]
        if benchmarks_itself:  # a profile whose agent does not benchmark each accepted edit
            calls.append(ToolCall(id=self._id(), name=ToolName.RUN_BENCHMARK, arguments={}))
        return self._reply("", calls)  # the call's description says what it does

    async def aclose(self) -> None:
        return None
