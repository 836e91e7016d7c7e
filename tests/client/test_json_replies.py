"""By default the stateful agent asks a params task's model for one JSON object of the params it changes,
in text, and sends it as run_experiment itself: no tool definitions ride on the request (a provider
bills them, and its own tool-use preamble, on every call). Refusals, replies without JSON and early DONEs
are answered in text, and a refused reply is not replayed. End to end against a real server (the
test's own in this process, conftest.server_here, or the worker's shared one over HTTP where the test
reads nothing of its database), with the real OpenAI and Anthropic SDKs talking to local fake endpoints."""

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.contract.transcript import load_transcript
from conftest import run_args, toy_openai_args
from fakes import FakeAnthropicServer, FakeOpenAIServer, anthropic_message, chat_completion


def recorded(db: Path) -> list[tuple[str, dict[str, Any]]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT status, params_json FROM experiments ORDER BY iteration").fetchall()
    finally:
        conn.close()
    return [(status, json.loads(params)) for status, params in rows]


def toy_args(tmp_path: Path, fake: FakeOpenAIServer, iterations: int) -> Any:
    return toy_openai_args(tmp_path, fake.base_url, iterations, "--tool-choice", "run_experiment")


@pytest.mark.asyncio
async def test_the_model_is_offered_no_tool_and_its_json_reply_runs_as_an_experiment(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion('{"x": 0.5}', prompt_tokens=120, completion_tokens=7),
            chat_completion('Try y.\n```json\n{"params": {"x": 0.5, "y": -1}}\n```'),
        )
        result = await run_session(toy_args(tmp_path, fake, 2), mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "budget" and result.experiments == 2 and result.refusals == {}
    # Neither tools nor a tool choice: --tool-choice forces a JSON reply instead.
    assert all("tools" not in body and "tool_choice" not in body for body in bodies)
    assert all(body["response_format"] == {"type": "json_object"} for body in bodies)
    system = bodies[0]["messages"][0]
    assert (
        system["role"] == "system"
        and "Reply with one JSON object of only the params you change" in system["content"]
    )
    # A reply in prose and a code fence, nested in `params` as the server takes them, is read too.
    assert [params for _, params in recorded(tmp_path / "runs.db")] == [
        {"x": 0.5, "y": 0.0, "sleep": 0.0},
        {"x": 0.5, "y": -1.0, "sleep": 0.0},
    ]
    records = load_transcript(result.transcript)
    assert (
        records[0]["request"]["tools"] == []
        and records[0]["tokens"]["fixed"] == records[0]["tokens"]["system"]
    )
    assert records[0]["billed"]["input"] == 120  # the provider's count


@pytest.mark.asyncio
async def test_a_refused_reply_is_answered_in_text_and_not_replayed(tmp_path: Path, shared_server: str):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion('{"x": 0.5}'),
            chat_completion('{"x": 0.5}'),
            chat_completion('{"x": 0.25}'),
        )
        result = await run_session(toy_args(tmp_path, fake, 2), mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.experiments == 2 and result.refusals == {"exact_repeat": 1}
    after = bodies[2]["messages"]
    # One user message: the fresh summary, then why the last reply was not used and a value to change.
    assert [m["role"] for m in after] == ["system", "user"]
    told = after[1]["content"]
    assert "Your last reply was not used." in told and "exact repeat of experiment #1" in told
    assert "Change at least one value this time" in told


@pytest.mark.asyncio
async def test_a_reply_without_json_is_counted_and_answered_with_the_form_to_use(
    tmp_path: Path, shared_server: str
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(chat_completion("I would raise x a little."), chat_completion('{"x": 1}'))
        result = await run_session(toy_openai_args(tmp_path, fake.base_url, 1), mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.experiments == 1 and result.refusals == {"unparsed_reply": 1}
    assert all("response_format" not in body for body in bodies)  # --tool-choice not given: not forced
    told = bodies[1]["messages"][-1]["content"]
    assert "It held no JSON object of params. Reply with one JSON object of the params you change" in told
    assert "I would raise x" not in json.dumps(bodies[1]["messages"])


@pytest.mark.asyncio
async def test_an_early_done_is_answered_and_a_done_at_half_the_budget_ends_the_run(
    tmp_path: Path, shared_server: str
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion('{"x": 0.1}'),
            chat_completion("DONE: the optimum is near."),
            chat_completion('{"x": 0.0}'),
            chat_completion("DONE: x=0 is the optimum."),
        )
        result = await run_session(toy_args(tmp_path, fake, 4), mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "llm-done" and result.detail == "DONE: x=0 is the optimum."
    assert result.experiments == 2 and result.refusals == {"early_done": 1}
    told = bodies[2]["messages"][-1]["content"]
    assert "DONE is early: 3 of 4 experiments are left." in told and "Reply with one JSON object" in told


@pytest.mark.slow  # JSON replies over a second provider: the OpenAI one is in the default suite
@pytest.mark.asyncio
async def test_over_the_anthropic_api_the_request_carries_no_tools_and_the_params_change_the_best(
    tmp_path: Path, agent_server_env: None, server_here: None, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with FakeAnthropicServer() as fake:
        fake.enqueue(
            anthropic_message("{}", input_tokens=200, output_tokens=3),
            anthropic_message('{"max_depth": 3}', input_tokens=260, output_tokens=8),
        )
        args = run_args(
            tmp_path, "--task", "hpo-covertype", "--llm", "anthropic", "--base-url", fake.root_url,
            "--iterations", "2", "--hpo-threads", "1",
        )  # fmt: skip
        result = await run_session(args, mode="stateful", seed=1)
        bodies = fake.bodies("/v1/messages")
    assert result.stop_reason == "budget" and result.experiments == 2
    assert all("tools" not in body and "tool_choice" not in body for body in bodies)
    assert "Reply with one JSON object of only the params you change" in json.dumps(bodies[0]["system"])
    second = bodies[1]["messages"][0]["content"][0]["text"]
    # Anthropic's model reads the neutral profile's turn: the secondary metrics too, and no order.
    assert "Best macro_f1=" in second and "(#1; accuracy " in second and "): defaults" in second
    assert "Change at least one value" not in second
    # base="best": the reply's one change, the rest the best's (here the defaults).
    first, changed = (params for _, params in recorded(tmp_path / "runs.db"))
    assert changed == {**first, "max_depth": 3}
    assert [r["billed"]["input"] for r in load_transcript(result.transcript)] == [200, 260]


@pytest.mark.asyncio
async def test_the_double_with_small_model_habits_is_refused_without_cost_in_json_replies(
    tmp_path: Path, shared_server: str
):
    args = run_args(tmp_path, "--task", "toy-quadratic", "--llm", "scripted-sloppy", "--iterations", "6")
    result = await run_session(args, mode="stateful", seed=42)
    assert result.stop_reason == "budget" and result.experiments == 6
    assert result.refusals.get("exact_repeat", 0) >= 1  # it copied the best
    records = load_transcript(result.transcript)
    assert all(r["request"]["tools"] == [] and not r["response"]["tool_calls"] for r in records)
