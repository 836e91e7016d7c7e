"""`init --evaluate`: the skeleton of a trusted evaluator beside a user's script, which decides the metric
once the script writes its predictions instead of scoring itself."""

import json
import shlex
import sqlite3
from pathlib import Path

import pytest

from autoresearch_mcp.cli import main

SCRIPT = """\
import json, os
params = json.loads(os.environ["AUTORESEARCH_PARAMS"])
lr = params.get("lr", 0.1)
with open("predictions.csv", "w") as out:
    out.write(f"{lr}\\n{lr}\\n")
print("val_loss: 0.0")  # what the script says; the evaluator decides
"""


def test_init_writes_an_evaluator_that_decides_the_metric_once_its_checks_are_done(
    tmp_path: Path, server_here: None, capsys: pytest.CaptureFixture[str]
):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text(SCRIPT)
    assert main(["init", str(project), "--evaluate"]) == 0
    said = capsys.readouterr().out
    assert (project / "evaluate.py").is_file() and (project / "secret").is_dir()
    assert "[evaluate]" in (project / "autoresearch.toml").read_text()
    assert "make train.py write predictions.csv" in said
    then = next(line for line in said.splitlines() if line.startswith("then, once the evaluator's"))
    (project / "secret" / "labels.csv").write_text("0.05\n0.05\n")  # the user's held-out labels

    argv = shlex.split(then.split(": ", 1)[1])[1:]
    db = tmp_path / "runs.db"
    assert main([*argv, "--db", str(db), "--budget", "1", "--quiet"]) == 0
    with sqlite3.connect(db) as conn:
        [(metric, metrics)] = conn.execute("SELECT metric, metrics_json FROM experiments").fetchall()
    assert metric == pytest.approx((0.1 - 0.05) ** 2)  # the evaluator's mean squared error
    assert json.loads(metrics)["reported.val_loss"] == 0.0  # the script's own line, kept, deciding nothing
