"""A token budget (`--token-budget N`, full tokens over every LLM call): CHECK stops the run before the
call that could exceed it, the server's run is finished with that reason, and the totals say how close
the run came."""

import json
from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.cli import build_parser, main
from autoresearch_mcp.client import agent as agent_module
from autoresearch_mcp.client.agent import Agent
from autoresearch_mcp.client.check import AgentConfig, AgentResult, TokenBudgetStop
from autoresearch_mcp.client.compare_results import budget_record
from autoresearch_mcp.client.llm.base import (
    LLM,
    LLMRequest,
    LLMResponse,
    Message,
    ToolSpec,
    anthropic_wire_tools,
)
from autoresearch_mcp.client.meter import Transcript, count, input_tokens
from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.contract.transcript import load_transcript
from autoresearch_mcp.server.tasks.registry import make_task

MAX_TOKENS = 64  # the toy task's scripted replies are 30-50 tokens, so a small cap leaves them whole
BUDGET = 600  # a few calls of each mode on the toy task (stateful's JSON replies cost least); its budget is 6


class _Echo:
    """An LLM that answers every request with the same short text, and counts its calls."""

    name, scripted, cache_min_tokens = "echo", True, None

    def __init__(self) -> None:
        self.calls = 0

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return anthropic_wire_tools(tools)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        return LLMResponse(text="x = 0.3", tool_calls=[], stop_reason="end_turn", usage=None, model="echo")

    async def aclose(self) -> None:
        return None


def _run() -> Run:
    return Run(
        id="r-1", name=None, task="toy-quadratic", status="running", budget=10, used=0, target=None, seed=1,
        metric_name="score", direction="max", created_at="2026-11-30T12:00:00+00:00",
    )  # fmt: skip


@pytest.mark.asyncio
async def test_ask_makes_the_call_that_fits_exactly_and_refuses_the_one_that_could_exceed_the_budget(
    tmp_path: Path,
):
    llm = _Echo()
    request = LLMRequest(
        system="Maximise the score.", messages=[Message(role="user", text="Go " * 40)], max_tokens=100
    )
    sending, reply = input_tokens(request, llm), count("x = 0.3")
    # After one call, the second fits with nothing to spare; after two, the third could not.
    budget = (sending + reply) + sending + request.max_tokens
    config = AgentConfig(task=make_task("toy-quadratic", {}).info(), iterations=5, token_budget=budget)
    transcript = Transcript("r-1", "stateful", llm=llm, path=tmp_path / "t.jsonl")
    agent = Agent(None, transcript, "r-1", config)  # type: ignore[arg-type]  # ask never calls the server

    await agent.ask(request, _run())
    await agent.ask(request, _run())
    with pytest.raises(TokenBudgetStop) as stopped:
        await agent.ask(request, _run())

    assert llm.calls == 2 and agent.calls == 2
    spent = sum(r["tokens"]["full"] for r in load_transcript(transcript.path))
    assert spent == transcript.full_tokens == 2 * (sending + reply) <= budget
    reason, detail = stopped.value.stop
    assert reason == "token-budget"
    assert f"{spent:,} of {budget:,} spent" in detail and f"up to {request.max_tokens} back" in detail


def test_every_transcript_line_carries_the_token_budget_and_null_when_there_is_none(tmp_path: Path):
    request = LLMRequest(system="Maximise the score.", messages=[Message(role="user", text="Go")])
    reply = LLMResponse(text="x = 0.3", tool_calls=[], stop_reason="end_turn", usage=None, model="echo")
    for name, budget in [("capped", 5_000), ("uncapped", None)]:
        transcript = Transcript(
            "r-1", "stateful", llm=_Echo(), path=tmp_path / f"{name}.jsonl", token_budget=budget
        )
        for iteration in (1, 2):
            transcript.record(iteration=iteration, request=request, response=reply, latency_s=0.1)
        assert [r["token_budget"] for r in load_transcript(transcript.path)] == [budget, budget]


def test_a_token_budget_below_one_is_refused_by_the_config():
    with pytest.raises(ValueError, match="token_budget"):
        AgentConfig(task=make_task("toy-quadratic", {}).info(), iterations=5, token_budget=0)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["stateful", "stateless"])
async def test_a_run_stops_before_the_call_that_could_exceed_its_token_budget_and_is_finished_with_that_reason(
    tmp_path: Path, shared_server: str, monkeypatch: pytest.MonkeyPatch, mode: str
):
    measured: list[tuple[LLMRequest, int]] = []

    def spy(request: LLMRequest, llm: LLM | None = None) -> int:
        measured.append((request, input_tokens(request, llm)))
        return measured[-1][1]

    monkeypatch.setattr(agent_module, "input_tokens", spy)
    args = build_parser().parse_args(
        ["run", "--server-url", shared_server, "--quiet", "--task", "toy-quadratic", "--llm", "scripted",
         "--budget", "6", "--max-tokens", str(MAX_TOKENS), "--token-budget", str(BUDGET)]
    )  # fmt: skip
    result = await run_session(args, mode=mode, seed=42)

    records = load_transcript(result.transcript)
    spent = sum(r["tokens"]["full"] for r in records)
    assert result.stop_reason == "token-budget" and result.token_budget == BUDGET
    assert spent == result.full_tokens <= BUDGET
    # The budget travels in the transcript, the only place the dashboard can learn it from.
    assert [r["token_budget"] for r in records] == [BUDGET] * len(records)
    assert 1 <= result.experiments < 6 and result.llm_calls == len(records)
    # Every call was measured before it was made; the last one measured was never sent, and it could have
    # taken the run past its budget.
    assert len(measured) == len(records) + 1
    refused, sending = measured[-1]
    assert spent + sending + refused.max_tokens > BUDGET
    assert result.run is not None and result.run.status == "stopped"
    assert (result.run.finish_reason or "").startswith("token-budget: token budget reached")


def test_compare_holds_each_run_to_the_token_budget_and_writes_what_each_spent(
    tmp_path: Path, shared_server: str
):
    out = tmp_path / "out"
    command = (
        f"compare --task toy-quadratic --llm scripted --iterations 6 --seeds 42 --max-tokens {MAX_TOKENS}"
        f" --token-budget {BUDGET} --server-url {shared_server} --out"
    )
    assert main([*command.split(), str(out)]) == 0

    results = json.loads((out / "results.json").read_text())
    assert results["token_budget"] == BUDGET
    assert [r["mode"] for r in results["runs"]] == ["stateless", "stateless-strong", "stateful"]
    for run in results["runs"]:
        spent = run["totals"]["full_tokens"]
        assert run["stop_reason"] == "token-budget" and run["totals"]["experiments"] < 6
        assert run["token_budget"] == {
            "budget": BUDGET,
            "spent": spent,
            "percent": round(100 * spent / BUDGET, 1),
        }
        assert 0 < spent <= BUDGET
    assert f"Token budget: {BUDGET:,} full tokens per run." in (out / "table.md").read_text()


def test_a_run_without_a_token_budget_records_none_for_it(tmp_path: Path):
    result = AgentResult(
        run_id="r-1", mode="stateful", stop_reason="budget", detail="budget used (1/1)", experiments=1,
        llm_calls=1, best_metric=None, transcript=str(tmp_path / "t.jsonl"), scripted=True, full_tokens=812,
    )  # fmt: skip
    assert budget_record(result) is None
    result.token_budget = 1_000
    assert budget_record(result) == {"budget": 1_000, "spent": 812, "percent": 81.2}
