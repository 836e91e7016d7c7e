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

from autoresearch_mcp.client.batch import batch_turn
from autoresearch_mcp.client.check import (
    AgentResult,
    AgentStop,
    StopReason,
    check,
    finish,
)
from autoresearch_mcp.client.llm.base import LLMError, LLMRequest, Message
from autoresearch_mcp.client.protocol_json import JsonReplies
from autoresearch_mcp.client.protocol_text import TextReplies
from autoresearch_mcp.client.protocol_tools import ToolReplies
from autoresearch_mcp.client.stateful_base import result_text
from autoresearch_mcp.client.tools import agent_tools
from autoresearch_mcp.client.window import Turn, select_window, text_messages
from autoresearch_mcp.contract.arguments import SUMMARY_LAST, SUMMARY_MAX_LAST
from autoresearch_mcp.contract.code_focus import shows_whole_file

__all__ = ["StatefulAgent", "result_text"]


class StatefulAgent(ToolReplies, JsonReplies, TextReplies):
    """The loop: each turn read from the server, one LLM call, the reply handled by its protocol."""

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
            (task.agent.text_system_prompt or task.agent.system_prompt)
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
            # After a batch the summary lists every experiment it recorded (up to the most it lists),
            # not only the last few.
            last = min(self.batch_recorded, SUMMARY_MAX_LAST) if self.batch_recorded > SUMMARY_LAST else None
            self.batch_recorded = 0
            words = await self.rc.turn(self.run_id, self.config.profile, reply, shown, skip, last)
            if text_mode:
                self.whole_file = shows_whole_file(words)
            said = [note] if note else []
            if self.batch_lines:  # what the summary cannot list: the items that recorded nothing, and why
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
            outcome = await self._tool_step(assistant, run, names)
            if isinstance(outcome, Turn):
                self.turns.append(outcome)
                continue
            stop = outcome
            break
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
