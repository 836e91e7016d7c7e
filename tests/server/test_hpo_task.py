"""hpo-covertype, the task folder shipped in the package: the paper's split, prepared by the server, real
XGBoost in the sandbox, scored by the evaluator alone."""

import gzip
import hashlib
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Experiment
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tasks.covertype import split
from autoresearch_mcp.server.tasks.registry import BUILTIN, make_task
from conftest import TESTS_DIR

# The fixture, as tests/data/PROVENANCE.md describes it.
FIXTURE_CLASS_COUNTS = [724, 968, 122, 25, 32, 59, 70]
FIXTURE_CSV_SHA256 = "2e40c2895ab4f4859a7dfe7ebfee287aebfe2b7d0cb2906a6fe46a72c97e89b6"
# The sample shipped in the package, as its PROVENANCE.md describes it.
SHIPPED_SHA256 = "e5a404ddd05ecdb2c9ab202726d5b16454891aca873b6aaef16ab780f3e81ee5"


def service_for(settings) -> Research:
    return Research(settings).open()


def csv_text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode()


def test_the_fixture_is_what_its_provenance_says(covtype_csv):
    text = csv_text(covtype_csv)
    assert hashlib.sha256(text.encode()).hexdigest() == FIXTURE_CSV_SHA256
    frame = pd.read_csv(covtype_csv)
    assert frame.shape == (2_000, 55) and frame.columns[-1] == "Cover_Type"
    assert frame["Cover_Type"].value_counts().sort_index().tolist() == FIXTURE_CLASS_COUNTS


def test_under_20000_rows_there_is_no_subsample_and_every_class_reaches_the_test_split(covtype_csv):
    _, y_train, _, y_test = split(str(covtype_csv))
    assert (len(y_train), len(y_test)) == (1_600, 400)
    counts = np.bincount(y_test, minlength=7)
    assert np.abs(counts - np.array(FIXTURE_CLASS_COUNTS) * 0.2).max() <= 1  # stratified
    assert counts.min() >= 5


def test_the_split_is_the_papers_stratified_80_20_of_the_csv(covtype_20k_csv):
    task = make_task("hpo-covertype", {"covtype_path": str(covtype_20k_csv)})
    with np.load(task.folder / "data" / "split.npz") as arrays:  # type: ignore[attr-defined]
        assert sorted(arrays.files) == ["X_test", "X_train", "y_train"]  # no test labels for train.py
        assert (len(arrays["y_train"]), len(arrays["X_test"])) == (16_000, 4_000)
    y_test = np.load(task.folder / "secret" / "y_test.npy")  # type: ignore[attr-defined]
    counts = np.bincount(y_test, minlength=7)
    per_class = np.array([7292, 9752, 1231, 94, 327, 598, 706])  # covtype_20k.csv.gz's class counts
    assert np.abs(counts - per_class * 0.2).max() <= 1  # stratified: 20% of every class
    assert task.loaded.hidden == (task.folder / "secret", task.folder / "source")  # type: ignore[attr-defined]


def test_the_fixture_is_regenerated_from_the_20000_rows_by_its_script(tmp_path, covtype_20k_csv, covtype_csv):
    out = tmp_path / "fixture.csv.gz"
    script = TESTS_DIR / "data" / "make_covtype_fixture.py"
    subprocess.run([sys.executable, str(script), str(covtype_20k_csv), str(out)], check=True)
    assert csv_text(out) == csv_text(covtype_csv)


def test_more_rows_than_20000_are_subsampled_stratified_with_seed_42(tmp_path, covtype_csv):
    bigger = pd.concat([pd.read_csv(covtype_csv)] * 11, ignore_index=True)  # 22,000 rows
    path = tmp_path / "bigger.csv.gz"
    with gzip.open(path, "wt") as handle:
        bigger.to_csv(handle, index=False)
    _, y_train, _, y_test = split(str(path))
    assert len(y_train) + len(y_test) == 20_000
    assert len(y_test) == 4_000
    counts = np.bincount(y_test, minlength=7)
    per_class = np.array(FIXTURE_CLASS_COUNTS) * 11 * (20_000 / 22_000) * 0.2
    assert np.abs(counts - per_class).max() <= 2  # stratified twice: the subsample, then 80/20


@pytest.mark.parametrize("data", ["covtype_csv", "covtype_20k_csv"])
def test_a_real_experiment_trains_xgboost_in_the_sandbox_and_reports_all_metrics(
    settings, data: str, request: pytest.FixtureRequest
):
    csv = request.getfixturevalue(data)  # the fixture, and the 20,000 rows (skipped without them)
    service = service_for(settings.with_options(covtype_path=str(csv)))
    run, _ = service.runs.start_run("hpo-covertype", budget=3, target=None, seed=42, name="smoke")
    result = service.experiments.run_experiment(run.id, {"n_estimators": 10, "max_depth": 3}, "tiny")
    exp = result.experiment
    assert exp.status == "ok", exp.error_tail
    assert set(exp.metrics) == {"macro_f1", "precision", "recall", "accuracy"}  # the evaluator's
    assert 0.3 < exp.metrics["macro_f1"] < 0.95 and exp.metric == exp.metrics["macro_f1"]
    assert exp.params["learning_rate"] == 0.3  # defaults filled in: the stored record is complete
    assert result.is_new_best and result.budget_left == 2


# A train.py that trains nothing: what these tests judge is the evaluator and the sandbox around the
# script, and a script that imports no XGBoost costs a second instead of three or four.
UNTRAINED = "import numpy as np\nimport prepare\n\nX_train, y_train, X_test = prepare.load()\n"
SCORING = "prepare.save(np.full(len(X_test), 1))\n"  # every row the most common class


def experiment_of(settings, source: str) -> Experiment:
    """One experiment of hpo-covertype on `source` as its train.py."""
    service = service_for(settings)
    run, _ = service.runs.start_run("hpo-covertype", budget=3, target=None, seed=42, name=None)
    service.train_py.modify_train_py(run.id, "changed scoring", source, None)
    return service.experiments.run_experiment(run.id, {"n_estimators": 10, "max_depth": 2}, None).experiment


def test_a_training_script_that_never_hands_in_predictions_is_a_crash_not_a_score(settings):
    exp = experiment_of(settings, UNTRAINED + "if False:\n    " + SCORING)
    assert exp.status == "crash" and "predictions.npy" in (exp.error_tail or "")


def test_a_training_script_that_prints_a_perfect_score_is_scored_by_the_evaluator_alone(settings):
    exp = experiment_of(settings, UNTRAINED + SCORING + "print('macro_f1: 1.0')\n")
    assert exp.status == "ok" and exp.metric == exp.metrics["macro_f1"] < 0.95
    assert exp.metrics["reported.macro_f1"] == 1.0  # kept beside it, deciding nothing


def test_a_training_script_cannot_read_the_held_out_labels(settings):
    reads = "print('read:', len(open('secret/y_test.npy', 'rb').read()))\n"
    exp = experiment_of(settings, UNTRAINED + reads + SCORING)
    assert exp.status == "crash" and "y_test.npy" in (exp.error_tail or "")


def test_missing_data_is_unavailable_pathless_for_the_caller_and_explained_to_the_operator(
    settings, monkeypatch, tmp_path
):
    import sklearn.datasets

    def offline(*args, **kwargs):
        raise OSError("<urlopen error [Errno -2] Name or service not known>")

    monkeypatch.setattr(sklearn.datasets, "fetch_covtype", offline)
    service = service_for(settings.with_options(covtype_path="full"))
    with pytest.raises(ResearchError) as error:
        service.runs.start_run("hpo-covertype", budget=3, target=None, seed=42, name=None)
    message, operator = str(error.value), error.value.detail["operator"]
    assert error.value.kind == "unavailable"
    assert "no Covertype data" in message and "tell the server's operator" in message
    assert "--data" not in message and "/" not in message  # no flag a model cannot use, no path
    assert "fetch_covtype" in operator and "--data PATH" in operator and "--data full" in operator
    assert "\n" not in operator and "AUTORESEARCH_COVTYPE" in operator
    assert service.store.list_runs() == []

    service = service_for(settings.with_options(covtype_path=str(tmp_path / "dir" / "nope.csv")))
    with pytest.raises(ResearchError) as error:
        service.runs.start_run("hpo-covertype", budget=3, target=None, seed=42, name=None)
    assert str(tmp_path) not in str(error.value)
    assert "no file 'nope.csv'" in error.value.detail["operator"]
    assert str(tmp_path) not in error.value.detail["operator"]


def test_without_a_data_setting_the_sample_shipped_in_the_package_is_the_data(settings):
    shipped = BUILTIN / "hpo-covertype" / "source" / "covtype_20k.csv.gz"
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == SHIPPED_SHA256  # its PROVENANCE.md
    assert (shipped.parent / "PROVENANCE.md").is_file()
    task = make_task("hpo-covertype", settings.with_options(covtype_path=None).task_settings())
    with np.load(task.folder / "data" / "split.npz") as arrays:  # type: ignore[attr-defined]
        assert (len(arrays["y_train"]), len(arrays["X_test"])) == (16_000, 4_000)


def test_a_csv_with_the_wrong_columns_is_refused_clearly(settings, tmp_path: Path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    service = service_for(settings.with_options(covtype_path=str(bad)))
    with pytest.raises(ResearchError) as error:
        service.runs.start_run("hpo-covertype", budget=3, target=None, seed=42, name=None)
    assert "expected 54 features + Cover_Type" in error.value.detail["operator"]


def test_the_full_setting_loads_covertype_with_the_real_loader(settings, monkeypatch, covtype_csv: Path):
    """--data full: the split comes from sklearn's fetch_covtype (here a stand-in that serves the CSV's
    rows, as the real one would after downloading and caching the full data)."""

    import sklearn.datasets

    frame = pd.read_csv(covtype_csv)
    calls = []

    def download(*args, **kwargs):
        calls.append(kwargs)
        labels = frame["Cover_Type"].to_numpy()
        return SimpleNamespace(data=frame.drop(columns="Cover_Type").to_numpy(), target=labels)

    monkeypatch.setattr(sklearn.datasets, "fetch_covtype", download)
    service = service_for(settings.with_options(covtype_path="full"))
    run, _ = service.runs.start_run("hpo-covertype", budget=1, target=None, seed=42, name=None)
    assert calls and run.status == "running"


def test_a_training_past_the_configured_wall_clock_limit_is_killed_and_recorded_as_a_timeout(settings):
    stuck = UNTRAINED + "while True:\n    pass\n" + SCORING
    exp = experiment_of(settings.with_options(hpo_wall_s=2), stuck)
    assert exp.status == "timeout" and "timeout_s of 2 s" in (exp.error_tail or "")


def test_the_wall_clock_limit_is_the_tasks_own_setting_from_the_environment_and_a_bad_value_is_refused(
    monkeypatch, tmp_path
):
    from pydantic import ValidationError

    from autoresearch_mcp.server.settings import ServerSettings
    from autoresearch_mcp.server.tasks.registry import check_task_settings

    def wall_s(settings: dict) -> float:
        return make_task("hpo-covertype", settings).loaded.spec.task.timeout_s  # type: ignore[attr-defined]

    def task_settings() -> dict:
        return ServerSettings(db_path=tmp_path / "runs.db").task_settings()

    monkeypatch.setenv("AUTORESEARCH_HPO_WALL_S", "45")
    assert wall_s(task_settings()) == 45
    monkeypatch.setenv("AUTORESEARCH_HPO_WALL_S", "soon")
    with pytest.raises(ValidationError, match="hpo_wall_s"):
        check_task_settings(task_settings())  # what the server checks at start
    monkeypatch.delenv("AUTORESEARCH_HPO_WALL_S")
    assert wall_s(task_settings()) == 600
    assert "hpo_wall_s" not in ServerSettings.model_fields  # the server's own settings know none of it


def test_listing_the_task_splits_no_data_until_a_run_needs_it(covtype_csv, isolated_data_dir):
    task = make_task("hpo-covertype", {"covtype_path": str(covtype_csv)})
    info = task.info()
    assert info.kind == "params" and "max_depth" in info.params_schema["properties"]
    assert not (isolated_data_dir / "tasks").exists()  # a listing reads the shipped folder's words
    assert task.options()["data"] == "csv:covtype_2k.csv.gz"  # what a run reads: the split is made now
    assert (task.folder / "secret" / "y_test.npy").is_file()  # type: ignore[attr-defined]
    assert task.folder.parent == isolated_data_dir / "tasks"  # type: ignore[attr-defined]
