"""The stateful agent's window: the turns a request replays (the assistant message and the user
message answering it, never a tool call without its result), and what of them reaches the model."""

import json

from pydantic import BaseModel

from autoresearch_mcp.client.llm.base import Message
from autoresearch_mcp.client.prompts import NOT_USED


class Turn(BaseModel):
    assistant: Message
    user: Message
    recorded_experiment: bool = False
    failed_experiment: bool = False  # it recorded an experiment that crashed, was wrong or timed out
    refused: bool = False  # a reply that recorded nothing and changed nothing (text replies, nudges)
    reverted: bool = False  # a text reply that put train.py back to an earlier version


def select_window(turns: list[Turn], window: int | None, keep_failed: bool = False) -> list[Turn]:
    """The turns a request replays. `keep_failed` (code tasks): the turn of the last experiment too,
    when it failed: the model's own failed code and its error."""
    if window is None:
        last = max((i for i, t in enumerate(turns) if t.recorded_experiment), default=-1)
        kept = [turns[last]] if keep_failed and last >= 0 and turns[last].failed_experiment else []
        return kept + _without_earlier_refusals(turns[last + 1 :])
    # Drop the older refusals first, so that they do not eat into the N messages the window may hold.
    kept = _without_earlier_refusals(turns)
    return kept[-(window // 2) :] if window >= 2 else []


def text_messages(first: Message, window: list[Turn]) -> list[Message]:
    """Text replies: the turn message, then the window, where a refused reply is not replayed: only
    what was wrong with it, added to the user message before it (the latest of a streak). A model
    shown its own refused reply tends to send it again word for word. A revert is not replayed either,
    only its result: the turn message already shows the file it put back, and a replayed "REVERT v1"
    with its answer reads as a pattern to continue (v2, v3, ...)."""
    messages, note = [first], ""
    for turn in window:
        if turn.refused:
            note = f"{NOT_USED} {turn.user.text}"
            continue
        if turn.reverted:
            note = turn.user.text
            continue
        messages = [*_with_note(messages, note), turn.assistant, turn.user]
        note = ""
    return _with_note(messages, note)


def _with_note(messages: list[Message], note: str) -> list[Message]:
    if not note:
        return messages
    last = messages[-1]
    return [*messages[:-1], last.model_copy(update={"text": f"{last.text}\n\n{note}".lstrip()})]


def _is_refused(turn: Turn) -> bool:
    """A reply that recorded nothing and changed nothing: every call it made came back an error."""
    calls_failed = bool(turn.assistant.tool_calls and turn.user.tool_results) and all(
        r.is_error for r in turn.user.tool_results
    )
    return turn.refused or calls_failed


def _calls_key(turn: Turn) -> str:
    calls = [(c.name, c.arguments, c.parse_error) for c in turn.assistant.tool_calls]
    return json.dumps([turn.assistant.text if not calls else "", calls], sort_keys=True)


def _without_earlier_refusals(window: list[Turn]) -> list[Turn]:
    """Of the refused replies, only the latest shows, and not even that once the same call was made
    again. Shown each of its refused calls, a small model may continue them as a sequence (a value
    stepping on past its bound, each step refused) or send one of them yet again; each costs tokens and
    says nothing the latest refusal does not."""
    refused = {i for i, turn in enumerate(window) if _is_refused(turn)}
    last = max(refused, default=-1)
    latest = {_calls_key(turn): i for i, turn in enumerate(window)}  # a call sent again, then done
    return [
        turn
        for i, turn in enumerate(window)
        if i not in refused or (i == last and latest[_calls_key(turn)] == i)
    ]


def window_texts(window: list[Turn]) -> list[str]:
    """The texts a request's window holds (replies, their calls' arguments, results): where code the
    model has already seen may be."""
    texts = []
    for turn in window:
        texts += [turn.assistant.text, turn.user.text, *(r.content for r in turn.user.tool_results)]
        texts += [str(v) for call in turn.assistant.tool_calls for v in call.arguments.values()]
    return texts
