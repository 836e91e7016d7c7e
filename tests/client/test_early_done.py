"""A DONE while more than half the budget is left is answered "DONE is early", in every mode, and counts
as a failure (a model that only says DONE ends on the failure streak); with half or less left, a DONE
ends the run, and only then is DONE offered. End to end against a real server (the worker's shared one,
over HTTP: conftest.shared_server), with the real OpenAI SDK talking to a local fake endpoint."""

from pathlib import Path
from typing import Any

import codeopt_rewrites as rewrites
import pytest

from autoresearch_mcp.client.run_cmd import run_session
from conftest import run_args, toy_openai_args
from fakes import FakeOpenAIServer, chat_completion

ALL = len(rewrites.REWRITES)  # every rewrite: several times the original's speed, surely faster
EARLY = "DONE is early: 3 of 4 experiments are left. Try an idea you have not tried yet."


def last_user_text(body: dict[str, Any]) -> str:
    """The last user or tool message the model received."""
    return body["messages"][-1]["content"]


def toy_args(tmp_path: Path, fake: FakeOpenAIServer, iterations: int, *extra: str) -> Any:
    return toy_openai_args(tmp_path, fake.base_url, iterations, "--param-replies", "tool", *extra)


@pytest.mark.asyncio
async def test_the_stateful_agent_answers_an_early_done_and_accepts_one_at_half_the_budget(
    tmp_path: Path, shared_server: str
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(None, [("run_experiment", {"params": {"x": 0.1}})]),
            chat_completion("DONE: the optimum is near."),
            chat_completion(None, [("run_experiment", {"params": {"x": 0.0}})]),
            chat_completion("DONE: x=0 is the optimum."),
        )
        result = await run_session(toy_args(tmp_path, fake, 4), mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "llm-done" and result.detail == "DONE: x=0 is the optimum."
    assert result.experiments == 2 and result.llm_calls == 4
    assert last_user_text(bodies[2]) == f"{EARLY} Call a tool for the next experiment."
    assert result.refusals == {"early_done": 1}


@pytest.mark.asyncio
async def test_a_model_that_only_says_done_ends_on_the_failure_streak(tmp_path: Path, shared_server: str):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(None, [("run_experiment", {"params": {"x": 0.1}})]),
            *(chat_completion("DONE: nothing left to try.") for _ in range(3)),
        )
        result = await run_session(
            toy_args(tmp_path, fake, 6, "--max-failures", "3"), mode="stateful", seed=1
        )
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "failures" and result.experiments == 1 and result.llm_calls == 4
    assert result.refusals == {"early_done": 3}
    assert last_user_text(bodies[3]).startswith("DONE is early: 5 of 6 experiments are left.")


@pytest.mark.asyncio
async def test_a_done_with_half_the_budget_left_ends_the_run_at_once(tmp_path: Path, shared_server: str):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(None, [("run_experiment", {"params": {"x": 0.1}})]),
            chat_completion("DONE: good enough."),
        )
        result = await run_session(toy_args(tmp_path, fake, 2), mode="stateful", seed=1)
    assert result.stop_reason == "llm-done" and result.llm_calls == 2 and result.refusals == {}


@pytest.mark.asyncio
async def test_text_replies_are_offered_done_only_where_it_would_end_the_run(
    tmp_path: Path, shared_server: str
):
    with FakeOpenAIServer() as fake:
        # All the rewrites (several times the original's speed): #1 is surely faster, a version that
        # ran well, so a DONE is "early" rather than "nothing ran well yet".
        fake.enqueue(
            chat_completion(f"Copy the records with dict().\n```python\n{rewrites.source_after(ALL)}```"),
            chat_completion("DONE: The code is fast now."),
            chat_completion("REVERT v1"),
            chat_completion(f"Both fixes.\n```python\n{rewrites.source_after(5)}```"),
            chat_completion("REVERT v2"),
            chat_completion("DONE: nothing else to try."),
        )
        args = run_args(
            tmp_path,
            *("--task", "codeopt-records", "--llm", "openai", "--base-url", fake.base_url),
            *("--model", "qwen2.5-coder", "--iterations", "4", "--code-replies", "text"),
        )
        result = await run_session(args, mode="stateful", seed=42)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "llm-done" and result.experiments == 2 and result.llm_calls == 6
    early = last_user_text(bodies[2]).split("Your last reply was not used. ", 1)[1]
    assert early.startswith(EARLY) and early.endswith("or REVERT v<N> with N from 1 to 2.")
    after_revert = last_user_text(bodies[3]).split("\n\nYour REVERT v1 is done: ", 1)[1]
    assert after_revert.startswith("train.py is now v3") and "DONE" not in after_revert  # 3 of 4 left
    at_half = last_user_text(bodies[5]).split("\n\nYour REVERT v2 is done: ", 1)[1]  # 2 of 4 left
    assert at_half.startswith("train.py is now v5") and at_half.endswith("; or DONE: <reason>.")
    assert result.refusals == {"early_done": 1}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["stateless", "stateless-strong"])
async def test_the_baselines_question_an_early_done_once_and_only_the_strong_one_is_told_why(
    mode: str, tmp_path: Path, shared_server: str
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion('{"x": 0.1, "y": 0.0}'),
            chat_completion("DONE: close enough."),
            chat_completion('{"x": 0.0, "y": 0.0}'),
            chat_completion("DONE: at the optimum."),
        )
        result = await run_session(toy_args(tmp_path, fake, 4), mode=mode, seed=1)
        prompts = [last_user_text(body) for body in fake.bodies("/chat/completions")]
    assert result.stop_reason == "llm-done" and result.experiments == 2 and result.llm_calls == 4
    assert result.refusals == {"early_done": 1}
    told = f"Your last reply was not used: {EARLY}"
    assert (told in prompts[2]) is (mode == "stateless-strong")
    if mode == "stateless":
        assert prompts[2] == prompts[1]  # the paper's baseline is asked again, unchanged
    assert "DONE is early" not in prompts[3]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["stateful", "stateless", "stateless-strong"])
async def test_done_from_one_keeps_every_mode_going_to_the_end_of_the_budget(
    mode: str, tmp_path: Path, shared_server: str
):
    """The owner's --done-from 1: a DONE with 1 of 3 experiments left is answered "DONE is early" in
    every mode, and the run ends on its budget (at the default 0.5 that DONE would have ended it)."""
    proposal = (
        (lambda x: chat_completion(None, [("run_experiment", {"params": {"x": x}})]))
        if mode == "stateful"
        else (lambda x: chat_completion(f'{{"x": {x}, "y": 0.0}}'))
    )
    with FakeOpenAIServer() as fake:
        fake.enqueue(proposal(0.2), proposal(0.1), chat_completion("DONE: close enough."), proposal(0.0))
        result = await run_session(toy_args(tmp_path, fake, 3, "--done-from", "1"), mode=mode, seed=1)
        prompts = [last_user_text(body) for body in fake.bodies("/chat/completions")]
    assert result.stop_reason == "budget" and result.experiments == 3 and result.llm_calls == 4
    assert result.refusals == {"early_done": 1}
    assert ("DONE is early: 1 of 3 experiments are left." in prompts[3]) is (mode != "stateless")
    if mode == "stateful":
        assert (
            prompts[3] == "DONE is early: 1 of 3 experiments are left. Try an idea you have not tried yet."
            " Call a tool for the next experiment."
        )


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2", "half", "nan"])
def test_done_from_outside_zero_to_one_is_refused_before_anything_runs(value: str, tmp_path: Path, capsys):
    with pytest.raises(SystemExit):
        run_args(tmp_path, "--task", "toy-quadratic", "--llm", "scripted", "--done-from", value)
    assert f"expected a share of the budget above 0 and at most 1, not '{value}'" in capsys.readouterr().err
