"""A DONE while more than half the budget is left is questioned once, in every mode; a second DONE, or a
DONE with half or less left, ends the run. End to end against the real stdio server, with the real
OpenAI SDK talking to a local fake endpoint."""

from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.server.tasks.codeopt_records import rewrites
from conftest import run_args
from fakes import FakeOpenAIServer, chat_completion

EARLY = "DONE is early: 5 of 6 experiments are left. Try an idea you have not tried yet."


def last_user_text(body: dict[str, Any]) -> str:
    """The last user or tool message the model received."""
    return body["messages"][-1]["content"]


def toy_args(tmp_path: Path, fake: FakeOpenAIServer, iterations: int) -> list[str]:
    return run_args(
        tmp_path, "--task", "toy-quadratic", "--llm", "openai", "--base-url", fake.base_url,
        "--model", "m", "--iterations", str(iterations),
    )  # fmt: skip


@pytest.mark.asyncio
async def test_the_stateful_agent_questions_an_early_done_once_then_accepts_the_next(
    tmp_path: Path, agent_server_env: None
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(None, [("run_experiment", {"params": {"x": 0.1}})]),
            chat_completion("DONE: the optimum is near."),
            chat_completion(None, [("run_experiment", {"params": {"x": 0.0}})]),
            chat_completion("DONE: x=0 is the optimum."),
        )
        result = await run_session(toy_args(tmp_path, fake, 6), mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "llm-done" and result.detail == "DONE: x=0 is the optimum."
    assert result.experiments == 2 and result.llm_calls == 4
    assert last_user_text(bodies[2]) == f"{EARLY} Call a tool for the next experiment."
    assert result.refusals == {"early_done": 1}
    assert "DONE is early" not in last_user_text(bodies[3])  # asked once a run


@pytest.mark.asyncio
async def test_a_done_with_half_the_budget_left_ends_the_run_at_once(tmp_path: Path, agent_server_env: None):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(None, [("run_experiment", {"params": {"x": 0.1}})]),
            chat_completion("DONE: good enough."),
        )
        result = await run_session(toy_args(tmp_path, fake, 2), mode="stateful", seed=1)
    assert result.stop_reason == "llm-done" and result.llm_calls == 2 and result.refusals == {}


@pytest.mark.asyncio
async def test_a_text_reply_done_is_questioned_without_offering_done_in_the_same_breath(
    tmp_path: Path, agent_server_env: None
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(f"Copy the records with dict().\n```python\n{rewrites.source_after(1)}```"),
            chat_completion("DONE: The code is fast now."),
            chat_completion("DONE: nothing else to try."),
        )
        args = run_args(
            tmp_path,
            *("--task", "codeopt-records", "--llm", "openai", "--base-url", fake.base_url),
            *("--model", "qwen2.5-coder", "--iterations", "6", "--code-replies", "text"),
        )
        result = await run_session(args, mode="stateful", seed=42)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "llm-done" and result.experiments == 1 and result.llm_calls == 3
    answer = last_user_text(bodies[2]).split("Your last reply was not used. ", 1)[1]
    assert answer.startswith(EARLY) and answer.endswith("or REVERT v<N> with N from 1 to 2.")
    assert "DONE:" not in answer.removeprefix(EARLY)
    assert result.refusals == {"early_done": 1}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["stateless", "stateless-strong"])
async def test_the_baselines_question_an_early_done_once_and_only_the_strong_one_is_told_why(
    mode: str, tmp_path: Path, agent_server_env: None
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion('{"x": 0.1, "y": 0.0}'),
            chat_completion("DONE: close enough."),
            chat_completion('{"x": 0.0, "y": 0.0}'),
            chat_completion("DONE: at the optimum."),
        )
        result = await run_session(toy_args(tmp_path, fake, 6), mode=mode, seed=1)
        prompts = [last_user_text(body) for body in fake.bodies("/chat/completions")]
    assert result.stop_reason == "llm-done" and result.experiments == 2 and result.llm_calls == 4
    assert result.refusals == {"early_done": 1}
    told = f"Your last reply was not used: {EARLY}"
    assert (told in prompts[2]) is (mode == "stateless-strong")
    if mode == "stateless":
        assert prompts[2] == prompts[1]  # the paper's baseline is asked again, unchanged
    assert "DONE is early" not in prompts[3]
