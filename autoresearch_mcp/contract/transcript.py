"""The transcript format: one JSON line per LLM call, written by the client's meter, read by compare,
the dashboard and the report. Each line holds `ts`, `run_id`, `mode`, `iteration` (the experiment the
call works toward), `call`, `llm`, `scripted`, `request`, `response`, `latency_s`, `tokens` (`fixed`,
`system`, `messages`, `output`, `context`, `symmetric`, `full`, `cache_weighted`, `cacheable`),
`provider_usage` (what the provider reported, as it reported it; null where it reports nothing, as
the scripted double), `billed` (that usage put one way for every provider, see `billed_of`) and
`token_budget` (the full tokens the client held the calls of its session to, `--token-budget`; null
without one, absent from transcripts written before it). A session is one client
command: its calls are numbered from 1, so a resumed run (`run --run-id`) starts a new session, and its
budget counts only the calls made since."""

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


def load_transcript(path: Path | str) -> list[dict[str, Any]]:
    """Every line of a transcript (`.jsonl`, or the `.jsonl.gz` copy committed with results), in order.
    A torn last line (a killed run) is skipped; a run that made no call has no transcript, which reads
    as no lines."""
    records: list[dict[str, Any]] = []
    path = Path(path)
    if not path.exists():
        return records
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    for line in data.decode("utf-8").splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def budget_share(spent: int, budget: int) -> str:
    """How close a run came to its token budget: `8,123 / 10,000 budget (81%)` (rounded down, so a run
    short of its budget never reads 100%). The client's live panel and the dashboard both say it so."""
    return f"{spent:,} / {budget:,} budget ({spent * 100 // budget}%)"


class BudgetUse(BaseModel):
    """A transcript's token budget and the full tokens spent against it."""

    budget: int
    spent: int = Field(description="full tokens of the calls the budget was held against")


def budget_use(records: list[dict[str, Any]]) -> BudgetUse | None:
    """The budget of the latest session (where `call` starts again from 1) in one run's records, and
    what that session's calls spent; None when the session had no budget or predates the field."""
    start = 0
    for i in range(1, len(records)):
        if records[i].get("call", 0) <= records[i - 1].get("call", 0):
            start = i
    session = records[start:]
    budget = session[-1].get("token_budget") if session else None
    if budget is None:
        return None
    spent = sum(r["tokens"]["full"] for r in session)
    return BudgetUse(budget=budget, spent=spent)


def billed_of(record: dict[str, Any]) -> dict[str, Any]:
    """One call's tokens as billed: `input` (every input token, cached or not), `cached_read`,
    `cache_write`, `output`, and `source`: "provider" where the provider reported its usage, else
    "tiktoken" (the meter's cl100k_base count: all a scripted double has, and no cache fields).
    Anthropic reports input without its cache reads and writes; OpenAI-compatible servers include
    their cached tokens in the prompt count (`cached_in_input`)."""
    usage = record.get("provider_usage") or {}
    if usage.get("input_tokens") is not None and usage.get("output_tokens") is not None:
        read, write = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
        extra = 0 if usage.get("cached_in_input") else (read or 0) + (write or 0)
        return {
            "source": "provider",
            "input": usage["input_tokens"] + extra,
            "cached_read": read,
            "cache_write": write,
            "output": usage["output_tokens"],
        }
    t = record["tokens"]
    return {
        "source": "tiktoken",
        "input": t["full"] - t["output"],
        "cached_read": None,
        "cache_write": None,
        "output": t["output"],
    }


class TokenTotals(BaseModel):
    calls: int = 0
    fixed: int = 0
    messages: int = 0
    output: int = 0
    context: int = 0
    symmetric: int = 0
    full: int = 0
    cache_weighted: float = 0.0
    latency_s: float = 0.0
    # As billed (billed_of): what the provider counted where it reported usage, else the meter's count.
    billed_input: int = 0
    billed_output: int = 0
    billed_cached_read: int = 0
    billed_cache_write: int = 0
    provider_calls: int = 0  # calls whose provider reported usage

    @property
    def billed(self) -> int:
        return self.billed_input + self.billed_output

    @property
    def billed_source(self) -> str:
        """provider (every call reported), tiktoken (none did: the scripted double), or mixed."""
        if self.provider_calls == self.calls and self.calls:
            return "provider"
        return "tiktoken" if not self.provider_calls else "mixed"

    def add(self, record: dict[str, Any]) -> None:
        t = record["tokens"]
        billed = billed_of(record)
        self.billed_input += billed["input"]
        self.billed_output += billed["output"]
        self.billed_cached_read += billed["cached_read"] or 0
        self.billed_cache_write += billed["cache_write"] or 0
        self.provider_calls += billed["source"] == "provider"
        self.calls += 1
        self.fixed += t["fixed"]
        self.messages += t["messages"]
        self.output += t["output"]
        self.context += t["context"]
        # Transcripts written before the symmetric measure: the system prompt was not counted apart.
        self.symmetric += t.get("symmetric", t["context"])
        self.full += t["full"]
        self.cache_weighted = round(self.cache_weighted + t["cache_weighted"], 1)
        self.latency_s = round(self.latency_s + record.get("latency_s", 0.0), 4)


def totals(records: list[dict[str, Any]]) -> TokenTotals:
    out = TokenTotals()
    for r in records:
        out.add(r)
    return out


def totals_by_iteration(records: list[dict[str, Any]]) -> dict[int, TokenTotals]:
    """Sums over the calls of each iteration, in iteration order."""
    out: dict[int, TokenTotals] = defaultdict(TokenTotals)
    for r in records:
        out[r["iteration"]].add(r)
    return dict(sorted(out.items()))
