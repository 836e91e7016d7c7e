"""The text protocol of a code task (`--code-replies text`): the model replies with a function's new
version or the whole file in a python block, SEARCH/REPLACE edits, `REVERT v<N>` or DONE, which the
agent sends as replace_function, modify_train_py or revert_train_py and benchmarks. Small models
cannot write code inside a JSON string."""

from typing import Any

from autoresearch_mcp.client.check import (
    StopReason,
)
from autoresearch_mcp.client.connect import ToolOutcome
from autoresearch_mcp.client.llm.base import Message, ToolCall
from autoresearch_mcp.client.prompts import (
    REVERTED_ALREADY,
    revert_done,
    text_format,
    text_nudge,
)
from autoresearch_mcp.client.replies import describe_reply, read_text_reply
from autoresearch_mcp.client.stateful_base import CHANGE_TOOLS, StatefulBase, result_text
from autoresearch_mcp.client.window import Turn
from autoresearch_mcp.contract.models import ArtifactInfo, Run
from autoresearch_mcp.contract.tools import ToolName


class TextReplies(StatefulBase):
    """Replies with code, edits, a revert or DONE, in text."""

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
                # One revert between experiments: a second measures nothing either, and a model answered
                # after each can count versions up without ever running one.
                self.failures += 1
                self.refused(kind="second_revert")
                turn.refused = True
                went_back = self.with_idea(REVERTED_ALREADY)
                turn.user.text = f"{went_back} {self._format(offer_done)}"
                return turn
            outcome = await self._text_call(turn, ToolName.REVERT_TRAIN_PY, {"version": reply.version})
            turn.user.text = self._text_result(ToolName.REVERT_TRAIN_PY, outcome, offer_done)
            if outcome.ok:
                # Reverts are free and record nothing: a small model went v3, v4, v3, v4... one per
                # call, so its profile counts them toward --max-failures' streak.
                self.failures += 1 if self.small else 0
                turn.reverted = True
                turn.user.text = revert_done(reply.version, turn.user.text)
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
        format: a bare "train.py has no version 3" or "train.py is now v4" reads like the end of a task,
        and draws a DONE or a status report instead of code."""
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
