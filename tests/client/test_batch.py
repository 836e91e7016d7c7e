"""`run --batch K`: the model may propose up to K experiments in one reply, which the agent submits as
background jobs and collects, so that the server's workers measure them at once. Each item is judged by
the server alone (budget, refusals, exact repeats, a pending one included); a refused item costs no
budget and the next turn names it. End to end against a real server (in this process:
conftest.server_here), driven by the scripted double or by a fake OpenAI-compatible endpoint."""

import json
import sqlite3
from pathlib import Path

import pytest

from autoresearch_mcp.cli import main
from autoresearch_mcp.client.batch import batch_size, batch_turn, parse_proposals
from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.contract.transcript import load_transcript
from conftest import run_args, toy_openai_args
from fakes import FakeOpenAIServer, chat_completion


def listed(turn: str) -> list[str]:
    """The experiments a turn's summary lists, by number (its "Last" rows)."""
    rows = turn.split("\nLast", 1)[1].splitlines()[1:]
    return [row.split()[0] for row in rows[: next(i for i, r in enumerate(rows) if not r.startswith("#"))]]


def test_a_batch_reply_is_a_json_list_or_several_objects_and_k_1_changes_no_word():
    assert parse_proposals('[{"x": 1}, {"params": {"y": 2}}]') == [{"x": 1}, {"y": 2}]
    assert parse_proposals('First {"x": 1}\nthen {"x": 2}') == [{"x": 1}, {"x": 2}]
    assert parse_proposals("DONE: nothing left") is None
    assert batch_turn("Next?", 1, json_replies=True) == "Next?"
    offered = batch_turn("Next?", 4, json_replies=True)
    assert "up to 4 experiments at once" in offered and "a JSON list of up to 4 objects" in offered
    assert batch_size(offered) == 4 and batch_size("Next?") == 1


@pytest.mark.asyncio
async def test_a_batch_of_4_on_2_workers_records_4_experiments_per_model_call(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    args = run_args(tmp_path, "--task", "toy-quadratic", "--llm", "scripted", "--iterations", "9")
    args.batch, args.workers, args.first = 4, 2, "defaults"
    result = await run_session(args, mode="stateful", seed=42)
    assert result.stop_reason == "budget" and result.experiments == 9 and result.llm_calls == 2
    records = load_transcript(result.transcript)
    # The transcript records each batch: what was offered, what the reply proposed, and the iteration
    # it worked toward (the defaults are #1; each call's 4 items follow).
    assert [r["batch"] for r in records] == [{"offered": 4, "proposed": 4}] * 2
    assert [r["iteration"] for r in records] == [2, 6]
    assert len(json.loads(records[0]["response"]["text"])) == 4
    # The next turn's summary lists every result of the batch (not only its last 3), once: no item
    # line repeats a result, the best or the budget the summary gives.
    told = records[1]["request"]["messages"][-1]["text"]
    assert listed(told) == ["#2", "#3", "#4", "#5"]
    assert "item " not in told and "budget left" not in told
    conn = sqlite3.connect(tmp_path / "runs.db")
    try:
        jobs = conn.execute("SELECT status FROM jobs").fetchall()
    finally:
        conn.close()
    assert jobs == [("done",)] * 8  # measured as background jobs, on the server's workers


@pytest.mark.asyncio
async def test_a_batch_larger_than_a_summary_lists_shows_its_last_16_results(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    args = run_args(tmp_path, "--task", "toy-quadratic", "--llm", "scripted", "--iterations", "22")
    args.batch, args.workers, args.first = 20, 2, "defaults"
    result = await run_session(args, mode="stateful", seed=42)
    assert result.stop_reason == "budget" and result.experiments == 22 and result.llm_calls == 2
    told = load_transcript(result.transcript)[1]["request"]["messages"][-1]["text"]
    assert listed(told) == [f"#{i}" for i in range(6, 22)]  # the 20 of the batch, as far as 16 go


@pytest.mark.asyncio
async def test_a_refused_item_of_a_batch_says_which_and_why_and_costs_no_budget(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion('[{"x": 0.5}, {"x": 0.5}, {"x": 0.25}, {"x": 50}]'),
            chat_completion('[{"x": 1.0}]'),
        )
        args = toy_openai_args(tmp_path, fake.base_url, 3, "--batch", "4")
        result = await run_session(args, mode="stateful", seed=1)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "budget" and result.experiments == 3
    assert result.refusals == {"exact_repeat": 1, "invalid_params": 1}
    told = bodies[1]["messages"][-1]["content"]
    # Each refused item is named with its reason, in one line: the system prompt has the ranges, so
    # no list of the params follows an invalid one. The two that ran are the summary's rows.
    assert "item 2 refused:" in told and "exact repeat of experiment #1" in told
    invalid = next(line for line in told.splitlines() if line.startswith("item 4 refused:"))
    assert invalid.endswith("Input should be less than or equal to 10 (got 50). Nothing ran, no budget used.")
    assert "Allowed parameters" not in told and "first coordinate" not in told
    assert "item 1" not in told and "item 3" not in told and listed(told) == ["#1", "#2"]
    records = load_transcript(result.transcript)
    assert [r["batch"]["proposed"] for r in records] == [4, 1]


def test_bad_batch_values_are_refused_in_one_line(
    tmp_path: Path, capfd, agent_server_env: None, server_here: None
):
    db = ["--db", str(tmp_path / "r.db"), "--llm", "scripted"]
    with pytest.raises(SystemExit) as leaving:  # argparse's way out
        main(["run", *db, "--batch", "0"])
    assert leaving.value.code == 2
    assert (
        "--batch is a whole number of experiments per reply from 1 to 64, not '0'" in capfd.readouterr().err
    )
    assert main(["run", *db, "--batch", "4", "--mode", "stateless-strong"]) == 2
    err = capfd.readouterr().err.strip()
    assert err.endswith(
        "--batch 4 is read by the stateful agent; --mode stateless-strong proposes one experiment per"
        " call: drop --batch or use --mode stateful"
    )
    assert main(["run", *db, "--batch", "2", "--task", "codeopt-records"]) == 2
    assert "--batch is for params work: task codeopt-records is code work" in capfd.readouterr().err
