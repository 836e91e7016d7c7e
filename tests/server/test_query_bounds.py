"""Class 6 of issue 13: the 2 s limit of query_results holds for any query, including the single SQLite
function calls that never reach the progress handler (printf/format widths, instr, replace and trim over
megabyte strings). Each worst case ends within the limit, with a message, and the next query works."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.query import TIME_LIMIT_S, query_results
from autoresearch_mcp.server.query_worker import GRACE_S
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.store import Store


def repeated(char: str, times: int, tens: int) -> str:
    """SQL for `char` repeated times * 10**tens, built by nested replace() (no printf needed)."""
    sql = f"'{char * times}'"
    for _ in range(tens):
        sql = f"replace({sql}, '{char}', '{char * 10}')"
    return sql


BIG = repeated("a", 4, 6)  # 4 MB of 'a', within SQLITE_LIMIT_LENGTH
WORST_CASES = {
    "printf precision": "SELECT length(printf('%.2000000000c', 'x'))",
    "printf precision with the ! flag": "SELECT length(printf('%!.2000000000c', 'x'))",
    "format width from an argument": "SELECT length(format('%*.*c', 2000000000, 2000000000, 'x'))",
    "instr of a near-match": f"SELECT instr({BIG}, {repeated('a', 2, 5)} || 'b')",
    "replace of a near-match": f"SELECT length(replace({BIG}, {repeated('a', 1, 5)} || 'b', 'c'))",
    "trim with a long character set": f"SELECT length(trim({BIG}, {repeated('b', 1, 5)} || 'a'))",
    "like with many wildcards": f"SELECT {BIG} LIKE '%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%b'",
    "a sum over a huge cross join": "SELECT count(*) FROM v_runs a, v_runs b, v_runs c, v_runs d",
}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    store = Store(path)
    for i in range(40):
        store.create_run(
            task="toy-quadratic",
            budget=1,
            target=None,
            seed=i,
            name=f"r{i}",
            config={"metric": "score", "direction": "max", "options": {}},
            initial_source="x = 1\n",
        )
    return path


@pytest.mark.parametrize("name", list(WORST_CASES))
def test_the_time_limit_holds_for_a_worst_case_query(db: Path, name: str) -> None:
    started = time.monotonic()
    try:
        query_results(db, WORST_CASES[name], 5)
    except ResearchError as exc:
        message = str(exc)
        assert message.startswith("refused"), message
    elapsed = time.monotonic() - started
    # the worker answers within TIME_LIMIT_S or is killed GRACE_S later; 1 s of slack for a busy machine
    assert elapsed < TIME_LIMIT_S + GRACE_S + 1.0, f"{name} took {elapsed:.1f} s"
    assert query_results(db, "SELECT count(*) FROM v_runs", 5).rows == [[40]]  # and the next one works


def test_printf_widths_over_the_cap_are_refused_with_a_message_and_small_ones_work(db: Path) -> None:
    with pytest.raises(ResearchError, match="width or precision"):
        query_results(db, "SELECT printf('%.5000c', 'x')", 5)
    assert query_results(db, "SELECT printf('%.3f|%5d|%-4s|', 3.14159, 42, 'ab')", 5).rows == [
        ["3.142|   42|ab  |"]
    ]
    assert query_results(db, "SELECT format('%d%%', 7)", 5).rows == [["7%"]]


@pytest.mark.asyncio
async def test_through_the_tool_a_worst_case_query_is_refused_in_time_and_the_server_answers_the_next(
    settings,
):
    async with Client(build_server(Research(settings))) as client:
        await client.call_tool("start_run", {"task": "toy-quadratic", "budget": 1})
        for sql in (WORST_CASES["instr of a near-match"], WORST_CASES["printf precision"]):
            started = time.monotonic()
            result = await client.call_tool("query_results", {"sql": sql})
            assert result.is_error and "refused" in result.content[0].text
            assert time.monotonic() - started < TIME_LIMIT_S + GRACE_S + 1.0
        after = await client.call_tool("query_results", {"sql": "SELECT count(*) FROM v_runs"})
        assert not after.is_error and after.structured_content["rows"] == [[1]]


def test_the_query_worker_is_stopped_and_reaped_when_its_server_process_ends(db: Path) -> None:
    started = (
        "from pathlib import Path; from autoresearch_mcp.server.query import query_results; "
        f"print(query_results(Path({str(db)!r}), 'SELECT 1 AS one', 5).rows)"
    )
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", started], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "[[1]]"
    assert "ResourceWarning" not in done.stderr, done.stderr
