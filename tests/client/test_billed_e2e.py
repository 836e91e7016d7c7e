"""What a run is billed, end to end: the provider's own count recorded call by call and leading the
results, the scripted double's count named for what it is, the cache breakpoints the anthropic backend
really sends, and each named model's cost from its dated prices."""

import itertools
import json
import threading
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.cli import build_parser, main
from autoresearch_mcp.client.billing import Calls, run_cost
from autoresearch_mcp.client.llm.anthropic_backend import AnthropicLLM
from autoresearch_mcp.client.llm.base import LLMRequest, Message, ToolSpec
from autoresearch_mcp.client.prices import prices
from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.contract.transcript import load_transcript
from fakes import FakeAnthropicServer, FakeOpenAIServer, anthropic_message, chat_completion


class CountingProvider:
    """Answers every chat request with a new point, reporting usage of its own: a prompt count that is
    not the meter's (a provider's tokenizer and chat template) and part of it cached."""

    def __init__(self) -> None:
        self.reported: list[tuple[int, int, int]] = []  # (prompt, cached, completion) per answer
        self._points = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            n = next(self._points)
            prompt = len(json.dumps(body)) // 3
            cached, completion = prompt // 2, 7 + n
            self.reported.append((prompt, cached, completion))
        point = {"x": round(0.1 * n, 1), "y": -0.1}
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached}
        if body.get("tools"):  # the stateful agent's tool; this task's schema nests the params
            return chat_completion(tool_calls=[("run_experiment", {"params": point})], **usage)
        return chat_completion(json.dumps(point), **usage)


@pytest.mark.slow  # compare through another door: a run's billing is the scripted double's test
def test_compare_against_a_provider_that_reports_usage_leads_with_what_it_counted(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    provider = CountingProvider()
    out = tmp_path / "out"
    with FakeOpenAIServer(handler=provider) as fake:
        code = main(
            [
                "compare", "--task", "toy-quadratic", "--llm", "openai", "--base-url", fake.base_url,
                "--model", "qwen2.5-coder", "--iterations", "2", "--seeds", "7",
                "--modes", "stateless-strong,stateful", "--out", str(out),
            ]
        )  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    reported = {(p, c, o) for p, c, o in provider.reported}
    for run in results["runs"]:
        records = load_transcript(out / "transcripts" / f"{run['mode']}-7.jsonl")
        # Every call's line holds the provider's own count, cached tokens inside its prompt count.
        lines = [(r["billed"]["input"], r["billed"]["cached_read"], r["billed"]["output"]) for r in records]
        assert set(lines) <= reported and all(r["billed"]["source"] == "provider" for r in records)
        assert all(r["billed"]["input"] != r["tokens"]["full"] - r["tokens"]["output"] for r in records)
        billed = run["totals"]["billed"]
        assert billed["source"] == "provider"
        assert billed["input"] == sum(p for p, _, _ in lines)
        assert billed["output"] == sum(o for _, _, o in lines)
        assert billed["cached_read"] == sum(c for _, c, _ in lines)
        assert run["totals"]["billed_tokens"] == billed["input"] + billed["output"]
        assert sum(row["billed_tokens"] for row in run["per_iteration"]) == run["totals"]["billed_tokens"]
    assert sum(r["totals"]["llm_calls"] for r in results["runs"]) == len(provider.reported)
    summary = results["summary"]
    assert summary["headline"] == {
        "baseline": "stateless-strong",
        "measure": "billed_tokens",
        "billed_source": "provider",
    }
    strong, stateful = (summary[m]["billed_tokens"] for m in ("stateless-strong", "stateful"))
    assert summary["ratio_strong"]["billed_tokens"] == round(strong / stateful, 2)
    table = (out / "table.md").read_text()
    billed_row = next(line for line in table.splitlines() if line.startswith("| billed tokens"))
    assert "provider" in billed_row and "cl100k_base" not in billed_row


@pytest.mark.asyncio
async def test_the_scripted_double_bills_the_meters_count_and_says_it_is_tiktokens(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    args = build_parser().parse_args(
        ["run", "--db", str(tmp_path / "runs.db"), "--quiet", "--task", "toy-quadratic", "--llm", "scripted",
         "--iterations", "3", "--first", "model"]
    )  # fmt: skip
    result = await run_session(args, mode="stateful", seed=2)
    records = load_transcript(result.transcript)
    assert len(records) >= 3
    for r in records:
        assert r["provider_usage"] is None
        assert r["billed"] == {
            "source": "tiktoken",
            "input": r["tokens"]["full"] - r["tokens"]["output"],
            "cached_read": None,
            "cache_write": None,
            "output": r["tokens"]["output"],
        }


def _cut_request(points: int) -> tuple[LLMRequest, list[int]]:
    lines = [f"Iter {i}: score=-0.{i:04d} x=0.{i}\n" for i in range(1, points + 1)]
    text = "Instructions.\n" + "".join(lines) + "Propose the next point."
    ends = [len("Instructions.\n") + len("".join(lines[:i])) for i in range(points)]
    tool = ToolSpec(name="note", description="Keep a note.", input_schema={"type": "object"})
    message = Message(role="user", text=text, cache_points=ends)
    return LLMRequest(system="You search.", tools=[tool], messages=[message]), ends


@pytest.mark.asyncio
async def test_the_anthropic_backend_sends_the_fixed_prefix_and_the_latest_cache_points_as_at_most_four_breakpoints():
    request, ends = _cut_request(5)
    with FakeAnthropicServer([anthropic_message("ok")]) as fake:
        llm = AnthropicLLM(base_url=fake.root_url, api_key="sk-test", prompt_caching=True)
        try:
            await llm.complete(request)
        finally:
            await llm.aclose()
        (body,) = fake.bodies("/v1/messages")
    marked = [b for b in (body["tools"][-1], *body["system"]) if "cache_control" in b]
    blocks = body["messages"][0]["content"]
    assert "".join(b["text"] for b in blocks) == request.messages[0].text  # the model reads the same
    ends_of = itertools.accumulate(len(b["text"]) for b in blocks)
    cut_at = [end for end, b in zip(ends_of, blocks, strict=True) if "cache_control" in b]
    # Tools and system (the same on every call) keep theirs; of the five points, the latest two.
    assert len(marked) == 2 and len(marked) + len(cut_at) == prices().anthropic.max_breakpoints == 4
    assert cut_at == ends[-2:]


def test_each_named_models_cost_is_its_dated_prices_times_what_its_cache_rules_bill(tmp_path: Path):
    head = "You search a space. History:\n"
    rows = [f"Iter {i}: score=0.{i:04d} n_estimators={i} max_depth=8 learning_rate=0.1\n" for i in range(80)]
    records = []
    for call, n in enumerate((60, 61, 62)):
        history = "".join(rows[:n])
        text = head + history + "Best so far: Iter 1. Propose the next configuration."
        points = [len(head), len(head + "".join(rows[: n - 1])), len(head + history)]
        request = LLMRequest(system="", messages=[Message(role="user", text=text, cache_points=points)])
        records.append(
            {
                "ts": f"2026-12-02T10:00:{10 * call:02d}+00:00",
                "latency_s": 1.0,
                "request": request.model_dump(mode="json"),
                "tokens": {"output": 15},
            }
        )
    table = prices()
    cost = run_cost(records)
    assert set(cost) == set(table.models)
    calls = Calls(records)
    for name, model in table.models.items():
        assert date.fromisoformat(model.checked) <= date.today() and model.source.startswith("https://")
        bills = calls.bills(model, table)
        tokens = {k: sum(getattr(b, k) for b in bills) for k in ("uncached", "cache_write", "cache_read")}
        expected = (
            tokens["uncached"] * model.input
            + tokens["cache_write"] * model.cache_write
            + tokens["cache_read"] * model.cache_read
            + 45 * model.output
        ) / 1e6
        assert cost[name]["usd"] == pytest.approx(expected, abs=1e-6)
        assert cost[name]["output"] == 45
        # About 2,000 tokens of history: above every minimum but Haiku's 4,096, so read from the cache.
        cached = name != "claude-haiku-4-5"
        assert (tokens["cache_read"] > 0) == cached
        if cached:
            assert cost[name]["usd"] < (sum(tokens.values()) * model.input + 45 * model.output) / 1e6
