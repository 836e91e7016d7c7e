"""The strongest honest baseline, what a provider billed, and a prompt that outgrows the window: end to
end against a real server (the worker's shared one, over HTTP), with the real SDKs talking to local fake
LLM endpoints."""

from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.contract.transcript import load_transcript
from conftest import run_args
from fakes import FakeAnthropicServer, FakeOpenAIServer, anthropic_message, chat_completion, error_reply


@pytest.fixture
def server_env(shared_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's shared server (conftest.shared_server), and a key, which the anthropic backend's
    fake endpoint takes."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


def texts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The one user message's text blocks, as the Messages API received them."""
    (message,) = body["messages"]
    return message["content"]


@pytest.mark.asyncio
async def test_the_strong_baseline_is_told_why_a_reply_was_not_used_and_caches_its_history(
    tmp_path: Path, server_env: None
):
    with FakeAnthropicServer() as fake:
        fake.enqueue(
            anthropic_message('{"x": 0.5, "y": 0.0}', input_tokens=300, output_tokens=12),
            anthropic_message('Again: {"x": 0.5, "y": 0.0}', input_tokens=310, output_tokens=14),
            anthropic_message("I am not sure.", input_tokens=320, output_tokens=5),
            anthropic_message(
                '{"x": 0.2, "y": -0.1}', input_tokens=40, output_tokens=12, cache_read_input_tokens=290
            ),
        )
        args = run_args(
            tmp_path, "--task", "toy-quadratic", "--llm", "anthropic", "--base-url", fake.root_url,
            "--iterations", "2",
        )  # fmt: skip
        result = await run_session(args, mode="stateless-strong", seed=3)
        bodies = fake.bodies("/v1/messages")

    assert result.mode == "stateless-strong" and result.stop_reason == "budget" and result.experiments == 2
    assert result.refusals == {"exact_repeat": 1, "unparsed_reply": 1}
    records = load_transcript(result.transcript)
    prompts = [r["request"]["messages"][0]["text"] for r in records]
    # Caching is on by default: the text goes out cut at the cache points, each cut a breakpoint, and
    # reads the same as the prompt the meter counted.
    for body, record, prompt in zip(bodies, records, prompts, strict=True):
        blocks = texts(body)
        assert "".join(b["text"] for b in blocks) == prompt
        points = record["request"]["messages"][0]["cache_points"]
        ends = [
            sum(len(b["text"]) for b in blocks[: i + 1]) for i, b in enumerate(blocks) if "cache_control" in b
        ]
        assert ends == points and all(b["cache_control"] == {"type": "ephemeral"} for b in blocks[:-1])
    # The history line is compact, params at their defaults left out; the tail changes, the history not.
    assert "\nIter 1: score=" in prompts[1] and " x=0.5\n" in prompts[1] and "y=" not in prompts[1]
    assert texts(bodies[1])[-1]["text"].startswith("Best so far: Iter 1")
    # A refused reply is answered with what the stateful agent is told, in one line after the history.
    assert "Your last reply was not used: " in prompts[2] and "exact repeat" in prompts[2]
    # a model behind the Anthropic API gets the neutral profile: the reason, and no order to follow
    assert "Change at least one value" not in prompts[2]
    assert "Your last reply was not used: it held no JSON object of hyperparameters." in prompts[3]
    assert "Your last reply was not used" not in prompts[1]
    # What the provider reported is recorded beside the meter's count, its cache reads counted as input.
    assert records[3]["billed"] == {
        "source": "provider", "input": 330, "cached_read": 290, "cache_write": None, "output": 12,
    }  # fmt: skip
    assert records[3]["tokens"]["full"] != 342  # the meter's own count stays beside it


@pytest.mark.asyncio
async def test_the_paper_baseline_keeps_its_words_and_gets_no_feedback(tmp_path: Path, server_env: None):
    with FakeAnthropicServer() as fake:
        fake.enqueue(
            anthropic_message('{"x": 0.5, "y": 0.0}'),
            anthropic_message('{"x": 0.5, "y": 0.0}'),
            anthropic_message('{"x": 0.2, "y": -0.1}'),
        )
        args = run_args(
            tmp_path, "--task", "toy-quadratic", "--llm", "anthropic", "--base-url", fake.root_url,
            "--iterations", "2", "--no-prompt-caching",
        )  # fmt: skip
        result = await run_session(args, mode="stateless", seed=3)
        bodies = fake.bodies("/v1/messages")
    assert result.mode == "stateless" and result.experiments == 2 and result.refusals == {"exact_repeat": 1}
    prompts = [texts(body) for body in bodies]
    assert all(len(blocks) == 1 and "cache_control" not in blocks[0] for blocks in prompts)  # caching off
    assert prompts[1][0]["text"] == prompts[2][0]["text"]  # the refused call's prompt, sent again as it was
    assert 'Iter 1: score=-0.0800, params={"sleep": 0.0, "x": 0.5, "y": 0.0}\n' in prompts[1][0]["text"]


@pytest.mark.asyncio
async def test_the_stateful_agent_offers_the_params_at_the_top_level_and_nests_them_for_the_server(
    tmp_path: Path, server_env: None
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(tool_calls=[("run_experiment", {})], prompt_tokens=410, completion_tokens=9),
            chat_completion(tool_calls=[("run_experiment", {"max_depth": 3})], prompt_tokens=450),
        )
        args = run_args(
            tmp_path, "--param-replies", "tool", "--task", "hpo-covertype", "--llm", "openai", "--base-url", fake.base_url,
            "--model", "qwen2.5-coder", "--iterations", "2",
        )  # fmt: skip
        result = await run_session(args, mode="stateful", seed=5)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "budget" and result.experiments == 2 and result.refusals == {}
    (tool,) = bodies[0]["tools"]
    schema = tool["function"]["parameters"]
    assert "params" not in schema["properties"] and schema["properties"]["max_depth"] == {"type": "integer"}
    assert schema["additionalProperties"] is False
    second = bodies[1]["messages"][-1]["content"]
    assert "Best macro_f1=" in second and "(#1): defaults" in second
    records = load_transcript(result.transcript)
    assert [r["billed"]["input"] for r in records] == [410, 450]  # the provider's count, as billed
    assert all(r["billed"]["source"] == "provider" for r in records)


@pytest.mark.asyncio
async def test_a_prompt_that_would_not_fit_the_window_ends_the_run_with_that_reason(
    tmp_path: Path, server_env: None
):
    args = run_args(
        tmp_path, "--task", "toy-quadratic", "--llm", "scripted", "--iterations", "30",
        "--context-window", "600", "--max-tokens", "100",
    )  # fmt: skip
    result = await run_session(args, mode="stateless-strong", seed=1)
    assert result.stop_reason == "context-window" and 0 < result.experiments < 30
    assert "would not fit the model's 600-token window" in result.detail
    last = load_transcript(result.transcript)[-1]["tokens"]
    assert last["full"] - last["output"] + 100 <= 600  # every call made fitted
    assert result.run is not None and result.run.status == "stopped"


@pytest.mark.asyncio
async def test_a_provider_that_refuses_the_prompt_as_too_long_ends_the_run_with_that_reason(
    tmp_path: Path, server_env: None
):
    too_long = "Requested tokens (17020) exceed context window of 16384"
    with FakeOpenAIServer() as fake:
        fake.enqueue(chat_completion('{"x": 0.5}'), error_reply(400, "invalid_request_error", too_long))
        args = run_args(
            tmp_path, "--task", "toy-quadratic", "--llm", "openai", "--base-url", fake.base_url,
            "--model", "qwen2.5-coder", "--iterations", "5",
        )  # fmt: skip
        result = await run_session(args, mode="stateless-strong", seed=1)
    assert result.stop_reason == "context-window" and result.experiments == 1
    assert "refused the prompt as too long" in result.detail and too_long in result.detail
