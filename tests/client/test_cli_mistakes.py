"""Every mistake a user can make on the command line is one line on stderr with the right exit status
(2; 130 for Ctrl-C), no traceback, and no run left `running` behind it (Ctrl-C leaves its run
resumable on purpose, and says how). Where a command spawns a stdio server, a real one is spawned, on
the toy task or the scripted double with budgets of one or two experiments. A mistake argparse answers,
and a command whose whole output Python prints, runs in this process: a subprocess would cost an
import and prove nothing more (a traceback would be raised here)."""

import json
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import cli_here, one_line_error

from autoresearch_mcp.cli import main
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store
from conftest import TESTS_DIR, unused_port

TOY = ("--task", "toy-quadratic", "--llm", "scripted")


@pytest.fixture
def toy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The spawned server also knows the test-only tasks (toy-quadratic, and slow-quadratic whose first
    experiment waits a minute: something to interrupt)."""
    monkeypatch.setenv("AUTORESEARCH_TASK_PLUGINS", "toy_task,slow_toy_task")
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))


def hears_ctrl_c() -> None:
    """For Popen's preexec_fn: Ctrl-C as a terminal delivers it. A test run started in the background
    (`cmd &` in a script) ignores SIGINT, and its children would inherit that and never hear it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stored(db: Path, sql: str) -> list[tuple]:
    """Rows of the database as it is on disk (nothing when there is none: looking creates nothing)."""
    if not db.exists():
        return []
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:  # a server that is creating the file has no tables yet
        if "no such table" not in str(exc):
            raise
        return []
    finally:
        conn.close()


def running_runs(db: Path) -> list[str]:
    return [row[0] for row in stored(db, "SELECT id FROM runs WHERE status = 'running'")]


def said(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The command run in this process: its exit status, stdout and stderr."""
    try:
        code = main(list(argv))
    except SystemExit as leaving:  # argparse's way out
        code = int(leaving.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The error as the user sees it; fails unless it is exactly one line with exit status 2."""
    code, _, err = said(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    return lines[0]


def a_running_run(db: Path, budget: int = 2) -> str:
    with Research(ServerSettings(db_path=db)) as research:
        run, _ = research.runs.start_run("toy-quadratic", budget, None, 7, "started elsewhere")
    return run.id


# -- flags checked before anything starts ------------------------------------------------------------
@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        (
            "--max-failures",
            "0",
            "argument --max-failures: expected a whole number of calls in a row, 1 or more",
        ),
        ("--max-tokens", "0", "argument --max-tokens: expected a whole number of tokens, 1 or more, not '0'"),
        ("--llm-timeout", "-1", "argument --llm-timeout: expected a number of seconds above 0, not '-1'"),
        ("--llm-timeout", "nan", "argument --llm-timeout: expected a number of seconds above 0, not 'nan'"),
        ("--window", "abc", "argument --window: expected 'auto' or a whole number of messages, 0 or more"),
        ("--seed", "-1", "argument --seed: expected a whole number from 0 to 2147483647, not '-1'"),
    ],
)
def test_a_bad_number_for_run_is_one_line_naming_the_flag_before_any_run_is_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, says: str
):
    db = tmp_path / "r.db"
    line = one_line(capsys, "run", *TOY, "--budget", "1", flag, value, "--db", str(db))
    assert says in line and "_arg" not in line  # the flag and what it takes, never a function's name
    assert not db.exists() and running_runs(db) == []


def test_compare_with_seeds_4x2_is_one_line_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "out"
    line = one_line(capsys, "compare", *TOY, "--seeds", "4x2", "--out", str(out))
    assert "argument --seeds: expected comma-separated whole numbers" in line and "'4x2'" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["run", "--budgett", "5"], "unrecognized arguments: --budgett 5 (did you mean --budget?)"),
        (["rnu"], "invalid choice: 'rnu'"),
        (["run", "--llm", "antropic"], "(did you mean anthropic?)"),
        (["runs", "--limt", "3"], "(did you mean --limit?)"),
    ],
)
def test_a_misspelt_flag_command_or_choice_is_one_line_with_the_closest_right_one(
    capsys: pytest.CaptureFixture[str], argv: list[str], hint: str
):
    line = one_line(capsys, *argv)
    assert hint in line and "did you mean" in line


def test_serve_with_a_setting_out_of_range_is_one_line_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    line = one_line(capsys, "serve", "--hpo-threads", "0", "--db", str(tmp_path / "r.db"))
    assert line == "autoresearch-mcp: --hpo-threads: Input should be greater than or equal to 1, not 0"


# -- Ctrl-C --------------------------------------------------------------------------------------------
def test_ctrl_c_marks_the_experiment_interrupted_uncharged_and_prints_the_command_that_resumes(
    tmp_path: Path, toy_env: None, capsys: pytest.CaptureFixture[str]
):
    db = tmp_path / "r.db"
    command = [sys.executable, "-m", "autoresearch_mcp.cli", "run", "--task", "slow-quadratic"]
    command += ["--llm", "scripted", "--budget", "2", "--db", str(db)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=hears_ctrl_c
    ) as agent:
        try:
            deadline = time.monotonic() + 120
            while not stored(db, "SELECT id FROM experiments WHERE status = 'running'"):
                assert agent.poll() is None and time.monotonic() < deadline, "experiment #1 never started"
                time.sleep(0.1)
            agent.send_signal(signal.SIGINT)  # what Ctrl-C sends (the server is in a session of its own)
            _, stderr = agent.communicate(timeout=120)
        except BaseException:
            agent.kill()  # the `with` then reaps it and closes its pipes
            raise
    [run_id] = [row[0] for row in stored(db, "SELECT id FROM runs")]
    lines = stderr.strip().splitlines()
    assert agent.returncode == 130 and len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith(
        "autoresearch-mcp: interrupted: experiment #1 was cut short and marked interrupted, not charged"
        f" (0/2 used); run {run_id} stays running, resume it with: "
    )
    assert stored(db, "SELECT iteration, status FROM experiments") == [(1, "interrupted")]
    assert running_runs(db) == [run_id]  # left resumable, on purpose

    resume = lines[0].split("resume it with: ", 1)[1]
    assert resume == f"autoresearch-mcp run --run-id {run_id} --db {db} --llm scripted"
    code, out, err = said(capsys, *resume.split()[1:])  # in this process: the signal was the subprocess's
    assert code == 0, err
    assert f"run {run_id} exhausted: budget used (2/2)" in out  # the interrupted one was free
    assert stored(db, "SELECT iteration, status FROM experiments ORDER BY iteration") == [
        (1, "interrupted"),
        (2, "ok"),
        (3, "ok"),
    ]
    assert running_runs(db) == []


# -- the backends and the server -------------------------------------------------------------------------
def test_an_anthropic_api_that_cannot_be_reached_is_one_line_and_stores_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    db = tmp_path / "r.db"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    with unused_port() as port:
        url = f"http://127.0.0.1:{port}"
        line = one_line_error(cli_here(capfd, "run", "--base-url", url, "--db", str(db)))
    assert (
        line.startswith(f"autoresearch-mcp: cannot reach the Anthropic API at {url}")
        and "--llm scripted" in line
    )
    assert not db.exists() and running_runs(db) == []


def test_missing_data_is_one_line_for_the_operator_with_the_flag_and_no_run(
    tmp_path: Path, server_here: None, capfd: pytest.CaptureFixture[str]
):
    db, missing = tmp_path / "r.db", tmp_path / "nowhere.csv"
    run = ("run", "--llm", "scripted", "--budget", "1", "--data", str(missing), "--db", str(db))
    line = one_line_error(cli_here(capfd, *run))
    assert line.startswith("autoresearch-mcp: start_run refused: Covertype data is unavailable")
    assert "no file 'nowhere.csv'" in line and "--data PATH" in line and str(missing) in line
    assert stored(db, "SELECT id FROM runs") == []


def test_the_dashboard_on_a_busy_port_is_one_line_before_it_prints_an_address(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
):
    db = tmp_path / "r.db"
    Store(db).close()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_line_error(cli_here(capfd, "dashboard", "--db", str(db), "--port", str(port)))
    assert (
        line
        == f"autoresearch-mcp: port {port} on 127.0.0.1 is in use (another dashboard?): pick another with --port N"
    )


def test_runs_and_show_print_nothing_of_the_servers_start_up_chores(
    tmp_path: Path, toy_env: None, capfd: pytest.CaptureFixture[str]
):
    db = tmp_path / "r.db"
    run_id = a_running_run(db)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    for x, command in enumerate(("runs", "show")):
        with Research(ServerSettings(db_path=db)) as research:  # an experiment a dead server left running
            exp = research.store.reserve_experiment(run_id, {"x": float(x), "y": 0.0, "sleep": 0.0}, 1, None)
            research.store.db.reader().execute(
                "UPDATE experiments SET owner_pid = ? WHERE id = ?", (int(dead.stdout), exp.id)
            )
        code, out, err = said(capfd, command, "--db", str(db))  # capfd: the spawned server's stderr too
        assert code == 0 and run_id in out
        assert err == ""  # the server marked the orphan interrupted, and kept its warning to itself
        assert stored(db, f"SELECT status FROM experiments WHERE id = {exp.id}") == [("interrupted",)]


# -- what a run says about itself --------------------------------------------------------------------------
def test_every_output_of_a_named_scripted_run_says_it_came_from_the_test_double(
    tmp_path: Path, toy_env: None, server_here: None, capsys: pytest.CaptureFixture[str]
):
    db = tmp_path / "r.db"
    code, out, _ = said(capsys, "run", *TOY, "--budget", "1", "--name", "paper run", "--db", str(db))
    assert code == 0 and "scripted backend: a deterministic test double" in out
    assert json.loads(stored(db, "SELECT config_json FROM runs")[0][0])["llm"] == "scripted"

    def read(*argv: str) -> tuple[str, str]:
        code, out, err = said(capsys, *argv, "--db", str(db))
        assert code == 0, err
        return out, err

    (runs, _), (show, _) = read("runs"), read("show", "latest")
    (csv_text, note), (json_text, _) = read("export", "latest"), read("export", "latest", "--format", "json")
    assert "scripted" in runs and "paper run" in runs and "no language model" in runs
    assert "proposed by scripted: a deterministic test double" in show
    assert csv_text.splitlines()[1].split(",")[1] == "scripted" and "no language model" in note
    document = json.loads(json_text)
    assert document["run"]["llm"] == "scripted" and "no language model" in document["note"]
    report = tmp_path / "report.html"
    assert said(capsys, "report", "--db", str(db), "--out", str(report))[0] == 0
    assert "Scripted backend:" in report.read_text()
    assert running_runs(db) == []


@pytest.mark.slow  # compare's own output: test_compare's three modes at once
def test_compare_ends_by_saying_where_it_wrote_its_results(
    tmp_path: Path, toy_env: None, server_here: None, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "out"
    args = ("--budget", "1", "--seeds", "1", "--modes", "stateful", "--out", str(out))
    code, printed, _ = said(capsys, "compare", *TOY, *args)
    assert code == 0 and printed.splitlines()[-1] == (
        f"written to {out}: results.json, table.md, figure.png, transcripts/ (gzipped JSONL);"
        f" the runs in {out / 'runs.db'}"
    )
    assert running_runs(out / "runs.db") == []


# -- stop, rename, tag, delete -------------------------------------------------------------------------
def test_stop_ends_a_running_run_through_finish_run_with_the_reason_given(
    tmp_path: Path, toy_env: None, capsys: pytest.CaptureFixture[str]
):
    db = tmp_path / "r.db"
    run_id = a_running_run(db)
    code, out, _ = said(capsys, "stop", run_id, "--reason", "good enough", "--db", str(db))
    assert code == 0 and out.strip() == f"run {run_id} stopped: good enough (0/2 used)"
    assert stored(db, "SELECT status, finish_reason FROM runs") == [("stopped", "good enough")]
    assert "no run r-0000000000" in one_line(capsys, "finish", "r-0000000000", "--db", str(db))


def test_rename_and_tag_change_what_runs_shows(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    db = tmp_path / "r.db"
    run_id = a_running_run(db)
    assert said(capsys, "rename", run_id, "depth sweep", "--db", str(db))[0] == 0
    assert said(capsys, "tag", run_id, "baseline", "paper", "--db", str(db))[0] == 0
    code, out, _ = said(capsys, "tag", run_id, "paper", "--remove", "--db", str(db))
    assert code == 0 and out.strip() == f"run {run_id} tags: baseline"
    assert stored(db, "SELECT name, tags_json FROM runs") == [("depth sweep", '["baseline"]')]
    assert "a tag is one word" in one_line(capsys, "tag", run_id, "two words", "--db", str(db))


def test_delete_asks_for_yes_refuses_a_running_run_and_removes_everything_recorded_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    db = tmp_path / "r.db"
    with Research(ServerSettings(db_path=db)) as research:
        finished, _ = research.runs.start_run("toy-quadratic", 2, None, 7, None)
        research.runs.add_note(finished.id, "x near 0.3", "strategy")
        research.experiments.run_experiment(finished.id, {"x": 0.3}, None)
        with pytest.raises(ResearchError):  # a refusal: an event recorded under the run
            research.experiments.run_experiment(finished.id, {"x": 0.3}, None)
        research.experiments.run_experiment(finished.id, {"x": 1.0}, None)
    running = a_running_run(db)

    line = one_line(capsys, "delete", finished.id, "--db", str(db))
    assert (
        f"delete removes run {finished.id} (toy-quadratic, exhausted, 2/2 used)" in line and "--yes" in line
    )
    line = one_line(capsys, "delete", running, "--yes", "--db", str(db))
    assert (
        f"run {running} is running: stop it first (`autoresearch-mcp stop {running}`), or add --force" in line
    )

    code, out, _ = said(capsys, "delete", finished.id, "--yes", "--db", str(db))
    assert code == 0 and out.strip() == (
        f"deleted run {finished.id} (toy-quadratic, exhausted): 2 experiments, 1 train.py versions,"
        " 1 notes, 1 events"
    )
    assert said(capsys, "delete", running, "--yes", "--force", "--db", str(db))[0] == 0
    for table in ("runs", "experiments", "artifacts", "notes", "events", "jobs"):
        assert stored(db, f"SELECT COUNT(*) FROM {table}") == [(0,)], table


def test_the_new_commands_are_listed_in_the_help(capsys: pytest.CaptureFixture[str]):
    code, listed, _ = said(capsys, "--help")
    assert code == 0 and all(command in listed for command in ("stop", "rename", "tag", "delete"))
