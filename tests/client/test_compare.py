"""`autoresearch-mcp compare`: both agents side by side on one server build, and what it writes."""

import gzip
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.cli import main
from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.client.compare_results import crossover, run_record, summarise
from autoresearch_mcp.client.report_figure import write_figure, write_table
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.server.tasks.folder.task import folder_task_class
from autoresearch_mcp.server.tasks.registry import BUILTIN
from toy_task import ToyParams

HPOParams = folder_task_class(BUILTIN / "hpo-covertype").params_model

ROW_FIELDS = {
    "iteration",
    "context_tokens",
    "symmetric_tokens",
    "full_tokens",
    "cache_weighted_tokens",
    "output_tokens",
    "best_metric",
    "wall_s",
    "llm_calls",
    "billed_tokens",
    "latency_s",
}


@pytest.fixture
def server_env(monkeypatch: pytest.MonkeyPatch, covtype_csv: Path) -> None:
    monkeypatch.setenv("AUTORESEARCH_COVTYPE", str(covtype_csv))
    monkeypatch.setenv("AUTORESEARCH_LOG_LEVEL", "WARNING")


def test_compare_runs_the_three_modes_at_once_and_writes_results_a_table_and_a_figure(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    # The toy task: what compare writes does not depend on the task (the HPO runs' share of the cores
    # is the slow test's below), and its experiments take milliseconds where XGBoost's take seconds.
    out = tmp_path / "out"
    args = "compare --task toy-quadratic --llm scripted --iterations 2 --seeds 42 --parallel --out"
    code = main([*args.split(), str(out)])
    assert code == 0

    results = json.loads((out / "results.json").read_text())
    assert results["task"] == "toy-quadratic" and results["iterations"] == 2 and results["seeds"] == [42]
    assert results["llm"].startswith("scripted (deterministic test double")
    # The sampling settings are the same for both modes, and on record.
    assert results["sampling"] == {
        "temperature": None,
        "max_tokens": 1024,
        "tool_choice": "auto",
        "tool_results_as_text": False,
    }
    assert results["max_failures"] == 5 and results["first"] == "defaults"
    with sqlite3.connect(out / "runs.db") as db:
        firsts = db.execute("SELECT params_json, note FROM experiments WHERE iteration = 1").fetchall()
    defaults = ToyParams().model_dump()
    assert [(json.loads(params), note) for params, note in firsts] == [
        (defaults, "the defaults (--first defaults)")
    ] * 3
    assert [(r["mode"], r["seed"]) for r in results["runs"]] == [
        ("stateless", 42),
        ("stateless-strong", 42),
        ("stateful", 42),
    ]
    for run in results["runs"]:
        assert [row["iteration"] for row in run["per_iteration"]] == [1, 2]
        assert all(set(row) == ROW_FIELDS for row in run["per_iteration"])
        assert run["totals"]["context_tokens"] == sum(r["context_tokens"] for r in run["per_iteration"])
        # The defaults are the first experiment in every mode, recorded before the model is asked.
        assert run["totals"]["experiments"] == 2 and run["totals"]["llm_calls"] == 1
        # The scripted double reports no usage: billed is the meter's count, and says so.
        assert run["totals"]["billed"]["source"] == "tiktoken"
        assert run["totals"]["billed_tokens"] == run["totals"]["full_tokens"]
        assert set(run["totals"]["cost"]) == {
            "claude-haiku-4-5",
            "claude-sonnet-4-5",
            "gpt-4.1",
            "gpt-5-mini",
        }
    summary = results["summary"]
    ratio = summary["stateless"]["context_tokens"] / summary["stateful"]["context_tokens"]
    assert summary["ratio"]["context_tokens"] == round(ratio, 2)
    strong = summary["stateless-strong"]["billed_tokens"] / summary["stateful"]["billed_tokens"]
    assert summary["ratio_strong"]["billed_tokens"] == round(strong, 2)
    assert summary["headline"] == {
        "baseline": "stateless-strong",
        "measure": "billed_tokens",
        "billed_source": "tiktoken",
    }
    assert set(summary["cost_ratio"]) == {"stateless", "stateless-strong"}
    assert summary["stateless"]["llm_calls_per_experiment"] == 0.5  # one call: #1 was the defaults

    assert results["parallel"] is True

    table = (out / "table.md").read_text()
    assert "| context tokens (paper's measure) |" in table and "scripted (deterministic test double" in table
    assert "| billed tokens (cl100k_base: no provider reported usage) |" in table
    assert "| USD on Claude Haiku 4.5 (the paper's model), cached by its rules |" in table
    # #1 was the defaults, asked of no model: the first context figure is the first call's, not #1's 0.
    (firsts,) = [line for line in table.splitlines() if line.startswith("| context tokens per iteration")]
    assert firsts.startswith("| context tokens per iteration, first call / last |")
    assert all(not cell.strip().startswith("0 /") for cell in firsts.split("|")[2:5])
    assert (out / "figure.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (out / "transcripts").iterdir()) == [
        "stateful-42.jsonl",
        "stateful-42.jsonl.gz",
        "stateless-42.jsonl",
        "stateless-42.jsonl.gz",
        "stateless-strong-42.jsonl",
        "stateless-strong-42.jsonl.gz",
    ]
    with gzip.open(out / "transcripts" / "stateful-42.jsonl.gz", "rt") as packed:
        assert packed.read() == (out / "transcripts" / "stateful-42.jsonl").read_text()


@pytest.mark.slow  # six XGBoost trainings; what compare writes is the toy-task test's above
def test_compare_in_parallel_gives_each_modes_trainings_its_share_of_the_cores(
    tmp_path: Path, server_env: None
):
    out = tmp_path / "out"
    args = "compare --task hpo-covertype --llm scripted --iterations 2 --seeds 42 --parallel --out"
    assert main([*args.split(), str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    with sqlite3.connect(out / "runs.db") as db:
        firsts = db.execute("SELECT params_json FROM experiments WHERE iteration = 1").fetchall()
        configs = [json.loads(row[0]) for row in db.execute("SELECT config_json FROM runs")]
    assert [json.loads(params) for (params,) in firsts] == [HPOParams().model_dump()] * 3
    assert all(run["totals"]["experiments"] == 2 for run in results["runs"])
    # --parallel shares the cores: each mode's trainings get a third (XGBoost teams that outnumber the
    # cores spin-wait for each other); the runs recorded it.
    threads = max(1, (os.cpu_count() or 1) // 3)
    assert results["parallel"] is True and results["hpo_threads"] == threads
    assert [c["options"]["limits"]["threads"] for c in configs] == [threads] * 3
    assert f"{threads} training thread(s) each" in (out / "table.md").read_text()


def _run(mode: str, full: list[int], experiments: int | None = None, cacheable: int = 0) -> dict[str, Any]:
    rows = [
        {
            "iteration": i,
            "context_tokens": t,
            "symmetric_tokens": t,
            "full_tokens": t,
            "cache_weighted_tokens": t,
            "output_tokens": 0,
        }
        for i, t in enumerate(full, start=1)
    ]
    totals = {
        "context_tokens": sum(full),
        "symmetric_tokens": sum(full),
        "full_tokens": sum(full),
        "cache_weighted_tokens": sum(full),
        "output_tokens": 0,
        "wall_s": 1.0,
        "llm_calls": len(full),
        "experiments": len(full) if experiments is None else experiments,
        "best_metric": 0.5,
        "cacheable_calls": cacheable,
    }
    return {"mode": mode, "per_iteration": rows, "totals": totals}


def test_the_crossover_is_where_stateful_cumulative_full_tokens_fall_below_for_good():
    # cumulative: stateless 100, 300, 600, 1000; stateful 250, 350, 450, 550
    assert crossover([_run("stateless", [100, 200, 300, 400]), _run("stateful", [250, 100, 100, 100])]) == 3
    # below at 2, above again at 3, below for good from 4
    runs = [_run("stateless", [100, 100, 100, 100]), _run("stateful", [150, 40, 200, 5])]
    assert crossover(runs) == 4
    assert crossover([_run("stateless", [10, 10]), _run("stateful", [50, 50])]) is None


def test_the_summary_averages_over_seeds_and_divides_stateless_by_stateful():
    runs = [
        _run("stateless", [100, 300]),
        _run("stateless", [200, 400]),
        _run("stateful", [50, 50]),
        _run("stateful", [50, 150]),
    ]
    summary = summarise(runs)
    assert summary["stateless"]["context_tokens"] == 500 and summary["stateful"]["context_tokens"] == 150
    assert (
        summary["ratio"]["context_tokens"] == 3.33 and summary["stateful"]["llm_calls_per_experiment"] == 1.0
    )


def test_no_ratio_is_given_when_the_modes_recorded_different_numbers_of_experiments():
    summary = summarise([_run("stateless", [100, 300], experiments=2), _run("stateful", [50], experiments=1)])
    assert summary["ratio"] == {}
    assert "different numbers of experiments (stateless [2], stateful [1]" in summary["ratio_note"]
    assert "full_tokens_crossover_iteration" not in summary  # nor a per-iteration comparison


def test_cache_weighted_says_it_equals_full_when_no_prefix_reached_the_providers_minimum():
    summary = summarise([_run("stateless", [100]), _run("stateful", [50])])
    assert "below the provider's minimum cacheable length" in summary["stateful"]["cache_weighted_note"]
    cached = summarise([_run("stateless", [100]), _run("stateful", [50], cacheable=1)])
    assert "cache_weighted_note" not in cached["stateful"]


def test_a_stateful_only_study_prints_no_comparison_sentence(tmp_path: Path):
    results = {
        "task": "hpo-covertype",
        "iterations": 1,
        "seeds": [42],
        "llm": "scripted",
        "window": "auto",
        "runs": [_run("stateful", [50])],
        "summary": summarise([_run("stateful", [50])]),
    }
    write_table(results, tmp_path / "table.md")
    assert "cumulative full tokens" not in (tmp_path / "table.md").read_text()


def test_when_one_mode_recorded_nothing_the_table_makes_no_per_iteration_claim(tmp_path: Path):
    # codeopt seed 123 on the real model: stateful recorded 0 experiments in 10 calls, and the table
    # said its cumulative tokens "never fall below stateless's" though it spent a quarter as many.
    runs = [_run("stateless", [100, 300], experiments=2), _run("stateful", [], experiments=0)]
    results = {"task": "codeopt-records", "iterations": 2, "seeds": [42], "llm": "openai", "window": "auto"}
    write_table({**results, "runs": runs, "summary": summarise(runs)}, tmp_path / "table.md")
    table = (tmp_path / "table.md").read_text()
    assert "cumulative full tokens" not in table and "No ratio: the modes recorded different" in table


def test_calls_that_recorded_no_experiment_still_count_in_the_totals(tmp_path: Path):
    tokens = {"fixed": 10, "system": 5, "messages": 20, "output": 3, "context": 23, "symmetric": 28}
    line = {
        "ts": "2026-11-30T12:00:01+00:00",
        "iteration": 1,
        "request": {"system": "You tune.", "messages": [{"role": "user", "text": "Next?"}]},
        "tokens": {**tokens, "full": 33, "cache_weighted": 33.0, "cacheable": False},
    }
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("\n".join(json.dumps(line) for _ in range(3)) + "\n")
    run = Run(
        id="r-1", name=None, task="toy-quadratic", status="stopped", budget=5, used=0, target=None, seed=1,
        metric_name="score", direction="max", created_at="2026-11-30T12:00:00+00:00",
        finished_at="2026-11-30T12:00:09+00:00",
    )  # fmt: skip
    result = AgentResult(
        run_id="r-1", mode="stateful", stop_reason="failures", detail="3 refusals in a row", experiments=0,
        llm_calls=3, best_metric=None, transcript=str(transcript), scripted=True, run=run, history=[],
    )  # fmt: skip
    record = run_record("stateful", 1, result)
    assert record["per_iteration"] == [] and record["totals"]["experiments"] == 0
    assert record["totals"]["context_tokens"] == 69 and record["totals"]["full_tokens"] == 99
    assert record["totals"]["symmetric_tokens"] == 84


def test_the_best_so_far_follows_the_servers_kept_flags_and_the_table_shows_its_interval(tmp_path: Path):
    from autoresearch_mcp.contract.models import BestResult, Experiment

    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    stamp = "2026-11-30T12:00:0{}+00:00"
    history = [
        Experiment(
            id=i,
            run_id="r-1",
            iteration=i,
            params={},
            artifact_version=i,
            status="ok",
            metric=metric,
            kept=kept,
            started_at=stamp.format(i),
            finished_at=stamp.format(i),
        )
        for i, (metric, kept) in enumerate([(2.0, True), (2.3, False), (2.2, True)], start=1)
    ]
    best = BestResult(iteration=3, metric=2.2, params={}, artifact_version=3, low=2.05, high=2.31)
    run = Run(
        id="r-1", name=None, task="codeopt-records", status="exhausted", budget=3, used=3, target=None, seed=42,
        metric_name="speedup", direction="max", best=best, created_at=stamp.format(0), finished_at=stamp.format(4),
    )  # fmt: skip
    result = AgentResult(
        run_id="r-1", mode="stateful", stop_reason="budget", detail="", experiments=3, llm_calls=3,
        best_metric=2.2, transcript=str(transcript), scripted=True, run=run, history=history,
    )  # fmt: skip
    record = run_record("stateful", 42, result)
    # #2's 2.3 was within the noise (not kept): the best stays 2.0 until #3 is kept.
    assert [row["best_metric"] for row in record["per_iteration"]] == [2.0, 2.0, 2.2]
    assert (record["totals"]["best_low"], record["totals"]["best_high"]) == (2.05, 2.31)
    results = {
        "task": "codeopt-records", "iterations": 3, "seeds": [42], "llm": "scripted", "window": "auto",
        "runs": [record], "summary": summarise([record]),
    }  # fmt: skip
    write_table(results, tmp_path / "table.md")
    assert (
        "Best metric of each run with its 95% interval: stateful seed 42: 2.2 [2.05, 2.31]."
        in (tmp_path / "table.md").read_text()
    )


def test_the_figure_is_drawn_when_no_experiment_of_a_mode_scored(tmp_path: Path):
    """Every version crashed (a small model's first rewrites do): the best-so-far line has gaps."""
    runs = [_run("stateless", [100, 120]), _run("stateful", [50, 55])]
    for run in runs:
        for row in run["per_iteration"]:
            row["best_metric"] = None if run["mode"] == "stateful" else 1.5
    results = {"task": "codeopt-records", "iterations": 2, "seeds": [42], "llm": "scripted", "window": "auto",
               "runs": runs, "summary": summarise(runs)}  # fmt: skip
    write_figure(results, tmp_path / "figure.png")
    assert (tmp_path / "figure.png").stat().st_size > 10_000
