"""The optimiser's suggestion (start_run's suggest="tpe"): one summary line with the configuration an
Optuna TPE sampler fed the run's history would try next, for params work only (a real store, the real
tasks and sampler)."""

from pathlib import Path

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server import suggest
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.suggest import PREFIX_WORDS, search_space, suggestion, trials
from folder_fixture import make_folder


def suggested(research: Research, run_id: str) -> str:
    (line,) = [
        line for line in research.runs.get_run_summary(run_id).splitlines() if line.startswith(PREFIX_WORDS)
    ]
    return line


def values(line: str) -> dict[str, float]:
    words = line.removeprefix(PREFIX_WORDS).split(" (")[0].split()
    return {k: float(v) for k, v in (word.split("=") for word in words)}


def test_the_line_says_while_tpe_is_still_drawing_at_random_and_stops_saying_it_once_it_models(
    settings: ServerSettings, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(suggest, "STARTUP", 2)
    research = Research(settings).open()
    run, _ = research.runs.start_run("toy-quadratic", 10, None, 42, None, suggest="tpe")
    assert suggested(research, run.id).endswith("(random start-up, 0 of 2 results before TPE models them)")
    research.experiments.run_experiment(run.id, {"x": 1.0}, None)
    research.experiments.run_experiment(run.id, {"x": 9.0}, None)  # x=9 crashes: not a result
    assert "(random start-up, 1 of 2 results" in suggested(research, run.id)
    research.experiments.run_experiment(run.id, {"x": -1.0}, None)
    line = suggested(research, run.id)
    assert "random" not in line and set(values(line)) == {"x", "y", "sleep"}


def test_a_params_run_that_asked_for_tpe_shows_one_suggestion_line_inside_the_tasks_bounds(
    settings: ServerSettings,
):
    research = Research(settings).open()
    run, summary = research.runs.start_run("toy-quadratic", 10, None, 42, None, suggest="tpe")
    assert summary.count(PREFIX_WORDS) == 1
    for _ in range(3):
        offer = values(suggested(research, run.id))
        assert set(offer) == {"x", "y", "sleep"}
        assert -10 <= offer["x"] <= 10 and -10 <= offer["y"] <= 10 and 0 <= offer["sleep"] <= 60
        research.experiments.run_experiment(run.id, {**offer, "sleep": 0.0}, None)  # the model took it
    plain, summary = research.runs.start_run("toy-quadratic", 10, None, 42, None)
    research.experiments.run_experiment(plain.id, {"x": 1.0}, None)
    assert PREFIX_WORDS not in summary + research.runs.get_run_summary(plain.id)


def test_the_same_history_and_seed_give_the_same_suggestion_and_each_experiment_a_new_one(tmp_path: Path):
    lines = []
    for copy in ("a", "b"):
        research = Research(ServerSettings(db_path=tmp_path / f"{copy}.db")).open()
        run, _ = research.runs.start_run("toy-quadratic", 10, None, 7, None, suggest="tpe")
        seen = [suggested(research, run.id)]
        for x in (0.5, 9.0, -1.0):  # x=9 crashes
            research.experiments.run_experiment(run.id, {"x": x}, None)
            seen.append(suggested(research, run.id))
        lines.append(seen)
    assert lines[0] == lines[1]
    assert len(set(lines[0])) == 4


def test_ok_experiments_are_complete_trials_failed_ones_failed_and_running_ones_pending(
    settings: ServerSettings,
):
    research = Research(settings).open()
    run, _ = research.runs.start_run("toy-quadratic", 10, None, 42, None, suggest="tpe")
    research.experiments.run_experiment(run.id, {"x": 0.5}, None)
    research.experiments.run_experiment(run.id, {"x": 9.0}, None)  # crashes
    pending = research.experiments.ask(run.id, {"x": 2.0}, None, "run_experiment")  # running now
    interrupted = research.experiments.ask(run.id, {"x": 3.0}, None, "run_experiment")
    research.experiments.record_interrupted(interrupted, "the server stopped", 0.1)
    history, _ = research.store.experiments(run.id)
    space = search_space(research.tasks("toy-quadratic"))
    fed = trials(history, space)
    assert [t.state for t in fed] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.RUNNING]
    assert fed[0].value == pytest.approx(-(0.2**2) - 0.04) and [t.params["x"] for t in fed] == [0.5, 9.0, 2.0]
    assert pending.experiment.status == "running"


def test_hpo_covertype_searches_learning_rate_on_a_log_scale_and_suggests_all_nine_params(
    settings: ServerSettings,
):
    research = Research(settings).open()
    space = search_space(research.tasks("hpo-covertype"))
    assert space["learning_rate"] == FloatDistribution(0.001, 1.0, log=True)
    assert space["n_estimators"] == IntDistribution(10, 1000) and space["max_depth"] == IntDistribution(1, 15)
    assert space["subsample"] == FloatDistribution(0.1, 1.0)
    run, summary = research.runs.start_run("hpo-covertype", 15, None, 42, None, suggest="tpe")
    offer = suggestion(research.store, research.store.get_run(run.id), research.tasks("hpo-covertype"))
    assert offer is not None and set(offer) == set(space)
    assert isinstance(offer["max_depth"], int) and len(f"{offer['learning_rate']:g}".strip("0.")) <= 4
    assert summary.count(PREFIX_WORDS) == 1


def test_a_folder_task_searches_its_params_table_log_scales_choices_and_booleans(tmp_path: Path):
    folder = make_folder(tmp_path)
    with (folder / "autoresearch.toml").open("a") as toml:
        toml.write('\n[params.rate]\ntype = "float"\nlow = 0.0001\nhigh = 0.1\nlog = true\n')
        toml.write('\n[params.deep]\ntype = "bool"\ndefault = false\n')
        toml.write('\n[params.layers]\ntype = "int"\nlow = 1\nhigh = 8\n')
    research = Research(ServerSettings(db_path=tmp_path / "r.db", task_dirs=[str(folder)])).open()
    space = search_space(research.tasks("bowl"))
    assert space == {
        "x": FloatDistribution(-1.0, 1.0),
        "y": FloatDistribution(-1.0, 1.0),
        "shape": CategoricalDistribution(["bowl", "crash"]),
        "rate": FloatDistribution(0.0001, 0.1, log=True),
        "deep": CategoricalDistribution([False, True]),
        "layers": IntDistribution(1, 8),
    }
    run, _ = research.runs.start_run("bowl", 5, None, 42, None, suggest="tpe")
    line = suggested(research, run.id)
    assert all(f" {name}=" in f" {line.removeprefix(PREFIX_WORDS)}" for name in space)


def test_suggest_on_a_code_task_is_refused_in_one_line_and_starts_no_run(settings: ServerSettings):
    research = Research(settings).open()
    with pytest.raises(ResearchError) as refused:
        research.runs.start_run("codeopt-records", 5, None, 42, None, suggest="tpe")
    assert str(refused.value) == (
        "suggest='tpe' is for params work: task codeopt-records is code work (run_benchmark), with no "
        "params for an optimiser to suggest; start it without suggest"
    )
    assert refused.value.kind == "bad_argument" and research.store.list_runs() == []
