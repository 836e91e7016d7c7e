"""A new best must be beyond the noise: intervals from the timings, the task-level keep rule, the current
best timed side by side with the candidate, and re-evaluation of a would-be best on more seeds."""

import math
import random
import statistics
from collections.abc import Iterator
from typing import Any

import codeopt_rewrites as rewrites
import pytest
from codeopt_rewrites import REFERENCE_SOURCE, codeopt_folder
from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import BestChanged, Incumbent, Keep, Store
from autoresearch_mcp.server.summary import render_summary
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task
from autoresearch_mcp.server.tasks.folder import benchmark as folder_benchmark
from autoresearch_mcp.server.tasks.folder import task as folder_task
from autoresearch_mcp.server.tasks.intervals import LEVEL, paired_ratio_interval, ratio_interval
from autoresearch_mcp.server.tasks.registry import make_task, register, unregister
from autoresearch_mcp.server.tasks.speed import Timings, speed_metrics, speed_verdict, versus_best


def noisy(rng: random.Random, centre: float, count: int = 20, spread: float = 0.05) -> list[float]:
    """Call times with multiplicative noise, as a loaded core makes them."""
    return [centre * math.exp(rng.gauss(0, spread)) for _ in range(count)]


# -- the intervals, on synthetic timings ----------------------------------------------------------


def test_the_intervals_use_the_exact_binomial_and_signed_rank_critical_values_for_20_timings() -> None:
    rng = random.Random(1)
    a, b = noisy(rng, 10.0), noisy(rng, 8.0)
    # Each median's interval at sqrt(0.95): the 5th to the 16th of 20 (1 - 2 P(B(20, 1/2) <= 4) = 0.988).
    sa, sb = sorted(a), sorted(b)
    independent = ratio_interval(a, b)
    assert independent == pytest.approx(
        (statistics.median(a) / statistics.median(b), sa[4] / sb[15], sa[15] / sb[4])
    )
    assert independent.low < independent.estimate < independent.high  # the metric is always inside
    # Pairs: the Walsh averages of the log ratios between the 53rd and the 158th of 210 (the table's 52).
    d = [math.log(x) - math.log(y) for x, y in zip(a, b, strict=True)]
    walsh = sorted((d[i] + d[j]) / 2 for i in range(20) for j in range(i, 20))
    paired = paired_ratio_interval(a, b)
    assert paired == pytest.approx(
        (math.exp(statistics.median(walsh)), math.exp(walsh[52]), math.exp(walsh[-53]))
    )


def test_timings_of_one_version_give_an_interval_around_one_and_a_faster_version_one_above_it() -> None:
    rng = random.Random(2)
    best, same, faster = noisy(rng, 10.0), noisy(rng, 10.0), noisy(rng, 10.0 / 1.3)
    within = ratio_interval(best, same)
    assert within.low < 1 < within.high and not within.excludes_one()
    beyond = ratio_interval(best, faster)
    assert 1.2 < beyond.low < 1.3 < beyond.high < 1.5


def test_load_drift_between_two_benchmarks_fools_separate_timings_but_not_side_by_side_ones() -> None:
    rng = random.Random(3)
    # The best was timed while the machine was 8% slower than when its identical copy was timed.
    earlier, now = noisy(rng, 10.8), noisy(rng, 10.0)
    assert ratio_interval(earlier, now).low > 1  # "faster": today's numbers would keep the copy
    # Side by side, each pair shares the moment's load, however much it drifts from pair to pair.
    load = [1 + 0.3 * math.sin(i) for i in range(20)]
    best = [10.0 * f * math.exp(rng.gauss(0, 0.05)) for f in load]
    copy = [10.0 * f * math.exp(rng.gauss(0, 0.05)) for f in load]
    paired = paired_ratio_interval(best, copy)
    assert paired.low < 1 < paired.high


# -- the keep rule, a task-level hook -------------------------------------------------------------


def best_at(
    iteration: int, metric: float, samples: list[float] | None = None, mean: float | None = None
) -> Incumbent:
    from autoresearch_mcp.contract.models import Experiment

    exp = Experiment(
        id=iteration,
        run_id="r-test",
        iteration=iteration,
        params={},
        artifact_version=iteration,
        status="ok",
        metric=metric,
        kept=True,
        started_at="2026-01-01T00:00:00+00:00",
    )
    return Incumbent(experiment=exp, value=metric if mean is None else mean, samples=samples or [])


def speedup(metric: float, samples: list[float] | None = None, **metrics: float) -> Outcome:
    return Outcome(status="ok", metric=metric, metrics={"speedup": metric, **metrics}, samples=samples or [])


def test_codeopt_keeps_a_higher_speedup_only_when_the_side_by_side_interval_lies_above_one() -> None:
    task, best = make_task("codeopt-records", {}), best_at(1, 2.0)
    within = speedup(2.3, vs_best=1.01, vs_best_low=0.97, vs_best_high=1.05, vs_best_iteration=1)
    assert not task.keeps(within, best)  # today's rule (2.3 > 2.0) kept it
    beyond = speedup(2.3, vs_best=1.1, vs_best_low=1.04, vs_best_high=1.16, vs_best_iteration=1)
    assert task.keeps(beyond, best)
    assert task.keeps(within, None)  # the first result is always the best


def test_codeopt_compares_stored_timings_when_the_best_changed_while_the_benchmark_ran() -> None:
    rng, task = random.Random(4), make_task("codeopt-records", {})
    best = best_at(3, 2.0, samples=noisy(rng, 10.0))
    # Timed beside #1, but #3 became the best meanwhile: the stored timings of #3 decide.
    same = speedup(2.5, noisy(rng, 10.0), vs_best_low=1.5, vs_best_iteration=1)
    assert not task.keeps(same, best)
    assert task.keeps(speedup(2.5, noisy(rng, 7.0), vs_best_low=0.5, vs_best_iteration=1), best)
    # A best recorded before timings were stored: the plain rule.
    assert task.keeps(speedup(2.1), best_at(3, 2.0)) and not task.keeps(speedup(1.9), best_at(3, 2.0))


def test_the_first_benchmark_is_judged_at_the_keep_rules_level_on_the_speedups_own_pairs() -> None:
    rng = random.Random(5)
    reference = noisy(rng, 10.0, 21)
    timings = Timings(times_ms=[t / 1.02 for t in noisy(rng, 10.0, 21)], reference_times_ms=reference)
    no_best = ExecContext(run_id="r-test", seed=42, iteration=1, options={}, best_iteration=None)
    metrics = {**speed_metrics(timings, 20), **versus_best(timings, no_best, LEVEL, best_is_reference=True)}
    # against the original, vs_best is the speedup's estimate, its interval at the keep rule's level:
    # inside the speedup's wider one, so that the first keep is no harder than any later one
    assert metrics["vs_best"] == metrics["speedup"]
    assert (
        metrics["speedup_low"] <= metrics["vs_best_low"] <= metrics["vs_best_high"] <= metrics["speedup_high"]
    )
    verdict = speed_verdict(Outcome(status="ok", metric=metrics["speedup"], metrics=metrics), None, LEVEL)
    assert verdict is not None and f"{metrics['vs_best_low']:.4g}" in verdict.why


def test_a_params_task_keeps_a_strictly_better_metric_measured_against_the_bests_mean() -> None:
    task = make_task("hpo-covertype", {})
    assert task.keeps(Outcome(status="ok", metric=0.78), best_at(1, 0.77))
    assert not task.keeps(Outcome(status="ok", metric=0.77), best_at(1, 0.77))  # a tie is no new best
    assert task.keeps(Outcome(status="ok", metric=0.78), best_at(1, 0.79, mean=0.775))


# -- the store: the best is the latest kept experiment --------------------------------------------


def codeopt_run(store: Store) -> str:
    config = {"metric": "speedup", "direction": "max", "options": {}}
    return store.create_run(
        task="codeopt-records", budget=10, target=None, seed=42, name=None, config=config, initial_source="x"
    ).id


def finish(store: Store, run_id: str, metric: float, kept: bool | None = None, **metrics: float) -> int:
    """An ok experiment, kept by the plain rule, or as `kept` says (decided against the best of now)."""
    exp = store.reserve_experiment(run_id, {}, store.artifacts.get(run_id).version, None, repeat_ok=True)
    best = store.incumbent(run_id)
    keep = None if kept is None else Keep(kept=kept, over=None if best is None else best.experiment.id)
    done = store.complete_experiment(
        exp.id,
        status="ok",
        metrics={"speedup": metric, **metrics},
        metric=metric,
        error_tail=None,
        duration_s=1.0,
        samples=[1.0, 2.0],
        keep=keep,
    )
    return done.iteration


def test_the_best_is_the_latest_kept_experiment_even_when_an_earlier_one_measured_higher(tmp_path) -> None:
    store = Store(tmp_path / "runs.db")
    run_id = codeopt_run(store)
    finish(store, run_id, 5.0)  # the first: kept by the plain rule
    # #2 measured 4.9 in a slower moment, but was faster than #1 side by side: kept, and the best now.
    finish(store, run_id, 4.9, kept=True, speedup_low=4.7, speedup_high=5.1)
    finish(store, run_id, 5.6, kept=False)  # higher, within the noise: not kept
    run = store.get_run(run_id)
    assert run.best is not None and (run.best.iteration, run.best.low, run.best.high) == (2, 4.7, 5.1)
    # #3 ran the best's own code and params after it: its timings are pooled with the best's
    best = store.incumbent(run_id)
    assert best is not None and best.experiment.iteration == 2 and best.samples == [1.0, 2.0, 1.0, 2.0]
    summary = render_summary(store, run, make_task("codeopt-records", {}))
    assert "Best speedup=4.9 [4.7, 5.1] at 99% (#2, train.py v1)" in summary
    # a higher figure than the best's says why it was not kept; a former best's does not
    rows = {line.split()[0]: line for line in summary.splitlines() if line.startswith("#")}
    assert "(not kept: a re-measurement of the best)" in rows["#3"] and "not kept" not in rows["#1"]


def test_a_higher_speedup_not_kept_says_it_was_not_surely_faster_and_the_best_its_level(tmp_path) -> None:
    store = Store(tmp_path / "runs.db")
    run_id = codeopt_run(store)
    finish(store, run_id, 4.6, speedup_low=3.6, speedup_high=8.8)
    store.artifacts.add(run_id, "y", "a rewrite")
    side_by_side = {"vs_best": 1.2, "vs_best_low": 0.9, "vs_best_high": 1.6, "vs_best_iteration": 1.0}
    finish(store, run_id, 6.5, kept=False, **side_by_side)
    store.artifacts.add(run_id, "z", "a slower rewrite")
    finish(
        store, run_id, 6.1, kept=False, vs_best=0.8, vs_best_low=0.7, vs_best_high=0.9, vs_best_iteration=1.0
    )
    run, task = store.get_run(run_id), make_task("codeopt-records", {})
    neutral, small = render_summary(store, run, task), render_summary(store, run, task, "small")
    assert "Best speedup=4.6 [3.6, 8.8] at 99% (#1, train.py v1)" in neutral
    assert "\n#2 6.5 (not kept: not surely faster than #1) v2 a rewrite\n" in neutral
    assert "\n#3 6.1 (not kept: surely slower than #1) v3 a slower rewrite" in neutral
    # the small profile's words as they were
    assert "Best speedup=4.6000 [3.6, 8.8] (#1, train.py v1)" in small
    assert "\n#2 6.5000 (not kept) v2 a rewrite\n#3 6.1000 (not kept) v3 a slower rewrite" in small


def test_a_keep_decided_against_a_best_that_has_changed_since_is_refused_to_be_decided_again(
    tmp_path,
) -> None:
    store = Store(tmp_path / "runs.db")
    run_id = codeopt_run(store)
    exp = store.reserve_experiment(run_id, {"a": 1}, 1, None)
    finish(store, run_id, 5.0)  # became the best after the decision below was taken
    stale = Keep(kept=True, over=None)
    with pytest.raises(BestChanged):
        store.complete_experiment(
            exp.id, status="ok", metrics={}, metric=6.0, error_tail=None, duration_s=1.0, keep=stale
        )
    assert store.get_experiment(exp.id).status == "running"  # nothing written


def test_the_report_shows_the_best_speedup_with_its_interval(tmp_path) -> None:
    from autoresearch_mcp.server.dashboard.render import render_report

    store = Store(tmp_path / "runs.db")
    run_id = codeopt_run(store)
    finish(store, run_id, 2.13, speedup_low=2.05, speedup_high=2.2)
    html = render_report(store, run_id, tmp_path / "transcripts")
    assert '<span class="interval" title="95% interval">[2.0500, 2.2000]</span>' in html


# -- through the run service, with the real sandbox -----------------------------------------------


def test_through_the_service_each_benchmark_is_kept_exactly_when_its_side_by_side_interval_says_so(
    settings,
) -> None:
    # Which way the measurements go is the machine's (the slow test below measures that); what is
    # decided from them is the code's: the interval against the best timed beside it, and the keep.
    settings = settings.model_copy(
        update={"task_dirs": [str(codeopt_folder(settings.db_path.parent / "codeopt-records", 1500, 5))]}
    )
    service = Research(settings).open()
    run, _ = service.runs.start_run("codeopt-records", 5, None, 42, None)
    best: int | None = None
    for description, source in (
        (None, REFERENCE_SOURCE),  # the original, as the run starts
        ("a comment", REFERENCE_SOURCE + "# the same code\n"),
        ("the fastest rewrite", rewrites.source_after(len(rewrites.REWRITES))),
    ):
        if description is not None:
            service.train_py.modify_train_py(run.id, description, source, None)
        result = service.experiments.run_benchmark(run.id)
        metrics = result.experiment.metrics
        assert len(service.store.samples(result.experiment.id)) == 5
        # Timed beside the best of the moment, or the original (0) while there is none; kept exactly
        # when the keep rule's interval of that ratio lies above 1.
        assert metrics["vs_best_iteration"] == (best or 0)
        assert metrics["vs_best_low"] <= metrics["vs_best"] <= metrics["vs_best_high"]
        assert result.is_new_best == (metrics["vs_best_low"] > 1), metrics
        assert result.message is not None and result.message.startswith(
            "kept: " if result.is_new_best else "not kept: "
        )
        if result.is_new_best:
            best = result.experiment.iteration
        assert (result.best.iteration if result.best else None) == best
    page = service.experiments.get_experiment_history(run.id, None, 0, "iteration", None)
    assert all(e.metrics["speedup_low"] <= e.metrics["speedup_high"] for e in page.experiments)
    kept = service.store.get_run(run.id).best
    summary = service.runs.get_run_summary(run.id, "small")  # 4 decimals: the neutral words' digits vary
    if kept is None:
        assert "Best: none yet" in summary
    else:
        assert kept.low is not None and kept.high is not None
        assert f"Best speedup={kept.metric:.4f} [{kept.low:.4g}, {kept.high:.4g}] (#{best}" in summary


@pytest.mark.slow  # measured speedups: a copy within the noise, a rewrite beyond it
def test_an_identical_copy_of_the_best_is_not_kept_and_a_clearly_faster_version_is(
    settings, monkeypatch
) -> None:
    # At the default 95% an identical copy is kept 2.5% of the time, by design; here 1 in 2,000.
    folder_task_level, folder_benchmark_level = folder_task.LEVEL, folder_benchmark.LEVEL
    monkeypatch.setattr(folder_task, "LEVEL", 0.999)
    monkeypatch.setattr(folder_benchmark, "LEVEL", 0.999)
    # 6,000 records: calls of ~50 ms, whose ratios hold at 99.9% (at 1,500, ~14 ms calls, they did not)
    settings = settings.model_copy(
        update={"task_dirs": [str(codeopt_folder(settings.db_path.parent / "codeopt-records", 6000, 20))]}
    )
    service = Research(settings).open()
    run, _ = service.runs.start_run("codeopt-records", 5, None, 42, None)
    # The fastest rewrite doing its work twice: several times the original's speed, surely faster, so
    # the run's first best; then the same rewrite doing it once, twice as fast as that best.
    fastest = rewrites.source_after(len(rewrites.REWRITES))
    twice = fastest.replace("def process_records(records):", "def _once(records):")
    twice += "\n\ndef process_records(records):\n    _once(records)\n    return _once(records)\n"
    service.train_py.modify_train_py(run.id, "the fastest, twice", twice, None)
    first = service.experiments.run_benchmark(run.id)
    assert first.is_new_best and len(service.store.samples(first.experiment.id)) == 20
    assert first.experiment.metrics["vs_best_iteration"] == 0  # against the original: no best yet

    service.train_py.modify_train_py(run.id, "a comment", twice + "# the same code\n", None)
    same = service.experiments.run_benchmark(run.id)
    metrics = same.experiment.metrics
    assert metrics["vs_best_iteration"] == 1 and metrics["vs_best_low"] <= 1 <= metrics["vs_best_high"]
    assert not same.is_new_best and same.best is not None and same.best.iteration == 1

    # The clearly faster version, judged at the keep rule's own level (99.9% only guards the copy
    # against the 2.5% of false keeps 95% allows by design; a loaded machine widens a 99.9% interval
    # past a twofold speedup's low end).
    monkeypatch.setattr(folder_task, "LEVEL", folder_task_level)
    monkeypatch.setattr(folder_benchmark, "LEVEL", folder_benchmark_level)
    service.train_py.modify_train_py(run.id, "the fastest rewrite", fastest, None)
    fast = service.experiments.run_benchmark(run.id)
    # Kept because its interval clears 1. How far above 1 is the machine's to say: CI's slow set loads
    # the CPU on purpose beside it, and half the work measured 1.40x there (1.12x at the low end).
    assert fast.is_new_best and fast.experiment.metrics["vs_best_low"] > 1
    assert (
        fast.best is not None
        and fast.best.low is not None
        and fast.best.low < fast.best.metric < fast.best.high
    )  # type: ignore[operator]

    page = service.experiments.get_experiment_history(run.id, None, 0, "iteration", None)
    for exp in page.experiments:
        assert exp.metrics["speedup_low"] < exp.metrics["speedup_high"]
    assert (
        f"Best speedup={fast.best.metric:.4f} [{fast.best.low:.4g}, {fast.best.high:.4g}] (#3"
        in service.runs.get_run_summary(run.id, "small")
    )


# -- re-evaluation on more seeds (reeval_seeds) ---------------------------------------------------


class LuckParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: float = Field(default=0.0, ge=-10, le=10)
    luck: float = Field(default=0.0, ge=0, le=10, description="added on the run's own seed only")


class SeededTask(Task):
    """A metric that depends on the seed: `luck` is added only on the run's seed (42), the way one lucky
    seed makes a configuration look better than it is."""

    name = "seeded-luck"
    title = "A seed-dependent quadratic (test-only)"
    metric = "score"
    params_model = LuckParams

    def options(self) -> dict[str, Any]:
        return {}

    def initial_artifact(self) -> str:
        return "# nothing to run\n"

    def check_artifact(self, source: str) -> list[str]:
        return []

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        assert isinstance(params, LuckParams)
        value = -((params.x - 0.3) ** 2) + (params.luck if ctx.seed == 42 else 0.0)
        return Outcome(status="ok", metric=value, metrics={"score": value})


@pytest.fixture
def seeded(settings: ServerSettings) -> Iterator[Research]:
    register("seeded-luck", lambda _settings: SeededTask())
    try:
        yield Research(settings).open()
    finally:
        unregister("seeded-luck")


def test_a_lucky_seed_is_re_evaluated_and_not_kept_when_its_mean_does_not_beat_the_bests(seeded) -> None:
    run, _ = seeded.runs.start_run("seeded-luck", 10, None, 42, None, reeval_seeds=2)
    first = seeded.experiments.run_experiment(run.id, {"x": 0.3}, None)
    assert first.is_new_best and [e.note for e in first.reevaluations] == [
        "re-evaluation 1/2 of #1 (seed 43)",
        "re-evaluation 2/2 of #1 (seed 44)",
    ]
    assert first.experiment.metrics["score_mean"] == 0.0 and first.experiment.metrics["evaluations"] == 3
    # 0.11 on seed 42 beats the best's 0.0; on seeds 43 and 44 it scores -0.09: mean -0.0233.
    lucky = seeded.experiments.run_experiment(run.id, {"x": 0.0, "luck": 0.2}, None)
    assert lucky.experiment.metric == pytest.approx(0.11) and not lucky.is_new_best
    assert [(e.iteration, e.metric, e.kept) for e in lucky.reevaluations] == [
        (5, -0.09, False),
        (6, -0.09, False),
    ]
    assert lucky.experiment.metrics["score_mean"] == pytest.approx(-0.023333, abs=1e-6)
    assert lucky.message is not None and lucky.message.endswith("vs the best's 0.0000 (#1): not kept")
    run_now = seeded.store.get_run(run.id)
    assert run_now.used == 6 and run_now.best is not None and run_now.best.iteration == 1
    assert run_now.best.mean == 0.0
    # Below the best on its own seed: no re-evaluation, one experiment.
    plain = seeded.experiments.run_experiment(run.id, {"x": 1.0}, None)
    assert plain.reevaluations == [] and plain.budget_left == 3


def test_without_reeval_seeds_the_lucky_seed_becomes_the_best(seeded) -> None:
    run, _ = seeded.runs.start_run("seeded-luck", 10, None, 42, None)
    seeded.experiments.run_experiment(run.id, {"x": 0.3}, None)
    assert seeded.experiments.run_experiment(run.id, {"x": 0.0, "luck": 0.2}, None).is_new_best
    assert seeded.store.get_run(run.id).used == 2


def test_a_better_mean_is_kept_after_its_re_evaluations(seeded) -> None:
    run, _ = seeded.runs.start_run("seeded-luck", 10, None, 42, None, reeval_seeds=1)
    seeded.experiments.run_experiment(run.id, {"x": 0.0}, None)
    better = seeded.experiments.run_experiment(
        run.id, {"x": 0.2, "luck": 0.05}, None
    )  # (0.04 - 0.01) / 2 > -0.09
    assert better.is_new_best and better.best is not None and better.best.iteration == 3
    assert better.best.mean == pytest.approx(0.015) and "kept" in (better.message or "")


def test_when_the_budget_runs_out_mid_re_evaluation_the_result_says_so(seeded) -> None:
    run, _ = seeded.runs.start_run("seeded-luck", 2, None, 42, None, reeval_seeds=3)
    result = seeded.experiments.run_experiment(run.id, {"x": 0.3}, None)
    assert len(result.reevaluations) == 1 and result.run_status == "exhausted" and result.is_new_best
    assert result.message is not None
    assert "stopped after 1 of 3 (budget_exhausted" in result.message and "mean is over 2" in result.message


def test_hpo_re_evaluations_train_on_other_seeds_and_the_best_is_kept_on_the_mean(settings) -> None:
    service = Research(settings).open()
    # One re-evaluation: each training is a sandboxed process that imports XGBoost (about 3 CPU s).
    run, _ = service.runs.start_run("hpo-covertype", 4, None, 42, None, reeval_seeds=1)
    params = {"n_estimators": 10, "max_depth": 3, "subsample": 0.5, "colsample_bytree": 0.5}
    result = service.experiments.run_experiment(run.id, params, None)
    runs = [result.experiment, *result.reevaluations]
    assert [e.iteration for e in runs] == [1, 2] and [e.status for e in runs] == ["ok"] * 2
    assert all(e.params == runs[0].params and e.artifact_version == 1 for e in runs)
    assert len({e.metric for e in runs}) > 1  # subsampling with another seed trains another model
    mean = statistics.fmean(e.metric for e in runs)  # type: ignore[misc]
    assert result.experiment.metrics["macro_f1_mean"] == pytest.approx(mean, abs=1e-6)
    assert (
        result.is_new_best and result.best is not None and result.best.mean == pytest.approx(mean, abs=1e-6)
    )
    assert [e.kept for e in result.reevaluations] == [False]
    assert "(mean " in service.runs.get_run_summary(run.id)
    # The same params again is still an exact repeat (the re-evaluations do not free it).
    with pytest.raises(Exception, match="exact repeat of experiment #1"):
        service.experiments.run_experiment(run.id, params, None)
