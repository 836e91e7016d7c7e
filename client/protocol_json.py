"""The JSON protocol of a params task (`--param-replies text`, the default): the model replies with one
JSON object of the params it changes (a list of them under --batch), which the agent sends as
run_experiment, or DONE. No tool definitions ride on the requests."""

from typing import Any

from autoresearch_mcp.client.batch import parse_proposals
from autoresearch_mcp.client.check import (
    StopReason,
)
from autoresearch_mcp.client.llm.base import Message, ToolCall
from autoresearch_mcp.client.prompts import (
    NO_JSON,
    best_already,
    json_nudge,
)
from autoresearch_mcp.client.replies import parse_json_object, says_done
from autoresearch_mcp.client.stateful_base import StatefulBase
from autoresearch_mcp.client.window import Turn
from autoresearch_mcp.contract.errors import RepeatDetail
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.contract.tools import ToolName


class JsonReplies(StatefulBase):
    """Replies with a JSON object of params (or a list of them), or DONE."""

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
            said = f"{NO_JSON} {json_nudge(example, self.may_finish(run))}"
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

    def _best_already(self, params: dict[str, Any], run: Run) -> str:
        """Where a reply applied to the best (base="best") was refused as an exact repeat of the best
        itself, every value it sent is the best's own: the words for it (told only "exact repeat of
        experiment #12", a model that does not see its values are the best's sends them again). Empty
        otherwise. The server judged the repeat (its detail names the
        experiment repeated), not this agent."""
        fixed = self.config.task.agent.fixed_arguments.get(ToolName.RUN_EXPERIMENT, {})
        repeat = self.last_refusal.details(RepeatDetail) if self.last_refusal is not None else None
        best = run.best
        if not self.small or fixed.get("base") != "best" or best is None or not params or repeat is None:
            return ""
        if repeat.iteration != best.iteration:
            return ""
        return best_already(params, best.iteration)
