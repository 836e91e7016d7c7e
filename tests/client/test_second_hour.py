"""A user's own script, from the first crash to the best version back in their folder, through the real
CLI and real servers: what the tool prints is followed as printed, and every suggestion it makes runs.
A command runs in this process (main(), as the entry point calls it) unless a terminal or a signal is
part of what is tested: a subprocess would cost an import and prove nothing more; so does its server
(conftest.server_here) unless a spawned server's failure is the point."""

import json
import os
import pty
import re
import shlex
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
import tomlkit
from test_cli import one_line_error
from test_cli_mistakes import hears_ctrl_c, running_runs, said, stored
from test_folder_cmd import run_with_a_second_version

from autoresearch_mcp.client.connect import connect
from autoresearch_mcp.server.in_process import serve_here
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from conftest import ROOT
from folder_fixture import make_folder

# A script that waits while the folder holds `slow.flag`: something to interrupt, then quick to resume.
GATED = textwrap.dedent(
    """\
    import json, os, time
    params = json.loads(os.environ["AUTORESEARCH_PARAMS"])
    while os.path.exists("slow.flag"):
        time.sleep(0.2)
    print(f"loss: {(params['x'] - 0.3) ** 2 + (params['y'] + 0.2) ** 2:.6f}")
    """
)
MISSING_MODULE = "import json, os\nimport nonexistent_module_xyz\nprint('loss: 1.0')\n"


def run_here(capsys: pytest.CaptureFixture[str], *argv: str) -> subprocess.CompletedProcess:
    code, out, err = said(capsys, *argv)
    return subprocess.CompletedProcess(["autoresearch-mcp", *argv], code, out, err)


def printed_command(text: str, after: str) -> list[str]:
    """The command the tool printed after `after`, as argv (the program name dropped)."""
    line = next(line for line in text.splitlines() if after in line)
    words = shlex.split(line.split(after, 1)[1].split(" (needs", 1)[0])
    assert words[0] == "autoresearch-mcp", line
    return words[1:]


# -- 1. the printed resume command works for a task folder ---------------------------------------------
def test_the_command_printed_on_ctrl_c_resumes_a_run_on_a_task_folder_as_printed(
    tmp_path: Path, server_here: None, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path, "gated", script=GATED)
    (folder / "slow.flag").write_text("wait")
    db = tmp_path / "r.db"
    command = [sys.executable, "-m", "autoresearch_mcp.cli", "run", "--task", str(folder)]
    command += ["--llm", "scripted", "--budget", "2", "--db", str(db)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=hears_ctrl_c
    ) as agent:
        try:
            deadline = time.monotonic() + 120
            while not stored(db, "SELECT id FROM experiments WHERE status = 'running'"):
                assert agent.poll() is None and time.monotonic() < deadline, "experiment #1 never started"
                time.sleep(0.1)
            agent.send_signal(signal.SIGINT)
            _, stderr = agent.communicate(timeout=120)
        except BaseException:
            agent.kill()
            raise
    assert agent.returncode == 130, stderr
    [run_id] = running_runs(db)
    resume = printed_command(stderr, "resume it with: ")
    assert resume[resume.index("--task") + 1] == str(folder)

    (folder / "slow.flag").unlink()
    resumed = run_here(capsys, *resume)
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {run_id} exhausted: budget used (2/2)" in resumed.stdout
    assert running_runs(db) == []


def test_resuming_a_folder_run_without_its_folder_says_to_add_it_and_the_wrong_folder_is_refused(
    tmp_path: Path, server_here: None, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path, "bowl")
    other = make_folder(tmp_path, "other")
    db = tmp_path / "r.db"
    with Research(ServerSettings(db_path=db, task_dirs=[str(folder)])) as research:
        run, _ = research.runs.start_run("bowl", 2, None, 7, None)
    line = one_line_error(run_here(capsys, "run", "--run-id", run.id, "--llm", "scripted", "--db", str(db)))
    assert f"run {run.id} works on task 'bowl'" in line and "add --task PATH" in line
    line = one_line_error(
        run_here(
            capsys, "run", "--run-id", run.id, "--task", str(other), "--llm", "scripted", "--db", str(db)
        )
    )
    assert f"--task {other} is the folder of task 'other'" in line
    assert stored(db, "SELECT COUNT(*) FROM experiments") == [(0,)]


# -- 2. init's advice runs; the double is refused before any run is stored ----------------------------
def test_the_command_init_suggests_for_a_params_script_runs(
    tmp_path: Path, server_here: None, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text(
        "import json, os\n"
        'params = json.loads(os.environ["AUTORESEARCH_PARAMS"])\n'
        'lr = params.get("learning_rate", 0.1)\n'
        'print(f"val_loss: {(lr - 0.02) ** 2}")\n'
    )
    init = run_here(capsys, "init", str(tmp_path / "proj"))
    assert init.returncode == 0, init.stderr
    suggested = printed_command(init.stdout, "then: ")
    assert "--llm" in suggested and suggested[suggested.index("--llm") + 1] == "scripted"
    ran = run_here(capsys, *suggested, "--db", str(tmp_path / "r.db"))
    assert ran.returncode == 0, ran.stderr
    assert "exhausted: budget used (3/3)" in ran.stdout


def test_init_on_a_script_that_reads_no_params_suggests_a_model_and_the_double_starts_no_run(
    tmp_path: Path, server_here: None, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "train.py").write_text(
        "import argparse\n"
        "p = argparse.ArgumentParser()\n"
        'p.add_argument("--C", type=float, default=1.0)\n'
        'print(f"val_loss: {p.parse_args().C}")\n'
    )
    init = run_here(capsys, "init", str(tmp_path / "cli"))
    assert init.returncode == 0, init.stderr
    assert "does not read AUTORESEARCH_PARAMS" in init.stdout
    advice = next(line for line in init.stdout.splitlines() if line.startswith("then"))
    assert "--llm scripted" not in advice and "ANTHROPIC_API_KEY" in advice
    db = tmp_path / "r.db"
    line = one_line_error(
        run_here(capsys, "run", "--task", str(tmp_path / "cli"), "--llm", "scripted", "--db", str(db))
    )
    assert "no scripted steps for task 'cli'" in line and "--llm openai" in line
    assert stored(db, "SELECT id FROM runs") == []


def test_init_asks_for_the_other_choices_of_a_categorical_it_wrote_with_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "rf").mkdir()
    (tmp_path / "rf" / "train.py").write_text(
        "import json, os\n"
        'params = json.loads(os.environ["AUTORESEARCH_PARAMS"])\n'
        "print(f\"val_r2: {len(params.get('max_features', 'sqrt'))}\")\n"
    )
    init = run_here(capsys, "init", str(tmp_path / "rf"))
    assert (
        "params.max_features: the one choice 'sqrt' the script uses; add the others to choices" in init.stdout
    )
    assert "set its type and range" not in init.stdout


# -- 3. apply takes a params run's best back ----------------------------------------------------------
def a_params_run_with_a_best(tmp_path: Path, folder: Path) -> tuple[Path, dict]:
    db = tmp_path / "runs.db"
    with Research(ServerSettings(db_path=db, task_dirs=[str(folder)])) as research:
        run, _ = research.runs.start_run(folder.name, 3, None, 1, None)
        research.experiments.run_experiment(run.id, {"x": 0.25, "y": -0.5, "shape": "bowl"}, None)
        best = research.store.get_run(run.id).best
    assert best is not None
    return db, best.params


def test_apply_writes_a_params_runs_best_into_the_tomls_defaults_keeping_its_comments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path, "bowl")
    toml = folder / "autoresearch.toml"
    toml.write_text("# my own words\n" + toml.read_text())
    db, best = a_params_run_with_a_best(tmp_path, folder)
    applied = run_here(capsys, "apply", "latest", "--db", str(db), "--to", str(folder))
    assert applied.returncode == 0, applied.stderr
    assert f"wrote {toml}" in applied.stdout and "train.py" not in applied.stdout  # no code to write
    text = toml.read_text()
    assert text.startswith("# my own words\n")
    defaults = {name: table["default"] for name, table in tomlkit.parse(text)["params"].items()}
    assert defaults == best == {"x": 0.25, "y": -0.5, "shape": "bowl"}


def test_apply_writes_the_best_params_as_json_and_never_code_into_a_json_or_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path, "bowl")
    db, best = a_params_run_with_a_best(tmp_path, folder)
    out = tmp_path / "best.json"
    assert run_here(capsys, "apply", "latest", "--db", str(db), "--to", str(out)).returncode == 0
    assert json.loads(out.read_text()) == best
    line = one_line_error(
        run_here(capsys, "apply", "latest", "--db", str(db), "--to", str(tmp_path / "best.py"))
    )
    assert "result is params" in line and "FILE.json" in line

    outside = tmp_path / "outside.json"
    (tmp_path / "link.json").symlink_to(outside)
    line = one_line_error(
        run_here(capsys, "apply", "latest", "--db", str(db), "--to", str(tmp_path / "link.json"))
    )
    assert "is a symbolic link" in line and not outside.exists()

    code = make_folder(tmp_path / "code", extra='work = "code"\nprofile = false')
    source = (code / "train.py").read_text() + "\n# v2\n"
    code_db = run_with_a_second_version(tmp_path / "code", code, source)
    line = one_line_error(
        run_here(
            capsys,
            "apply",
            "latest",
            "--db",
            str(code_db),
            "--version",
            "2",
            "--to",
            str(tmp_path / "v2.json"),
        )
    )
    assert "a .json file takes params" in line and not (tmp_path / "v2.json").exists()


# -- 4. why an experiment failed, on the run line and whole in show; the exit status ------------------
def test_a_crash_says_why_on_its_run_line_whole_in_show_and_the_run_exits_non_zero(
    tmp_path: Path, server_here: None, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path, "broken", script=MISSING_MODULE)
    db = tmp_path / "r.db"
    ran = run_here(
        capsys, "run", "--task", str(folder), "--llm", "scripted", "--budget", "2", "--db", str(db)
    )
    assert ran.returncode == 1, ran.stderr
    crash = next(line for line in ran.stdout.splitlines() if line.startswith("#1 crash"))
    assert "ModuleNotFoundError: No module named 'nonexistent_module_xyz'" in crash
    assert "runs on the Python that autoresearch-mcp runs on" in crash and "`python`" in crash
    assert "no successful experiment" in ran.stdout

    shown = run_here(capsys, "show", "latest", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    why = shown.stdout.split("why they failed:", 1)[1]
    first = next(line for line in why.splitlines() if line.strip().startswith("#1 crash"))
    assert first.rstrip().endswith("your own environment's python)") and "…" not in first
    assert "Traceback (most recent call last)" in why  # the latest failure's whole error


# -- 5. the terminal view lists the experiments and wraps between words --------------------------------
def run_in_a_terminal(argv: list[str], columns: int) -> str:
    """The command on a pseudo-terminal `columns` wide: everything it drew, escape codes removed."""
    import fcntl
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm", "COLUMNS": str(columns), "LINES": "40"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoresearch_mcp.cli", *argv],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=240) == 0
    return b"".join(chunks).decode("utf-8", "replace")


ESCAPE = r"\x1b\[[0-9;?]*[A-Za-z]"


def test_on_a_terminal_each_experiment_keeps_its_line_and_no_id_is_broken_across_lines(tmp_path: Path):
    folder = make_folder(tmp_path, "bowl")
    db = tmp_path / "r.db"
    raw = run_in_a_terminal(
        ["run", "--task", str(folder), "--llm", "scripted", "--budget", "3", "--db", str(db)], columns=60
    )
    # Every piece drawn fits the width: the terminal itself never wraps a line (which it does mid-word).
    pieces = re.split(rf"{ESCAPE}|\r|\n", raw)
    assert max(len(piece) for piece in pieces) <= 60, max(pieces, key=len)
    drawn = re.sub(rf"{ESCAPE}|\r", "", raw)
    [(run_id,)] = stored(db, "SELECT id FROM runs")
    for iteration in (1, 2, 3):  # above the panel, which rich redraws below each line
        assert re.search(rf"#{iteration} ok loss=\d+\.\d{{4}} in ", drawn), drawn
    ids = re.findall(r"r-[0-9a-f]*", drawn)
    assert ids and set(ids) == {run_id}, drawn  # every id whole: none cut at the edge
    values = re.findall(r"loss=(\S*)", drawn)
    assert values and all(re.fullmatch(r"\d+\.\d{4}", value) for value in values), values
    best = next(line for line in drawn.splitlines() if line.startswith("best loss"))
    assert "..." not in best  # every param of the best, none left out


# -- 6. a bad autoresearch.toml is one line ---------------------------------------------------------
def test_a_bad_autoresearch_toml_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path, "bowl")
    toml = folder / "autoresearch.toml"
    toml.write_text(toml.read_text().replace('direction = "minimize"', 'direction = "minimise"'))
    line = one_line_error(
        run_here(capsys, "run", "--task", str(folder), "--llm", "scripted", "--db", str(tmp_path / "r.db"))
    )
    assert str(toml) in line and "task.direction" in line and "Connection closed" not in line


# -- 7. the docs agree on the host config -----------------------------------------------------------
def test_the_host_docs_give_the_readmes_claude_desktop_config_and_no_download():
    example = json.loads((ROOT / "examples" / "claude_desktop_config.json").read_text())
    hosts = (ROOT / "docs" / "hosts.md").read_text()
    block = hosts.split("## Claude Desktop", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    assert json.loads(block) == example
    readme = (ROOT / "README.md").read_text().split("## Connect Claude Desktop", 1)[1]
    assert json.loads(readme.split("```json", 1)[1].split("```", 1)[0]) == example
    assert "download Covertype once" not in hosts and "three absolute" not in hosts


# -- 9. the small things ------------------------------------------------------------------------------
def test_report_of_an_unknown_run_names_commands_not_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path, "bowl")
    db, _ = a_params_run_with_a_best(tmp_path, folder)
    line = one_line_error(run_here(capsys, "report", "r-nope", "--db", str(db)))
    assert "autoresearch-mcp runs" in line and "list_runs" not in line and "start_run" not in line


def test_a_db_in_a_directory_that_does_not_exist_is_one_line_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    db = tmp_path / "missing" / "dir" / "x.db"
    line = one_line_error(
        run_here(capsys, "run", "--task", "hpo-covertype", "--llm", "scripted", "--db", str(db))
    )
    assert f"no directory {db.parent}" in line
    assert not (tmp_path / "missing").exists()


def test_tasks_lists_a_folder_given_to_it_and_names_the_folders_of_stored_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path, "bowl")
    db, _ = a_params_run_with_a_best(tmp_path, folder)
    listed = run_here(capsys, "tasks", "--db", str(db), "--task-dir", str(folder))
    assert listed.returncode == 0 and re.search(r"^bowl\s+params\s+loss", listed.stdout, re.MULTILINE)
    bare = run_here(capsys, "tasks", "--db", str(db))
    assert "stored runs also worked on bowl" in bare.stdout and "--task-dir PATH" in bare.stdout


def test_the_final_lines_count_one_call_in_the_singular_and_their_commands_run(
    tmp_path: Path, server_here: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)  # report writes RUN_ID.html where it is run
    folder = make_folder(tmp_path, "bowl")
    db = tmp_path / "r.db"
    ran = run_here(
        capsys, "run", "--task", str(folder), "--llm", "scripted", "--budget", "2", "--db", str(db)
    )
    assert ran.returncode == 0, ran.stderr
    assert "2 experiments, 1 LLM call (" in ran.stdout  # #1 is the defaults, asked of no model
    for command in ("show", "report"):
        line = next(
            row for row in ran.stdout.splitlines() if row.strip().startswith(f"autoresearch-mcp {command}")
        )
        argv = shlex.split(line.split("#", 1)[0])[1:]
        done = run_here(capsys, *argv)
        assert done.returncode == 0, done.stderr
    assert list(tmp_path.glob("r-*.html"))


def test_query_results_declares_a_type_for_every_cell_of_its_rows(tmp_path: Path):
    async def output_schema() -> dict:
        async with connect(db=tmp_path / "r.db", here=serve_here) as rc:  # the schema, not the transport
            [tool] = [t for t in await rc.tools() if t.name == "query_results"]
            return tool.output_schema

    cells = anyio.run(output_schema)["properties"]["rows"]["items"]["items"]
    assert {branch["type"] for branch in cells["anyOf"]} == {"string", "integer", "number", "null"}


@pytest.mark.parametrize("backend", ["scripted", "scripted-sloppy"])
def test_every_llm_backend_is_documented(backend: str):
    assert f"| `{backend}` |" in (ROOT / "docs" / "cli.md").read_text()


def test_the_apply_command_show_suggests_for_a_code_run_writes_the_best_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    folder = make_folder(tmp_path / "src", extra='work = "code"\nprofile = false')
    improved = (folder / "train.py").read_text().replace("float(weight) *", "0.5 * float(weight) *")
    db = run_with_a_second_version(tmp_path, folder, improved)
    shown = run_here(capsys, "show", "latest", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    suggested = printed_command(shown.stdout, "write it back: ")
    target = tmp_path / "mine"
    target.mkdir()
    argv = [str(target) if word == "PATH" else word for word in suggested]
    applied = run_here(capsys, *argv, "--db", str(db))
    assert applied.returncode == 0, applied.stderr
    assert (target / "train.py").read_text() == improved
