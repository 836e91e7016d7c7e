"""A new params run records the task's defaults as its first experiment before any model is asked
(`--first defaults`, the default), in every mode: the baseline every proposal is measured against. A
small model asked to start invents a whole configuration instead, and its run searches around that
guess. End to end against the real server (the worker's shared one: each test starts a run of its own and
reads back that run's experiments), with the real OpenAI SDK talking to a local fake."""

from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.client.run_cmd import run_session
from conftest import run_args, toy_openai_args
from fakes import FakeOpenAIServer, chat_completion

DEFAULTS = {"x": 0.0, "y": 0.0, "sleep": 0.0}


def recorded(result: Any) -> list[tuple[dict[str, Any], str | None]]:
    """The run's experiments as the server stored them (read back at the run's end), in order."""
    return [(experiment.params, experiment.note) for experiment in result.history]


def first_args(tmp_path: Path, fake: FakeOpenAIServer, iterations: int, first: str = "defaults") -> Any:
    return toy_openai_args(tmp_path, fake.base_url, iterations, "--first", first)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["stateful", "stateless-strong", "stateless"])
async def test_the_defaults_are_recorded_first_and_the_model_is_asked_for_the_second(
    tmp_path: Path, shared_server: str, mode: str
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(chat_completion('{"x": 0.5}'))
        result = await run_session(first_args(tmp_path, fake, 2), mode=mode, seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "budget" and result.experiments == 2 and result.llm_calls == 1
    assert recorded(result) == [
        (DEFAULTS, "the defaults (--first defaults)"),
        ({**DEFAULTS, "x": 0.5}, None),
    ]
    # The one request already holds the defaults' result: the model starts from a measured baseline.
    asked = bodies[0]["messages"][-1]["content"]
    assert "1/2 used" in asked if mode == "stateful" else "Iter 1:" in asked
    assert "none yet" not in asked


@pytest.mark.asyncio
async def test_with_first_model_the_model_proposes_the_first_experiment(tmp_path: Path, shared_server: str):
    with FakeOpenAIServer() as fake:
        fake.enqueue(chat_completion('{"x": 0.5}'), chat_completion('{"y": 0.5}'))
        result = await run_session(first_args(tmp_path, fake, 2, first="model"), mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.experiments == 2 and result.llm_calls == 2
    assert recorded(result)[0] == ({**DEFAULTS, "x": 0.5}, None)
    assert "none yet" in bodies[0]["messages"][-1]["content"]


@pytest.mark.asyncio
async def test_a_budget_of_one_is_the_models_own_experiment(tmp_path: Path, shared_server: str):
    with FakeOpenAIServer() as fake:
        fake.enqueue(chat_completion('{"x": 0.5}'))
        result = await run_session(first_args(tmp_path, fake, 1), mode="stateful", seed=1)
    assert result.experiments == 1 and result.llm_calls == 1
    assert recorded(result) == [({**DEFAULTS, "x": 0.5}, None)]


@pytest.mark.asyncio
async def test_a_reply_that_restates_the_bests_own_value_is_told_it_changed_nothing(
    tmp_path: Path, shared_server: str
):
    # hpo-covertype applies a reply to the best (base="best"): max_depth 6 is the defaults' own value.
    with FakeOpenAIServer() as fake:
        fake.enqueue(chat_completion('{"max_depth": 6}'), chat_completion('{"max_depth": 8}'))
        args = run_args(
            tmp_path, "--task", "hpo-covertype", "--llm", "openai", "--base-url", fake.base_url,
            "--model", "m", "--iterations", "2", "--first", "defaults",
        )  # fmt: skip
        result = await run_session(args, mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.experiments == 2 and result.refusals == {"exact_repeat": 1}
    told = bodies[1]["messages"][-1]["content"]
    # The fresh summary, then why the reply was not used, in so many words before the server's refusal.
    note = (
        "\n\nYour last reply was not used. max_depth=6 changed nothing: the best (#1) has this value already."
    )
    assert told.startswith("1/2 used") and note in told
    assert "exact repeat of experiment #1" in told
