"""The tool-call protocol: the model replies with tool calls (the stateful agent's `--param-replies tool`
and `--code-replies tool`), which the agent makes for it, with the profile's fixed arguments."""

from typing import Any

from autoresearch_mcp.client.check import (
    StopReason,
)
from autoresearch_mcp.client.llm.base import Message, ToolCall, ToolResult
from autoresearch_mcp.client.prompts import (
    NO_EXPERIMENT_YET,
    NUDGE,
    NUDGE_TOOL,
)
from autoresearch_mcp.client.replies import says_done
from autoresearch_mcp.client.stateful_base import StatefulBase
from autoresearch_mcp.client.tools import server_arguments
from autoresearch_mcp.client.window import Turn
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.contract.tools import ToolName


class ToolReplies(StatefulBase):
    """Replies with tool calls."""

    async def _tool_step(
        self, assistant: Message, run: Run, names: set[str]
    ) -> "Turn | tuple[StopReason, str]":
        """A reply with tool calls: each run in order (several run_experiment calls under --batch, as one
        batch). A reply with none is a DONE (ending the run, or questioned where the profile says) or a
        reply to answer with what to do."""
        if not assistant.tool_calls:
            # A DONE before anything ran well is a misfire, not a decision: nothing measured backs it.
            if says_done(assistant.text) and run.best is not None:
                question = self.early_done(run)
                if question is None:
                    return ("llm-done", assistant.text.strip()[:300])
                said = f"{question} {NUDGE_TOOL}"
                return Turn(assistant=assistant, user=Message(role="user", text=said), refused=True)
            self.failures += 1
            self.refused(kind="no_tool_call")
            nudge = (NUDGE if self.may_finish(run) else NUDGE_TOOL) if run.used > 0 else NO_EXPERIMENT_YET
            return Turn(assistant=assistant, user=Message(role="user", text=nudge), refused=True)
        batch = self.config.batch > 1 and all(c.name == ToolName.RUN_EXPERIMENT for c in assistant.tool_calls)
        if batch:
            return await self._batch_tools(assistant, assistant.tool_calls)
        return await self._run_tools(assistant, assistant.tool_calls, names)

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
