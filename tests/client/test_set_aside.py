"""A function whose new versions keep failing is set aside: train.py goes back to the best version (the
original when nothing ran well) and the turn shows the next function of the profile (client/set_aside.py).
Qwen2.5-Coder-1.5B sent wrong department_stats rewrites until its failure streak ended the run."""

import re
import sqlite3
from pathlib import Path

import pytest
from codeopt_rewrites import REFERENCE_SOURCE

from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.client.set_aside import SET_ASIDE_AFTER, SetAside, set_aside_note
from autoresearch_mcp.contract.functions import find_function
from autoresearch_mcp.contract.profile import FunctionTime, Profile
from conftest import run_args
from fakes import FakeOpenAIServer, chat_completion


def source_of(name: str) -> str:
    function = find_function(REFERENCE_SOURCE, name)
    assert function is not None
    return function.source


def profile(*names: str) -> Profile:
    functions = [
        FunctionTime(name=n, file="train.py", first_line=1, last_line=2, share=0.3, ms=1.0) for n in names
    ]
    return Profile(sha256="x", how="test", functions=functions, hot=names[0])


def test_a_function_is_set_aside_after_failed_experiments_in_a_row_each_counted_once():
    aside = SetAside()
    assert aside.record(1, "incorrect", ["department_stats"]) == []
    assert aside.record(1, "incorrect", ["department_stats"]) == []  # the same experiment, read again
    assert aside.record(2, "crash", ["department_stats"]) == ["department_stats"]
    assert SET_ASIDE_AFTER == 2
    assert aside.skip(profile("department_stats", "count_people")) == {"department_stats"}


def test_a_version_that_ran_well_clears_the_count_of_the_functions_it_changed():
    aside = SetAside()
    aside.record(1, "incorrect", ["count_people"])
    aside.record(2, "ok", ["count_people"])
    assert aside.record(3, "incorrect", ["count_people"]) == []


def test_the_note_asks_for_speed_only_where_speed_is_the_metric():
    assert set_aside_note(["forward"], None, 0, False, "val_loss") == (
        "forward: 2 versions in a row failed, so it is set aside for now; change what is shown below instead."
    )
    assert set_aside_note(["f"], 5, 2, True, "speedup").endswith(
        "train.py went back to v2 (the best so far) as v5; speed up the function below instead."
    )


def test_when_going_back_was_refused_the_note_says_train_py_is_still_the_failed_version():
    note = set_aside_note(["forward"], None, 3, True, "val_loss", refused="the server is busy")
    assert note == (
        "forward: 2 versions in a row failed, so it is set aside for now, but going back to v3 was refused "
        "(the server is busy): REVERT v3, then change what is shown below instead."
    )


def test_when_every_profiled_function_is_set_aside_all_are_shown_again():
    aside = SetAside()
    for i, name in enumerate(["count_people", "count_people", "copy_records", "copy_records"]):
        aside.record(i, "incorrect", [name])
    assert aside.skip(profile("count_people", "copy_records", "<module>")) == frozenset()
    assert aside.names == set()


@pytest.mark.asyncio
async def test_after_two_wrong_versions_of_the_hottest_function_the_next_turn_goes_back_and_shows_the_next(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    stats = source_of("department_stats")
    assert "top_earners[dept] = top[:3]" in stats
    wrong = [stats.replace("top[:3]", f"top[:{n}]") for n in (2, 4)]  # keeps 2, then 4: wrong output
    people = source_of("count_people").replace(
        "active_total = active_total + 1", "active_total += 1"
    )  # same output
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(f"Keep two.\n```python\n{wrong[0]}```"),
            chat_completion(f"Keep four.\n```python\n{wrong[1]}```"),
            chat_completion(f"Add in place.\n```python\n{people}```"),
        )
        args = run_args(
            tmp_path,
            *("--task", "codeopt-records", "--llm", "openai", "--base-url", fake.base_url),
            *("--model", "qwen2.5-coder", "--iterations", "3", "--code-replies", "text"),
        )
        result = await run_session(args, mode="stateful", seed=42)
        bodies = fake.bodies("/chat/completions")
    assert result.experiments == 3 and result.llm_calls == 3
    first, third = (" ".join(str(m["content"]) for m in bodies[i]["messages"][1:]) for i in (0, 2))
    assert "def department_stats(" in first
    assert (
        "department_stats: 2 versions in a row failed, so it is set aside for now: train.py went back to "
        "v1 (the original) as v4; speed up the function below instead." in third
    )
    ranked = re.search(r"Time by function: ([^\n]*)", third)
    assert ranked is not None
    order = [part.split()[0] for part in ranked.group(1).split(", ")]
    following = next(name for name in order if name != "department_stats")
    assert f"def {following}(" in third
    assert "Slowest lines of department_stats" not in third  # the lines of a function set aside
    conn = sqlite3.connect(tmp_path / "runs.db")
    try:
        sources = [row[0] for row in conn.execute("SELECT source FROM artifacts ORDER BY version")]
        statuses = [row[0] for row in conn.execute("SELECT status FROM experiments ORDER BY iteration")]
    finally:
        conn.close()
    assert sources[3] == REFERENCE_SOURCE  # v4: back at the original
    assert statuses == ["incorrect", "incorrect", "ok"]
    assert result.refusals == {}  # going back was the agent's step, not a refused call
