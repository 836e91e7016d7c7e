"""What a provider would bill for a run's calls under its published prompt-cache rules (prices.toml).

Every call of a transcript is rebuilt as the blocks that provider receives, in order: the fixed prefix
(the system prompt and the tools, serialised as that provider's API takes them), then each message's
text cut at the agent's cache points, then its tool calls and results. Then, call after call:

- Anthropic (explicit caching): a prefix is cached only up to a block marked cache_control: the fixed
  prefix and the agent's cache points, at most 4 (the latest kept), as the anthropic backend sends
  them. A breakpoint reads the longest entry written at it or at one of the 20 blocks before it that
  is still alive (5 minutes since its last use); from there to the furthest breakpoint whose prefix
  reaches the model's minimum, tokens are written (1.25x); the rest is plain input.
- OpenAI (automatic caching): the longest token prefix shared with an earlier request still alive is
  read at the cached price, from 1,024 tokens in steps of 128; there is no write surcharge.

Tokens are counted with tiktoken cl100k_base (the meter's count) for every model: their own tokenizers
are not available offline. A request that offers tools also pays, on Anthropic, the tool-use system
prompt the API adds (346 tokens on Claude 4 models, prices.toml), which no request shows. Only what a
request holds decides a bill, so both modes get the same rules.
"""

import hashlib
import json
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel

from autoresearch_mcp.client.llm.base import LLMRequest, anthropic_wire_tools, openai_wire_tools
from autoresearch_mcp.client.meter import count, encoding, message_text
from autoresearch_mcp.client.prices import ModelPrice, Prices, prices

KEPT_PREFIXES = 16  # OpenAI: earlier requests a new one is matched against (the latest are the longest)


class Bill(BaseModel):
    """Tokens by how they are billed, and what they cost on one model."""

    uncached: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0

    def add(self, other: "Bill") -> None:
        self.uncached += other.uncached
        self.cache_write += other.cache_write
        self.cache_read += other.cache_read
        self.output += other.output

    def usd(self, model: ModelPrice) -> float:
        return model.usd(
            uncached=self.uncached,
            cache_write=self.cache_write,
            cache_read=self.cache_read,
            output=self.output,
        )


class Block(BaseModel):
    key: str  # identifies the request's prefix up to and including this block
    tokens: int
    breakpoint: bool = False


def _fixed_text(request: LLMRequest, provider: str) -> str:
    if not request.tools:
        return request.system
    wire = anthropic_wire_tools if provider == "anthropic" else openai_wire_tools
    return request.system + json.dumps(wire(request.tools), separators=(",", ":"), ensure_ascii=False)


def blocks(request: LLMRequest, provider: str) -> list[Block]:
    """The request as the provider's blocks, each keyed by the whole prefix it ends (its content, not
    how it was cut: a history one call held in two blocks and the next in one is the same prefix)."""
    pieces: list[tuple[str, int, bool]] = []  # (content, tokens, breakpoint)
    fixed = _fixed_text(request, provider)
    if fixed:
        pieces.append((fixed, count(fixed), True))
    for message in request.messages:
        text, whole = message.text, message_text(message)
        start, before, opening = 0, 0, f"\x00{message.role}\x00"
        for point in sorted(p for p in set(message.cache_points) if 0 < p <= len(text)):
            upto = count(text[:point])
            pieces.append((opening + text[start:point], upto - before, True))
            start, before, opening = point, upto, ""
        pieces.append((opening + whole[start:], count(whole) - before, False))
    if provider == "anthropic":
        marked = [i for i, (_, _, bp) in enumerate(pieces) if bp]
        cap = prices().anthropic.max_breakpoints
        keep = set(marked[:1]) | set(marked[1:][-(cap - 1) :]) if marked else set()
        pieces = [(c, t, i in keep) for i, (c, t, _) in enumerate(pieces)]
    out, prefix = [], hashlib.sha256()
    for content, tokens, bp in pieces:
        prefix.update(content.encode())
        out.append(Block(key=prefix.copy().hexdigest(), tokens=tokens, breakpoint=bp))
    return out


def with_tool_prompt(parts: list[Block], tokens: int) -> list[Block]:
    """An Anthropic request that offers tools: the API's own tool-use system prompt is billed with the
    fixed prefix (the first block: system and tools), on every call, cached with it."""
    if not parts or not tokens:
        return parts
    return [parts[0].model_copy(update={"tokens": parts[0].tokens + tokens}), *parts[1:]]


def _start(record: dict[str, Any]) -> float:
    """When the call was sent: its line is written once the reply is in."""
    return datetime.fromisoformat(record["ts"]).timestamp() - float(record.get("latency_s", 0.0))


def token_ids(request: LLMRequest) -> np.ndarray:
    """The request as one token sequence, in the order an OpenAI-compatible API receives it."""
    enc = encoding()
    ids = enc.encode(_fixed_text(request, "openai"), disallowed_special=())
    for message in request.messages:
        ids += enc.encode(message_text(message), disallowed_special=())
    return np.asarray(ids, dtype=np.int64)


class AnthropicCache:
    def __init__(self, model: ModelPrice, table: Prices) -> None:
        self.rules = table.anthropic
        self.minimum = table.min_tokens(model)
        self.entries: dict[str, float] = {}  # prefix key -> last use

    def bill(self, parts: list[Block], at: float, output: int) -> Bill:
        alive = {k for k, used in self.entries.items() if at - used <= self.rules.ttl_s}
        cumulative, total = [], 0
        for b in parts:
            total += b.tokens
            cumulative.append(total)
        marks = [i for i, b in enumerate(parts) if b.breakpoint]
        read_at = -1
        for mark in marks:
            for j in range(mark, max(-1, mark - self.rules.lookback_blocks - 1), -1):
                if parts[j].key in alive:
                    read_at = max(read_at, j)
                    break
        read = cumulative[read_at] if read_at >= 0 else 0
        if read_at >= 0:
            self.entries[parts[read_at].key] = at
        written = [m for m in marks if cumulative[m] >= self.minimum]
        write = 0
        if written:
            write = max(0, cumulative[max(written)] - read)
            for m in written:
                self.entries[parts[m].key] = at
        return Bill(uncached=total - read - write, cache_write=write, cache_read=read, output=output)


class OpenAICache:
    def __init__(self, table: Prices) -> None:
        self.rules = table.openai
        self.entries: list[tuple[float, np.ndarray]] = []

    def bill(self, tokens: np.ndarray, at: float, output: int) -> Bill:
        self.entries = [(used, arr) for used, arr in self.entries if at - used <= self.rules.ttl_s]
        shared, used_index = 0, -1
        for i, (_, earlier) in enumerate(self.entries):
            n = min(len(earlier), len(tokens))
            differ = np.flatnonzero(earlier[:n] != tokens[:n])
            common = int(differ[0]) if len(differ) else n
            if common > shared:
                shared, used_index = common, i
        minimum, step = self.rules.min_tokens, self.rules.step_tokens
        read = 0 if shared < minimum else minimum + (shared - minimum) // step * step
        if used_index >= 0 and read:
            self.entries[used_index] = (at, self.entries[used_index][1])
        if len(tokens) >= minimum:
            self.entries = [*self.entries, (at, tokens)][-KEPT_PREFIXES:]
        return Bill(uncached=len(tokens) - read, cache_read=read, output=output)


class Calls:
    """A run's calls, each rebuilt once per provider and billed on as many models as asked."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.requests = [LLMRequest.model_validate(r["request"]) for r in records]
        self.starts = [_start(r) for r in records]
        self.outputs = [int(r["tokens"]["output"]) for r in records]
        self._anthropic: list[list[Block]] | None = None
        self._openai: list[np.ndarray] | None = None

    def bills(self, model: ModelPrice, table: Prices) -> list[Bill]:
        """Each call's bill on `model`, the calls taken in order (a transcript is one run)."""
        calls = zip(self.starts, self.outputs, strict=True)
        if model.provider == "anthropic":
            if self._anthropic is None:
                self._anthropic = [blocks(r, "anthropic") for r in self.requests]
            explicit = AnthropicCache(model, table)
            parts = [
                with_tool_prompt(p, model.tool_use_system_tokens) if r.tools else p
                for p, r in zip(self._anthropic, self.requests, strict=True)
            ]
            return [explicit.bill(p, at, out) for p, (at, out) in zip(parts, calls, strict=True)]
        if self._openai is None:
            self._openai = [token_ids(r) for r in self.requests]
        automatic = OpenAICache(table)
        return [automatic.bill(ids, at, out) for ids, (at, out) in zip(self._openai, calls, strict=True)]


def run_cost(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per named model: the run's tokens by how they are billed and its cost in USD."""
    table = prices()
    calls = Calls(records)
    out: dict[str, dict[str, Any]] = {}
    for name, model in table.models.items():
        total = Bill()
        for bill in calls.bills(model, table):
            total.add(bill)
        out[name] = {"usd": round(total.usd(model), 6), **total.model_dump()}
    return out
