"""A task folder from the command line: `run --task PATH` spawns a server that registers it, and what a run
of it stored is read back by `show`, `report` and `compare` as for any task."""

import json
import subprocess
import sys
from pathlib import Path

from autoresearch_mcp.cli import main
from folder_fixture import make_folder


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autoresearch_mcp.cli", *args], capture_output=True, text=True, timeout=240
    )


def test_run_with_a_folder_path_registers_it_and_the_run_is_read_back_by_name(tmp_path: Path, capsys):
    folder = make_folder(tmp_path / "anywhere")
    db = tmp_path / "runs.db"
    done = cli("run", "--task", str(folder), "--llm", "scripted", "--budget", "2", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "run r-" in done.stdout and "(bowl, stateful, scripted)" in done.stdout
    assert main(["show", "latest", "--db", str(db)]) == 0  # no folder registered: still readable
    shown = capsys.readouterr().out
    assert "lower loss is better" in shown and "2/2 used" in shown
    assert main(["report", "latest", "--db", str(db), "--out", str(tmp_path / "r.html")]) == 0
    assert "bowl" in (tmp_path / "r.html").read_text()


def test_compare_takes_a_folder_path_too(tmp_path: Path):
    folder = make_folder(tmp_path / "cmp")
    out = tmp_path / "results"
    args = ["compare", "--task", str(folder), "--llm", "scripted", "--iterations", "2", "--seeds", "1"]
    assert main([*args, "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["task"] == "bowl" and {r["mode"] for r in results["runs"]} == {
        "stateless",
        "stateless-strong",
        "stateful",
    }
    assert all(r["totals"]["experiments"] == 2 for r in results["runs"])


def test_a_missing_folder_and_a_folder_for_a_remote_server_are_one_line(tmp_path: Path):
    missing = cli("run", "--task", str(tmp_path / "nope"), "--llm", "scripted")
    assert missing.returncode == 2 and "no such folder" in missing.stderr and missing.stderr.count("\n") == 1
    folder = make_folder(tmp_path / "f")
    remote = cli("run", "--task", str(folder), "--llm", "scripted", "--server-url", "http://127.0.0.1:9/mcp")
    assert remote.returncode == 2 and f"serve --task-dir {folder}" in remote.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    bare = cli("run", "--task", str(empty), "--llm", "scripted")
    assert bare.returncode == 2 and "autoresearch-mcp init" in bare.stderr
