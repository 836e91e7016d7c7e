"""The transcript records what the model made of the optimiser's suggestion: took it, changed it, or
ignored it; `run --suggest tpe` asks the server for it and refuses where no summary could show it."""

import gzip
import json
from pathlib import Path

import pytest

from autoresearch_mcp.cli import main
from autoresearch_mcp.client.llm.base import LLMRequest, LLMResponse, Message, ToolCall
from autoresearch_mcp.client.suggestion import uptake
from conftest import TESTS_DIR

SUMMARY = "3/10 used, higher score is better\noptimiser suggests: x=0.123 y=-4 shape=bowl\nNext?"


def turn(summary: str = SUMMARY) -> LLMRequest:
    return LLMRequest(system="", messages=[Message(role="user", text=summary)])


def reply(text: str = "", **params: object) -> LLMResponse:
    calls = [ToolCall(id="1", name="run_experiment", arguments={"params": params})] if params else []
    return LLMResponse(text=text, tool_calls=calls, stop_reason="end", usage=None, model="m")


def test_a_proposal_with_every_suggested_value_took_it():
    assert uptake(turn(), reply('{"x": 0.123, "y": -4, "shape": "bowl"}')) == "took"
    assert uptake(turn(), reply(x=0.123, y=-4.0, shape="bowl")) == "took"  # as a tool call, -4.0 shown -4


def test_a_proposal_with_half_or_more_of_them_changed_it_and_fewer_ignored_it():
    assert uptake(turn(), reply('{"params": {"x": 0.2, "y": -4, "shape": "bowl"}}')) == "changed"
    assert uptake(turn(), reply('{"x": 0.5, "y": 1, "shape": "bowl"}')) == "ignored"


def test_nothing_is_recorded_where_no_suggestion_was_offered_or_nothing_proposed():
    assert uptake(turn("3/10 used\nNext?"), reply('{"x": 0.123}')) is None
    assert uptake(turn(), reply("DONE: nothing left to try")) is None


@pytest.fixture
def toy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTORESEARCH_TASK_PLUGINS", "toy_task")
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))


def test_run_with_suggest_records_each_turns_uptake_and_stays_quiet_without_it(
    toy_env: None, server_here: None, tmp_path: Path
):
    common = ["run", "--task", "toy-quadratic", "--llm", "scripted", "--budget", "3", "--quiet"]
    common += ["--db", str(tmp_path / "r.db")]
    assert main([*common, "--suggest", "tpe", "--transcript", str(tmp_path / "s.jsonl")]) == 0
    assert main([*common, "--transcript", str(tmp_path / "plain.jsonl")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert lines and all(line["suggestion"] in ("took", "changed", "ignored") for line in lines)
    assert all("optimiser suggests: " in line["request"]["messages"][-1]["text"] for line in lines)
    plain = [json.loads(line) for line in (tmp_path / "plain.jsonl").read_text().splitlines()]
    assert plain and not any("suggestion" in line for line in plain)


def test_suggest_is_refused_in_one_line_on_code_work_and_in_the_stateless_modes(
    toy_env: None, server_here: None, tmp_path: Path, capfd
):
    db = str(tmp_path / "r.db")
    code = ["run", "--task", "codeopt-records", "--llm", "scripted", "--suggest", "tpe", "--db", db]
    assert main(code) == 2
    err = capfd.readouterr().err.strip()
    assert err.endswith(
        "--suggest is for params work: task codeopt-records is code work, with no params for an optimiser"
        " to suggest; run it without --suggest"
    )
    assert main(["run", "--llm", "scripted", "--suggest", "tpe", "--mode", "stateless", "--db", db]) == 2
    assert "--mode stateless does not read it" in capfd.readouterr().err


def test_compare_takes_suggest_for_the_stateful_mode_only_and_records_it(
    toy_env: None, server_here: None, tmp_path: Path, capfd
):
    base = ["compare", "--task", "toy-quadratic", "--llm", "scripted", "--iterations", "3", "--seeds", "42"]
    assert main([*base, "--suggest", "tpe", "--out", str(tmp_path / "all")]) == 2
    assert "--suggest puts its line in the summary only the stateful agent reads" in capfd.readouterr().err
    out = tmp_path / "stateful"
    assert main([*base, "--suggest", "tpe", "--modes", "stateful", "--out", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["suggest"] == "tpe"
    lines = gzip.decompress((out / "transcripts" / "stateful-42.jsonl.gz").read_bytes()).splitlines()
    assert len(lines) == 2 and all(json.loads(line)["suggestion"] for line in lines)  # #1: the defaults
