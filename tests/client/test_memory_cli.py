"""`run --from-run` and `compare --from-run` as a user meets them: the command (in this process, as
test_cli.cli_here runs it), a real server on a real SQLite file (served in this process for each
command: conftest.server_here; a stdio server spawned per command costs about two CPU seconds), the
scripted double on the test-only toy task."""

import gzip
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from test_cli import cli_here

from autoresearch_mcp.cli import main
from autoresearch_mcp.contract.transcript import load_transcript
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings


def one_line_error(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.fixture
def server(tmp_path: Path, agent_server_env: None, server_here: None) -> tuple[str, str]:
    """The flags that reach the test's database, tmp_path / "r.db", served in this process."""
    return ("--db", str(tmp_path / "r.db"))


def toy_run(capfd: pytest.CaptureFixture[str], server: tuple[str, str], *extra: str) -> str:
    result = cli_here(capfd, "run", "--task", "toy-quadratic", "--llm", "scripted", *server, *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow  # from_run through the CLI: the server's side is test_memory's
def test_run_from_run_latest_continues_the_previous_run_through_the_cli(
    tmp_path: Path, server: tuple[str, str], capfd: pytest.CaptureFixture[str]
):
    db = tmp_path / "r.db"
    toy_run(capfd, server, "--budget", "3", "--seed", "1")
    conn = sqlite3.connect(db)
    earlier = conn.execute("SELECT id FROM runs").fetchone()[0]
    conn.close()
    with Research(ServerSettings(db_path=db)) as research:
        research.runs.add_note(earlier, "y below zero helps", "strategy")
        research.runs.add_note(earlier, "x=9 crashes", "failed")
        best = research.store.get_run(earlier).best
    assert best is not None

    transcript = tmp_path / "later.jsonl"
    out = toy_run(
        capfd, server, "--budget", "3", "--seed", "2", "--from-run", "latest", "--transcript", str(transcript)
    )
    conn = sqlite3.connect(db)
    later, from_run = conn.execute("SELECT id, from_run FROM runs WHERE id != ?", (earlier,)).fetchone()
    rows = conn.execute(
        "SELECT iteration, params_json, note FROM experiments WHERE run_id = ? ORDER BY iteration", (later,)
    ).fetchall()
    conn.close()
    assert from_run == earlier
    first = out.splitlines()[0]
    assert first.startswith(
        f"run {later} (toy-quadratic, stateful, scripted): 1/3 used, started from {earlier}"
    )
    assert "its best re-measured as #1: score=" in first
    assert [row[0] for row in rows] == [1, 2, 3]  # the re-measure used one unit; the agent the rest
    assert (
        json.loads(rows[0][1]) == best.params
        and rows[0][2] == f"re-measure of {earlier}#{best.iteration} best"
    )
    # The model saw the earlier run from its first turn on.
    turn = load_transcript(transcript)[0]["request"]["messages"][0]["text"]
    assert f"From {earlier}" in turn and "Earlier strategy: y below zero helps" in turn
    assert "Earlier failed: x=9 crashes" in turn

    show = cli_here(capfd, "show", later, *server)
    assert show.returncode == 0 and f"started from run {earlier}" in show.stdout
    runs = cli_here(capfd, "runs", *server)
    header, *lines = runs.stdout.splitlines()
    assert "from" in header.split()
    assert any(line.startswith(later) and earlier in line for line in lines)


@pytest.mark.slow  # from_run through the CLI: the server's side is test_memory's
def test_the_stateless_baseline_started_from_a_run_has_its_re_measure_in_its_history(
    tmp_path: Path, server: tuple[str, str], capfd: pytest.CaptureFixture[str]
):
    toy_run(capfd, server, "--budget", "2")
    transcript = tmp_path / "stateless.jsonl"
    toy_run(
        capfd,
        server,
        "--budget",
        "2",
        "--mode",
        "stateless",
        "--from-run",
        "latest",
        "--transcript",
        str(transcript),
    )
    message = load_transcript(transcript)[0]["request"]["messages"][0]["text"]
    assert "Iter 1: score=" in message and "Best so far: Iter 1 with score=" in message


def test_from_run_with_run_id_or_an_unknown_run_is_one_line(
    tmp_path: Path, server: tuple[str, str], capfd: pytest.CaptureFixture[str]
):
    db = str(tmp_path / "r.db")
    both = ("run", "--run-id", "r-0000000000", "--from-run", "latest", "--llm", "scripted", *server)
    assert "give one of them" in one_line_error(cli_here(capfd, *both))
    toy = ("run", "--task", "toy-quadratic", "--llm", "scripted", *server, "--from-run")
    assert "unknown run 'r-0000000000'" in one_line_error(cli_here(capfd, *toy, "r-0000000000"))
    none = cli_here(capfd, *toy, "latest")
    assert "no earlier toy-quadratic run" in one_line_error(none)
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


@pytest.mark.slow  # `run --from-run` is in the default suite; this is compare's three runs of it
def test_compare_from_run_latest_starts_every_run_from_the_same_earlier_run(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    out = tmp_path / "out"
    base = ["compare", "--task", "toy-quadratic", "--llm", "scripted", "--budget", "2", "--seeds", "1"]
    assert main([*base, "--modes", "stateful", "--out", str(out)]) == 0
    earlier = json.loads((out / "results.json").read_text())["runs"][0]["run_id"]

    modes = ["--modes", "stateless,stateful"]
    assert main([*base, "--seeds", "1,2", "--from-run", "latest", *modes, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["from_run"] == earlier
    assert [r["from_run"] for r in results["runs"]] == [earlier] * 4  # two modes, two seeds
    assert all(r["totals"]["experiments"] == 2 for r in results["runs"])
    assert f"Every run started from {earlier}" in (out / "table.md").read_text()
    # seed 1's stateful transcript is this compare's run alone, not the earlier one's beside it
    lines = gzip.decompress((out / "transcripts" / "stateful-1.jsonl.gz").read_bytes()).splitlines()
    assert {json.loads(line)["run_id"] for line in lines} == {results["runs"][1]["run_id"]}
