"""`--batch K`: the model may propose up to K experiments in one reply, which the agent submits as
background jobs (submit_training_job) and collects (get_job), so that the server's workers measure them
at once. The server applies the budget, refusals and exact-repeat checks to each item, a pending one
included; a refused item costs nothing and the next turn names it. With K = 1 nothing here is used:
the model reads exactly what it read before.
"""

import json
import re
from typing import Any

from autoresearch_mcp.client.llm.base import LLMResponse
from autoresearch_mcp.client.prompts import BATCH_WORDS
from autoresearch_mcp.contract.tools import ToolName

# The words (prompts.py) are read by the scripted double as well (batch_size), as a model reads them.
_BATCH_SIZE = re.compile(re.escape(BATCH_WORDS.partition("{k}")[0]) + r"(\d+)")


def batch_turn(turn: str, k: int, json_replies: bool) -> str:
    """The turn's request with the batch offered (unchanged for K = 1)."""
    if k <= 1:
        return turn
    how = (
        f"a JSON list of up to {k} objects"
        if json_replies
        else f"up to {k} run_experiment calls in one reply"
    )
    return f"{turn} {BATCH_WORDS.format(k=k)}: {how}."


def batch_size(text: str) -> int:
    """The K a turn's words offer (1 where they offer no batch)."""
    found = _BATCH_SIZE.findall(text)
    return int(found[-1]) if found else 1


def _params(value: dict[str, Any]) -> dict[str, Any]:
    """An item, unwrapped where it was sent in the server's own shape ({"params": {...}})."""
    inner = value.get("params")
    return inner if set(value) == {"params"} and isinstance(inner, dict) else value


def parse_proposals(text: str) -> list[dict[str, Any]] | None:
    """The items of a batch reply: a JSON list of objects, else every JSON object in the reply in order
    (models also write one per line); None where it holds none."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    start = 0
    while start < len(text):
        char = text[start]
        if char not in "[{":
            start += 1
            continue
        try:
            value, end = decoder.raw_decode(text[start:])
        except ValueError:
            start += 1
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            if not found:
                return [_params(v) for v in value]
        elif isinstance(value, dict):
            found.append(_params(value))
            start += end
            continue
        start += 1
    return found or None


def over_batch(index: int, k: int) -> str:
    """What an item past the K allowed is told."""
    return f"item {index}: not run: --batch {k} takes at most {k} experiments per reply"


def proposed_count(response: LLMResponse) -> int:
    """How many experiments a reply proposed: its run_experiment calls, else the items of its JSON."""
    calls = sum(1 for call in response.tool_calls if call.name == ToolName.RUN_EXPERIMENT)
    return calls or len(parse_proposals(response.text) or [])
