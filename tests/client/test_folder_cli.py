"""A task folder from the command line: `run --task PATH` gives the server it starts the folder to register
(as `--task-dir PATH`; here that server runs in this process, conftest.server_here), and what a run of it
stored is read back by `show`, `report` and `compare` as for any task."""

import json
import re
from pathlib import Path

import pytest
from test_cli import cli_here

from autoresearch_mcp.cli import main
from autoresearch_mcp.contract.files import pack
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from folder_fixture import make_folder


def test_run_with_a_folder_path_registers_it_and_the_run_is_read_back_by_name(
    tmp_path: Path, server_here: None, capfd
):
    folder = make_folder(tmp_path / "anywhere")
    db = tmp_path / "runs.db"
    done = cli_here(
        capfd, "run", "--task", str(folder), "--llm", "scripted", "--budget", "2", "--db", str(db)
    )
    assert done.returncode == 0, done.stderr
    assert "run r-" in done.stdout and "(bowl, stateful, scripted)" in done.stdout
    shown = cli_here(capfd, "show", "latest", "--db", str(db))  # no folder registered: still readable
    assert shown.returncode == 0 and "lower loss is better" in shown.stdout and "2/2 used" in shown.stdout
    assert main(["report", "latest", "--db", str(db), "--out", str(tmp_path / "r.html")]) == 0
    assert "bowl" in (tmp_path / "r.html").read_text()


@pytest.mark.slow  # compare through another door: run takes the folder path in the default suite
def test_compare_takes_a_folder_path_too(tmp_path: Path, server_here: None):
    folder = make_folder(tmp_path / "cmp")
    out = tmp_path / "results"
    # One mode: the folder's registration is the point (compare's modes are test_compare.py's).
    args = ["compare", "--task", str(folder), "--llm", "scripted", "--iterations", "2", "--seeds", "1"]
    assert main([*args, "--modes", "stateful", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["task"] == "bowl" and [r["mode"] for r in results["runs"]] == ["stateful"]
    assert all(r["totals"]["experiments"] == 2 for r in results["runs"])


def test_a_missing_folder_and_a_folder_for_a_remote_server_are_one_line(tmp_path: Path, capfd):
    missing = cli_here(capfd, "run", "--task", str(tmp_path / "nope"), "--llm", "scripted")
    assert missing.returncode == 2 and "no such folder" in missing.stderr and missing.stderr.count("\n") == 1
    folder = make_folder(tmp_path / "f")
    remote_url = ("--server-url", "http://127.0.0.1:9/mcp")
    remote = cli_here(capfd, "run", "--task", str(folder), "--llm", "scripted", *remote_url)
    assert remote.returncode == 2 and f"serve --task-dir {folder}" in remote.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    bare = cli_here(capfd, "run", "--task", str(empty), "--llm", "scripted")
    assert bare.returncode == 2 and "autoresearch-mcp init" in bare.stderr


def code_run(tmp_path: Path, folder: Path, *versions: str) -> Path:
    """A run of a folder in code work through the real service: the original benchmarked, then each text
    stored as the next version (as modify_train_py stores the agent's) and benchmarked. The scripted
    backend has no edits to make to a user's own script, so the versions are given here."""
    db = tmp_path / "runs.db"
    with Research(ServerSettings(db_path=db, task_dirs=[str(folder)])) as service:
        run, _ = service.runs.start_run(folder.name, len(versions) + 1, None, 1, None)
        service.experiments.run_benchmark(run.id)
        for number, text in enumerate(versions, start=2):
            service.train_py.modify_train_py(run.id, f"edit to v{number}", text)
            service.experiments.run_benchmark(run.id)
    return db


def diff_labels(html: str) -> list[str]:
    """The report's diff headings, `FILES vA → vB`."""
    return re.findall(r'<div class="muted">([^<]*? v\d+ → v\d+):', html)


def test_show_and_report_diff_the_best_version_under_the_edited_files_own_name(tmp_path: Path, capsys):
    folder = make_folder(tmp_path, "slow", extra='edit = ["slow.py"]\nwork = "code"\nprofile = false')
    (folder / "train.py").rename(folder / "slow.py")
    toml = folder / "autoresearch.toml"
    toml.write_text(toml.read_text().replace('"train.py"]', '"slow.py"]'))
    original = (folder / "slow.py").read_text()
    better = original.replace("float(weight) *", "0.5 * float(weight) *")
    db = code_run(tmp_path, folder, better)

    assert main(["show", "latest", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "slow.py v2: edit to v2" in shown  # the experiments table names the file too
    diff = shown[shown.index("v2 (the best's version) against the original v1") :].splitlines()
    assert diff[1:3] == ["--- slow.py v1", "+++ slow.py v2"]
    assert '-print(f"loss: {float(weight) * ((x - 0.3) ** 2 + (y + 0.2) ** 2):.6f}")' in diff
    assert '+print(f"loss: {0.5 * float(weight) * ((x - 0.3) ** 2 + (y + 0.2) ** 2):.6f}")' in diff
    assert "train.py" not in "\n".join(diff)
    assert f"write it back: autoresearch-mcp apply {shown.split()[1]} --version 2 --to PATH" in diff
    assert (folder / "slow.py").read_text() == original  # the user's folder is never written

    assert main(["show", "latest", "--db", str(db), "--version", "9"]) == 2
    assert capsys.readouterr().err.count("\n") == 1

    out = tmp_path / "r.html"
    assert main(["report", "latest", "--db", str(db), "--out", str(out)]) == 0
    html = out.read_text()
    assert diff_labels(html) == ["slow.py v1 → v2"]
    assert "--- slow.py v1" in html and "+++ slow.py v2" in html


def test_a_run_of_several_files_shows_one_bounded_diff_per_changed_file(tmp_path: Path, capsys):
    names = '["train.py", "data/weight.txt", "data/notes.txt"]'
    folder = make_folder(tmp_path, "multi", extra=f'edit = {names}\nwork = "code"\nprofile = false')
    (folder / "data" / "notes.txt").write_text("left alone\n")
    script = (folder / "train.py").read_text()
    longer = script + "".join(f"# note {n}\n" for n in range(30))
    db = code_run(
        tmp_path,
        folder,
        pack([("train.py", longer), ("data/weight.txt", "1\n"), ("data/notes.txt", "left alone\n")]),
    )

    assert main(["show", "latest", "--db", str(db), "--version", "2", "--diff-lines", "8"]) == 0
    shown = capsys.readouterr().out
    diff = shown[shown.index("v2 against the original v1") :].splitlines()
    assert diff[1:3] == ["--- train.py v1", "+++ train.py v2"]
    assert "+# note 0" in diff and "+# note 29" not in diff  # bounded: 8 lines of train.py's diff
    assert "... 28 more lines of train.py's diff left out (--diff-lines 0 shows all)" in diff
    weight = diff.index("--- data/weight.txt v1")
    assert diff[weight : weight + 5] == [
        "--- data/weight.txt v1",
        "+++ data/weight.txt v2",
        "@@ -1 +1 @@",
        "-2",
        "+1",
    ]
    assert "notes.txt" not in "\n".join(diff)  # unchanged: no diff of it
    assert "# ==== autoresearch file" not in shown  # the packing never shows

    out = tmp_path / "r.html"
    assert main(["report", "latest", "--db", str(db), "--out", str(out)]) == 0
    assert diff_labels(out.read_text()) == ["train.py, data/weight.txt v1 → v2"]


def test_the_scripted_double_on_a_folder_in_code_work_is_one_line_naming_the_backends_that_can(
    tmp_path: Path, server_here: None, capfd
):
    folder = make_folder(tmp_path / "anywhere", extra='work = "code"')
    db = str(tmp_path / "r.db")
    done = cli_here(capfd, "run", "--task", str(folder), "--llm", "scripted", "--budget", "1", "--db", db)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "no scripted steps for task 'bowl'" in done.stderr and "--llm openai" in done.stderr
