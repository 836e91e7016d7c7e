"""`init` writes a task folder's autoresearch.toml from what a script shows; `apply` takes a run's version
of the edited files back to where the user says (the server never writes a user's folder)."""

import textwrap
from pathlib import Path

import pytest

from autoresearch_mcp.cli import main
from autoresearch_mcp.contract.files import pack
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.folder.spec import load_folder
from folder_fixture import make_folder

SCRIPT = textwrap.dedent(
    """\
    import json, os
    params = json.loads(os.environ.get("AUTORESEARCH_PARAMS", "{}"))
    lr = params.get("learning_rate", 0.05)
    depth = params.get("depth", 6)
    dropout = params.get("dropout", 0.1)
    use_bias = params.get("use_bias", True)
    print(f"val_loss: {lr * depth}")
    print(f"train_accuracy: {0.9}")
    """
)


def test_init_reads_the_command_metric_direction_and_params_off_the_script(tmp_path, capsys):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "train.py").write_text(SCRIPT)
    assert main(["init", str(tmp_path / "proj")]) == 0
    folder = load_folder(tmp_path / "proj")  # what the server reads: valid as written
    task, params = folder.spec.task, folder.spec.params
    assert (task.name, task.command, task.metric, task.direction) == (
        "proj",
        ["python", "train.py"],
        "val_loss",
        "minimize",
    )
    assert params["learning_rate"].log and params["learning_rate"].default == 0.05
    assert params["depth"].type == "int" and params["depth"].default == 6
    assert (params["dropout"].low, params["dropout"].high) == (0.0, 1.0)
    assert params["use_bias"].type == "bool" and params["use_bias"].default is True
    out = capsys.readouterr().out
    assert "the first of val_loss, train_accuracy" in out and "guessed" in out


def test_init_asks_only_for_what_the_script_does_not_show(tmp_path, capsys):
    script = tmp_path / "fit.py"
    script.write_text("print('done')\n")
    assert main(["init", str(script)]) == 2
    assert "give the metric with --metric NAME" in capsys.readouterr().err
    assert main(["init", str(script), "--metric", "wobble"]) == 2
    assert "--direction minimize or maximize" in capsys.readouterr().err
    assert main(["init", str(script), "--metric", "wobble", "--direction", "maximize"]) == 0
    spec = load_folder(tmp_path).spec
    assert spec.task.edit == ["fit.py"] and spec.task.command == ["python", "fit.py"]
    assert main(["init", str(script), "--metric", "wobble", "--direction", "maximize"]) == 2
    assert "--force replaces it" in capsys.readouterr().err


# Code work: a params folder judged by its own script refuses edits, so a second version needs this.
CODE_WORK = 'work = "code"'


def run_with_a_second_version(tmp_path: Path, folder: Path, source: str) -> Path:
    db = tmp_path / "runs.db"
    settings = ServerSettings(db_path=db, task_dirs=[str(folder)])
    service = Research(settings.model_copy(update={"db_path": db})).open()
    run, _ = service.runs.start_run(folder.name, 3, None, 1, None)
    service.train_py.modify_train_py(run.id, "better", source, None)
    service.experiments.run_benchmark(run.id) if service.tasks(
        folder.name
    ).experiment_tool == "run_benchmark" else (service.experiments.run_experiment(run.id, {}, None))
    return db


def test_apply_writes_the_best_version_where_the_user_says_and_a_dry_run_writes_nothing(tmp_path, capsys):
    folder = make_folder(tmp_path / "src", extra=CODE_WORK)
    improved = (folder / "train.py").read_text().replace("float(weight) *", "0.5 * float(weight) *")
    db = run_with_a_second_version(tmp_path, folder, improved)
    target = tmp_path / "mine"
    target.mkdir()
    (target / "train.py").write_text("old\n")

    assert main(["apply", "latest", "--db", str(db), "--to", str(target), "--dry-run"]) == 0
    assert "would write" in capsys.readouterr().out and (target / "train.py").read_text() == "old\n"
    assert main(["apply", "latest", "--db", str(db), "--to", str(target)]) == 0
    assert (target / "train.py").read_text() == improved
    assert main(["apply", "latest", "--db", str(db), "--to", str(target / "v1.py"), "--version", "1"]) == 0
    assert (target / "v1.py").read_text() == (folder / "train.py").read_text()


def test_apply_splits_several_edited_files_back_into_their_names(tmp_path):
    folder = make_folder(tmp_path / "multi", extra='edit = ["train.py", "data/weight.txt"]\nwork = "code"')
    files = [("train.py", (folder / "train.py").read_text()), ("data/weight.txt", "1\n")]
    db = run_with_a_second_version(tmp_path, folder, pack(files))
    out = tmp_path / "out"
    assert main(["apply", "latest", "--db", str(db), "--to", str(out)]) == 0
    assert (out / "data" / "weight.txt").read_text() == "1\n" and (out / "train.py").read_text() == files[0][
        1
    ]


@pytest.mark.parametrize("version", ["9", "x"])
def test_apply_of_a_version_the_run_lacks_is_one_line(tmp_path, capsys, version: str):
    folder = make_folder(tmp_path / "src", extra=CODE_WORK)
    db = run_with_a_second_version(tmp_path, folder, (folder / "train.py").read_text() + "\n# same\n")
    try:
        code = main(
            ["apply", "latest", "--db", str(db), "--to", str(tmp_path / "x.py"), "--version", version]
        )
    except SystemExit as exit_:  # argparse's refusal of a version that is not a number
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
