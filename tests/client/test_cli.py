"""The command line as a user meets it: each mistake is one line on stderr and exit status 2, `--help`
says what every option does and what it defaults to, and the stored runs can be looked at and exported.

A command runs main() in this process, as the entry point does, and what is asserted is everything the
user would see: a mistake caught before anything starts is all that a subprocess would run, and a command
whose point is what the server answers, not how it was reached, has its server in this process too
(conftest.server_here). The installed entry point, spawning its own server, runs as a subprocess where
that is the point."""

import argparse
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from autoresearch_mcp.cli import build_parser, main
from conftest import unused_port
from http_servers import http_server


def cli_here(capture: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess:
    """The same command in this process (the client's imports, about two CPU seconds, saved per call):
    main's exit status and what it printed. With `capfd`, what the server it spawns writes to the same
    stdout and stderr is in it too, as a subprocess's would be; `capsys` suits what is decided before
    any server or model starts."""
    capture.readouterr()  # only this command's output
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's errors and --help
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capture.readouterr()
    return subprocess.CompletedProcess(["autoresearch-mcp", *args], code, out, err)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The error as the user sees it; fails unless it is exactly one line with exit status 2."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


RUN = ("run", "--task", "toy-quadratic", "--llm", "scripted")


def test_an_unknown_task_is_one_line_naming_the_known_ones(tmp_path: Path, server_here: None, capfd):
    line = one_line_error(
        cli_here(capfd, "run", "--task", "nope", "--llm", "scripted", "--db", str(tmp_path / "r.db"))
    )
    assert "unknown task 'nope'" in line and "hpo-covertype" in line and "codeopt-records" in line


@pytest.mark.parametrize("budget", ["0", "-3", "many", "10001"])
def test_a_bad_budget_is_one_line_before_anything_starts(tmp_path: Path, budget: str, capsys):
    line = one_line_error(
        cli_here(capsys, "run", "--llm", "scripted", "--budget", budget, "--db", str(tmp_path / "r.db"))
    )
    assert "budget" in line and "1 to 10000" in line
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize(
    ("command", "value"), [("run", "0"), ("run", "-5"), ("run", "1.5"), ("compare", "lots")]
)
def test_a_bad_token_budget_is_one_line_before_anything_starts(
    tmp_path: Path, command: str, value: str, capsys
):
    db, out = str(tmp_path / "r.db"), str(tmp_path / "out")
    where = ["--db", db] if command == "run" else ["--out", out]
    line = one_line_error(cli_here(capsys, command, "--llm", "scripted", "--token-budget", value, *where))
    assert f"--token-budget: the token budget is a whole number of tokens, 1 or more, not '{value}'" in line
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "out").exists()


def test_a_refused_start_run_is_one_line(tmp_path: Path, agent_server_env: None, server_here: None, capfd):
    # A name past start_run's 100 characters passes argparse but not the tool's schema.
    db = str(tmp_path / "r.db")
    result = cli_here(capfd, *RUN, "--name", "n" * 150, "--db", db)
    line = one_line_error(result)
    assert line.startswith("autoresearch-mcp: start_run refused: name:") and "100 characters" in line


@pytest.mark.parametrize("target", ["nan", "inf", "high"])
def test_a_target_that_is_not_a_finite_number_is_one_line(target: str, capsys):
    line = one_line_error(cli_here(capsys, "run", "--llm", "scripted", "--target", target))
    assert "--target" in line and "finite number" in line


def test_the_default_anthropic_backend_without_a_key_is_one_line_with_the_alternatives(
    tmp_path: Path, capsys, monkeypatch
):
    for name in [k for k in os.environ if k.startswith("ANTHROPIC_")]:
        monkeypatch.delenv(name)
    line = one_line_error(cli_here(capsys, "run", "--db", str(tmp_path / "r.db")))
    assert "paid Anthropic API" in line and "ANTHROPIC_API_KEY" in line and "--llm scripted" in line
    assert "--api-key" not in line  # no such flag
    assert not (tmp_path / "r.db").exists()


def test_the_openai_backend_without_endpoint_or_key_is_one_line(tmp_path: Path, capsys, monkeypatch):
    for name in [k for k in os.environ if k.startswith("OPENAI_")]:
        monkeypatch.delenv(name)
    line = one_line_error(cli_here(capsys, "run", "--llm", "openai", "--db", str(tmp_path / "r.db")))
    assert "--base-url" in line and "OPENAI_API_KEY" in line
    assert not (tmp_path / "r.db").exists()


def test_an_openai_endpoint_that_is_not_there_is_one_line_and_no_run(tmp_path: Path, capfd):
    with unused_port() as port:
        url = f"http://127.0.0.1:{port}/v1"
        db = str(tmp_path / "r.db")
        line = one_line_error(cli_here(capfd, "run", "--llm", "openai", "--base-url", url, "--db", db))
        assert "cannot reach" in line and "127.0.0.1" in line and "--base-url" in line
        assert not (tmp_path / "r.db").exists()
        # compare too: one line, and no "coroutine was never awaited" after it for the modes not reached
        out = str(tmp_path / "out")
        compare = ("compare", "--llm", "openai", "--base-url", url, "--seeds", "1", "--out", out)
        line = one_line_error(cli_here(capfd, *compare))
    assert "cannot reach" in line


def test_an_unknown_flag_is_one_line(capsys):
    line = one_line_error(cli_here(capsys, "run", "--no-such-flag", "3"))
    assert "unrecognized arguments" in line and "--help" in line


def test_show_and_export_without_a_database_are_one_line(tmp_path: Path, capsys):
    for command in ("show", "export"):
        line = one_line_error(cli_here(capsys, command, "--db", str(tmp_path / "none.db")))
        assert "no database at" in line
    assert not (tmp_path / "none.db").exists()  # looking does not create it


def test_resuming_an_unknown_or_finished_run_is_one_line(
    tmp_path: Path, agent_server_env: None, server_here: None, capfd
):
    db = ("--db", str(tmp_path / "r.db"))
    resume = ("run", "--llm", "scripted", *db, "--run-id")
    line = one_line_error(cli_here(capfd, *resume, "r-0000000000"))
    assert "no run r-0000000000" in line
    done = cli_here(capfd, *RUN, "--budget", "1", *db)
    assert done.returncode == 0, done.stderr
    run_id = sqlite3.connect(tmp_path / "r.db").execute("SELECT id FROM runs").fetchone()[0]
    line = one_line_error(cli_here(capfd, *resume, run_id))
    assert f"run {run_id} is exhausted" in line


def walk(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def test_every_command_has_a_description_an_example_and_help_for_every_option():
    parser = build_parser()
    for name, sub in walk(parser):
        assert sub.description, name
        assert sub.epilog and "autoresearch-mcp" in sub.epilog, name
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"


def test_run_help_says_the_default_backend_is_the_paid_api_and_shows_defaults(capsys):
    text = " ".join(cli_here(capsys, "run", "--help").stdout.split())
    assert "paid Anthropic API" in text and "(default: 15)" in text and "--budget N, --iterations N" in text
    assert "example:" in text


def test_budget_and_iterations_are_the_same_flag():
    parser = build_parser()
    assert parser.parse_args(["run", "--budget", "7"]).iterations == 7
    assert parser.parse_args(["run", "--iterations", "7"]).iterations == 7
    assert parser.parse_args(["compare", "--budget", "7", "--out", "results"]).iterations == 7


def test_a_run_off_a_terminal_prints_plain_lines_and_where_to_look(
    tmp_path: Path, agent_server_env: None, server_here: None, capsys: pytest.CaptureFixture[str]
):
    # In this process, its stdout a capture, not a terminal (the installed entry point and the server it
    # spawns: the last test here, and test_second_hour's Ctrl-C and terminal).
    db = tmp_path / "r.db"
    result = cli_here(
        capsys, "run", "--task", "toy-quadratic", "--llm", "scripted", "--budget", "3", "--db", str(db)
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    run_id = sqlite3.connect(db).execute("SELECT id FROM runs").fetchone()[0]
    assert lines[0].startswith(f"run {run_id} (toy-quadratic, stateful, scripted)")
    assert [line.split()[0] for line in lines[1:4]] == ["#1", "#2", "#3"]
    assert "\x1b[" not in result.stdout  # no terminal control sequences
    assert f"stateful run {run_id} exhausted: budget used (3/3)" in result.stdout  # the database's word
    assert f"autoresearch-mcp show {run_id} --db {db}" in result.stdout
    assert f"autoresearch-mcp report {run_id} --db {db}" in result.stdout
    assert f"autoresearch-mcp dashboard --db {db}" in result.stdout
    assert all(len(line) < 300 for line in lines)


def test_runs_show_export_and_tasks_read_what_a_run_stored(
    tmp_path: Path, agent_server_env: None, covtype_csv: Path, capsys: pytest.CaptureFixture[str]
):
    # One HTTP server on the test's database for all six commands: each spawns a stdio server on --db
    # otherwise (about two CPU seconds each; test_cli_mistakes reads through a spawned one).
    db = tmp_path / "r.db"
    with http_server(db, covtype_csv, tmp_path / "data") as port:
        server = ("--server-url", f"http://127.0.0.1:{port}/mcp")
        assert cli_here(capsys, *RUN, "--budget", "2", *server).returncode == 0
        run_id, name = sqlite3.connect(db).execute("SELECT id, name FROM runs").fetchone()
        assert name.startswith("toy-quadratic stateful scripted 20")  # task, mode, backend, start time

        def read(*args: str) -> str:  # the reading commands in-process: each subprocess costs an import
            assert main([*args, *server]) == 0
            return capsys.readouterr().out

        runs, show = read("runs"), read("show", "latest")
        csv_out = read("export", run_id, "--format", "csv")
        out = tmp_path / "exp.json"
        read("export", "--format", "json", "--out", str(out))
        tasks = read("tasks")

    assert run_id in runs and "exhausted" in runs and "2/2" in runs
    assert f"run {run_id}" in show and "higher is better" in show and "Best score=" in show
    rows = list(csv.DictReader(io.StringIO(csv_out)))
    assert [row["iteration"] for row in rows] == ["1", "2"] and "params.x" in rows[0]
    data = json.loads(out.read_text())
    assert data["run"]["id"] == run_id and [e["iteration"] for e in data["experiments"]] == [1, 2]
    assert "toy-quadratic" in tasks and "hpo-covertype" in tasks


def test_db_path_prints_the_database_the_commands_use(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_DB", str(tmp_path / "x.db"))
    assert cli_here(capsys, "db-path").stdout.strip() == str(tmp_path / "x.db")
    assert cli_here(capsys, "db-path", "--db", str(tmp_path / "y.db")).stdout.strip() == str(
        tmp_path / "y.db"
    )


def test_runs_on_a_database_that_does_not_exist_says_so_without_creating_it(tmp_path: Path, capsys):
    result = cli_here(capsys, "runs", "--db", str(tmp_path / "none.db"))
    assert result.returncode == 0 and "no runs" in result.stdout
    assert not (tmp_path / "none.db").exists()


def test_the_commands_that_look_at_a_local_database_serve_it_in_their_own_process(
    tmp_path: Path, agent_server_env: None, capsys: pytest.CaptureFixture[str], monkeypatch
):
    from autoresearch_mcp.client import connect as connect_module
    from autoresearch_mcp.server.research import Research
    from autoresearch_mcp.server.settings import ServerSettings

    db = tmp_path / "r.db"
    with Research(ServerSettings(db_path=db)) as research:
        run, _ = research.runs.start_run("toy-quadratic", 2, None, 7, "looked at")
        research.experiments.run_experiment(run.id, {"x": 0.5, "y": 0.0}, None)

    def spawned(*args: object, **kwargs: object) -> None:
        raise AssertionError("a command that only looks spawned a server")

    monkeypatch.setattr(connect_module, "stdio_client", spawned)
    looks = (["runs"], ["show"], ["tasks"], ["export", run.id], ["stop", run.id])
    outputs = [cli_here(capsys, *argv, "--db", str(db)) for argv in looks]
    for result in outputs:
        assert result.returncode == 0 and result.stderr == "", result
    (runs, show, tasks, exported, _) = (result.stdout for result in outputs)
    assert "looked at" in runs and f"run {run.id}" in show and "toy-quadratic" in tasks
    assert "params.x" in exported
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchone() == ("stopped",)


def test_a_log_level_that_is_no_level_is_one_line_naming_the_variable(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("AUTORESEARCH_LOG_LEVEL", "loud")
    line = one_line_error(cli_here(capsys, "runs", "--db", str(tmp_path / "none.db")))
    assert "$AUTORESEARCH_LOG_LEVEL" in line and "'loud'" in line


def test_run_id_resumes_a_running_run_with_its_own_task_and_budget(
    tmp_path: Path, agent_server_env: None, server_here: None, capfd
):
    from autoresearch_mcp.server.research import Research
    from autoresearch_mcp.server.settings import ServerSettings

    db = tmp_path / "r.db"
    with Research(ServerSettings(db_path=db)) as research:
        run, _ = research.runs.start_run("toy-quadratic", 2, None, 7, "started elsewhere")
    result = cli_here(capfd, "run", "--run-id", run.id, "--llm", "scripted", "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert f"run {run.id} exhausted: budget used (2/2)" in result.stdout
    rows = sqlite3.connect(db).execute("SELECT COUNT(*), MIN(run_id) FROM experiments").fetchone()
    assert rows == (2, run.id)


def test_reeval_seeds_is_a_run_and_compare_flag_passed_to_start_run(
    tmp_path: Path, agent_server_env: None, server_here: None, capfd
):
    parser = build_parser()
    assert parser.parse_args(["run"]).reeval_seeds == 0
    assert parser.parse_args(["compare", "--reeval-seeds", "2", "--out", "results"]).reeval_seeds == 2
    assert "--reeval-seeds is a whole number from 0 to 10" in one_line_error(
        cli_here(capfd, "run", "--reeval-seeds", "11")
    )
    db = tmp_path / "r.db"
    result = cli_here(capfd, *RUN, "--budget", "3", "--reeval-seeds", "1", "--db", str(db))
    assert result.returncode == 0, result.stderr
    conn = sqlite3.connect(db)
    assert json.loads(conn.execute("SELECT config_json FROM runs").fetchone()[0])["reeval_seeds"] == 1
    notes = [row[0] for row in conn.execute("SELECT note FROM experiments ORDER BY iteration")]
    assert notes[1] == "re-evaluation 1/1 of #1 (seed 43)" and len(notes) == 3


def test_a_run_from_a_folder_holding_an_autoresearch_mcp_folder_still_spawns_the_installed_server(
    tmp_path: Path, agent_server_env: None
):
    """As from a clone's root after `pip install .`: the clone's autoresearch_mcp/ has no server/ (the
    install maps it in), and a spawned `python -m autoresearch_mcp.server` found that folder first."""
    here = tmp_path / "clone"
    (here / "autoresearch_mcp").mkdir(parents=True)
    (here / "autoresearch_mcp" / "__init__.py").write_text("")
    flags = ["--llm", "scripted", "--budget", "1", "--db", str(tmp_path / "r.db"), "--quiet"]
    # the CLI itself runs as the installed entry point does (its own folder first, not the cwd)
    result = subprocess.run(
        [sys.executable, "-P", "-m", "autoresearch_mcp.cli", "run", "--task", "toy-quadratic", *flags],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=here,
    )
    assert result.returncode == 0, result.stderr
    assert "No module named" not in result.stderr
