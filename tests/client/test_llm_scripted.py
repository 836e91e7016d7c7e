"""The scripted backend: deterministic, in range, never repeating, and shaped like a real LLM's output."""

import json
from typing import Any

import pytest

from autoresearch_mcp.client.llm import (
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    ToolSpec,
    make_llm,
)
from autoresearch_mcp.client.llm.scripted import ScriptedLLM
from autoresearch_mcp.client.llm.scripted_params import ParamSpace, parse_best
from autoresearch_mcp.server.tasks.folder.task import folder_task_class
from autoresearch_mcp.server.tasks.registry import BUILTIN, make_task
from conftest import scripted_llm

HPOParams = folder_task_class(BUILTIN / "hpo-covertype").params_model

HPO = "hpo-covertype"
CODE = "codeopt-records"
HPO_INFO = make_task("hpo-covertype", {}).info()
HPO_PLAN = make_task("hpo-covertype", {}).scripted_plan()
SPACE = ParamSpace(HPO_INFO.params_schema, HPO_PLAN)
BEST_LINE = (
    "Best: macro_f1=0.7712 at #3, train.py v1, "
    "params n_estimators=300 max_depth=10 learning_rate=0.15 subsample=0.8"
)
STATELESS_TAIL = "Propose the next configuration as JSON."


def _tool(name: str) -> ToolSpec:
    return ToolSpec(name=name, description=name, input_schema={"type": "object"})


def _stateless(text: str) -> LLMRequest:
    return LLMRequest(system="", messages=[Message(role="user", text=f"{text}\n{STATELESS_TAIL}")])


def _stateful(text: str, *tools: str) -> LLMRequest:
    return LLMRequest(
        system="You tune.", tools=[_tool(t) for t in tools], messages=[Message(role="user", text=text)]
    )


def _params(response: LLMResponse) -> dict[str, float]:
    """The one JSON object in a stateless reply."""
    start, end = response.text.index("{"), response.text.rindex("}") + 1
    return json.loads(response.text[start:end])


async def _run_stateless(seed: int, n: int) -> list[dict[str, float]]:
    llm = scripted_llm(HPO, seed=seed)
    out = []
    for i in range(n):
        out.append(_params(await llm.complete(_stateless(BEST_LINE if i >= 2 else "Best: none yet"))))
    return out


@pytest.mark.asyncio
async def test_hpo_proposals_are_deterministic_for_a_seed_and_differ_across_seeds() -> None:
    assert await _run_stateless(5, 12) == await _run_stateless(5, 12)
    assert await _run_stateless(5, 12) != await _run_stateless(6, 12)


@pytest.mark.asyncio
async def test_hpo_starts_from_the_defaults_never_repeats_and_stays_in_range() -> None:
    proposals = await _run_stateless(11, 80)
    assert proposals[0] == HPOParams().model_dump()
    assert len({tuple(sorted(p.items())) for p in proposals}) == len(proposals)
    for params in proposals:
        assert (
            HPOParams.model_validate(params).model_dump() == params
        )  # extra="forbid" and every ge/le bound hold
        assert params["n_estimators"] <= 400  # XGBoost time stays moderate


@pytest.mark.asyncio
async def test_hpo_perturbations_start_from_the_best_configuration_it_is_shown() -> None:
    # The summary names four params; the others are at their defaults in that configuration.
    best = {**SPACE.defaults, "n_estimators": 300, "max_depth": 10, "learning_rate": 0.15, "subsample": 0.8}
    proposals = (await _run_stateless(2, 20))[2:]
    near = [p for p in proposals if sum(p[k] == v for k, v in best.items()) >= 5]
    assert 6 <= len(near) < len(proposals)  # mostly exploitation, some exploration


@pytest.mark.asyncio
async def test_hpo_stateful_replies_with_one_call_holding_only_what_it_changes_from_the_best() -> None:
    # The task's profile has the agent send base="best": a proposal is its changes to the best.
    assert HPO_INFO.agent.fixed_arguments["run_experiment"] == {"base": "best"}
    llm = make_llm("scripted", model=None, task=HPO_INFO, plan=HPO_PLAN, seed=42)
    assert llm.name == "scripted" and llm.scripted
    response = await llm.complete(_stateful("Best: none yet", "run_experiment"))
    assert response.stop_reason == "tool_use" and response.usage is None and response.model == "scripted"
    (call,) = response.tool_calls
    # The first proposal is the defaults, which is nothing to change; no note, since none is offered.
    assert call.name == "run_experiment" and call.arguments == {"params": {}} and response.text == ""
    best = {**SPACE.defaults, "n_estimators": 300, "max_depth": 10, "learning_rate": 0.15, "subsample": 0.8}
    for _ in range(5):
        changes = (
            (await llm.complete(_stateful(BEST_LINE, "run_experiment"))).tool_calls[0].arguments["params"]
        )
        assert changes and all(best[name] != value for name, value in changes.items())
    with pytest.raises(LLMError, match="run_experiment"):
        await llm.complete(_stateful(BEST_LINE, "get_run_summary"))


@pytest.mark.asyncio
async def test_hpo_stateful_sends_its_reason_as_the_note_when_the_tool_offers_one() -> None:
    llm = make_llm("scripted", model=None, task=HPO_INFO, plan=HPO_PLAN, seed=42)
    with_note = ToolSpec(
        name="run_experiment",
        description="",
        input_schema={"type": "object", "properties": {"params": {}, "note": {"type": "string"}}},
    )
    request = LLMRequest(system="", tools=[with_note], messages=[Message(role="user", text="Best: none yet")])
    (call,) = (await llm.complete(request)).tool_calls
    assert call.arguments["note"] == "Start from the defaults to get a baseline."


def test_the_best_line_is_read_from_the_summary_format_and_from_json() -> None:
    text = "Run r1\n" + BEST_LINE + "\nLast 1:\n  #3 ok macro_f1=0.7712 (new best) max_depth=2"
    assert parse_best(text, SPACE.names) == {
        "n_estimators": 300,
        "max_depth": 10,
        "learning_rate": 0.15,
        "subsample": 0.8,
    }
    json_line = 'Iter 1: F1=0.7\nBest so far: F1=0.7900, params={"max_depth": 12, "gamma": 0.5, "note": "x"}'
    assert parse_best(json_line, SPACE.names) == {"max_depth": 12, "gamma": 0.5}
    stateless = (
        'Iter 1: F1=0.7000, precision=0.7, recall=0.7, params={"max_depth": 6}\n'
        'Iter 2: F1=0.7500, precision=0.7, recall=0.7, params={"max_depth": 9, "subsample": 0.8}\n'
        "Best so far: Iter 2 with F1=0.7500\nPropose the next configuration as JSON."
    )
    assert parse_best(stateless, SPACE.names) == {"max_depth": 9, "subsample": 0.8}
    assert parse_best("Best: none yet (macro_f1, higher is better)", SPACE.names) is None


def test_the_search_space_is_read_from_the_params_schema_the_server_publishes() -> None:
    assert set(SPACE.names) == set(HPOParams.model_fields)
    assert SPACE.bounds["max_depth"] == (1, 15) and SPACE.kinds["max_depth"] is int
    assert SPACE.defaults == HPOParams().model_dump()


def test_a_task_without_numeric_params_or_scripted_steps_is_refused_by_name() -> None:
    bare = HPO_INFO.model_copy(update={"name": "bare", "params_schema": {"properties": {}}})
    with pytest.raises(LLMError, match="no numeric params to search in task 'bare'"):
        ScriptedLLM(task=bare, seed=1)
    code = bare.model_copy(update={"kind": "code", "experiment_tool": "run_benchmark"})
    with pytest.raises(LLMError, match="no scripted steps for task 'bare'"):
        ScriptedLLM(task=code, seed=1)


@pytest.mark.asyncio
async def test_both_modes_propose_the_same_sequence_when_shown_the_same_results() -> None:
    # Fair comparison: only the context strategy differs, so the scripted search must not.
    stateful, stateless = scripted_llm(HPO, seed=9), scripted_llm(HPO, seed=9)
    best: dict[str, float] | None = None
    for i in range(10):
        if best is None:
            summary, history = "Best: none yet", "Best so far: none"
        else:
            pairs = " ".join(f"{k}={v:.4g}" for k, v in best.items())
            summary = f"Best: macro_f1=0.7{i} at #{i}, train.py v1, params {pairs}"
            history = f"Iter {i}: F1=0.7{i}, params={json.dumps(best)}\nBest so far: Iter {i} with F1=0.7{i}"
        changes = (
            (await stateful.complete(_stateful(summary, "run_experiment"))).tool_calls[0].arguments["params"]
        )
        a = {**SPACE.defaults, **(best or {}), **changes}  # what the server runs: the best, changed
        b = _params(await stateless.complete(_stateless(history)))
        assert a == b
        if i % 3 == 0:  # pretend every third proposal became the new best
            best = a


def test_a_best_line_of_defaults_means_the_default_configuration() -> None:
    summary = "Run r-1 hpo-covertype: running, 1/15 used\nBest macro_f1=0.6966 (#1, train.py v1): defaults"
    assert parse_best(summary, SPACE.names) == {}


@pytest.mark.asyncio
async def test_a_run_that_starts_with_a_best_builds_on_it_instead_of_running_the_defaults_again() -> None:
    with_note = ToolSpec(
        name="run_experiment",
        description="",
        input_schema={"type": "object", "properties": {"params": {}, "note": {"type": "string"}}},
    )

    async def first_call(summary: str) -> dict[str, Any]:
        request = LLMRequest(system="", tools=[with_note], messages=[Message(role="user", text=summary)])
        (call,) = (await scripted_llm(HPO, seed=7).complete(request)).tool_calls
        return call.arguments

    cold = await first_call("Best: none yet; params left out take the defaults: n_estimators=100 max_depth=6")
    assert cold["note"] == "Start from the defaults to get a baseline."
    chained = await first_call(BEST_LINE)  # a run started from an earlier one: its best comes first
    assert chained["note"].startswith("Perturb the best configuration")
    assert chained["params"]  # what it changes from that best: not the best again
