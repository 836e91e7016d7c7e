"""The transcript format: one JSON line per LLM call, written by the client's meter, read by compare,
the dashboard and the report. Each line holds `ts`, `run_id`, `mode`, `iteration` (the experiment the
call works toward), `call`, `llm`, `scripted`, `request`, `response`, `latency_s`, `tokens` (`fixed`,
`messages`, `output`, `context`, `full`, `cache_weighted`) and `provider_usage`."""

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def load_transcript(path: Path | str) -> list[dict[str, Any]]:
    """Every line of a transcript, in order. A torn last line (a killed run) is skipped; a run that made
    no call has no transcript, which reads as no lines."""
    records: list[dict[str, Any]] = []
    if not Path(path).exists():
        return records
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class TokenTotals(BaseModel):
    calls: int = 0
    fixed: int = 0
    messages: int = 0
    output: int = 0
    context: int = 0
    full: int = 0
    cache_weighted: float = 0.0
    latency_s: float = 0.0

    def add(self, record: dict[str, Any]) -> None:
        t = record["tokens"]
        self.calls += 1
        self.fixed += t["fixed"]
        self.messages += t["messages"]
        self.output += t["output"]
        self.context += t["context"]
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
