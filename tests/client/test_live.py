"""The live view of `autoresearch-mcp run`: what is happening now, with its elapsed time, and a panel that
follows every experiment (not only every LLM call)."""

import argparse
import io

from rich.console import Console

from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.client.connect import ToolOutcome
from autoresearch_mcp.client.live import LiveView, final_panel, result_lines
from autoresearch_mcp.contract.models import BestResult, Experiment, ExperimentResult, Run

NOW = "2026-01-01T00:00:00+00:00"


def a_run() -> Run:
    return Run(
        id="r-0123456789",
        name=None,
        task="toy-quadratic",
        status="running",
        budget=3,
        used=0,
        target=None,
        seed=1,
        metric_name="score",
        direction="max",
        created_at=NOW,
    )


def result(iteration: int, metric: float, best: float, new_best: bool) -> ToolOutcome:
    experiment = Experiment(
        id=iteration,
        run_id="r-0123456789",
        iteration=iteration,
        params={"x": 0.1},
        artifact_version=1,
        status="ok",
        metric=metric,
        started_at=NOW,
        duration_s=1.5,
    )
    done = ExperimentResult(
        experiment=experiment,
        is_new_best=new_best,
        best=BestResult(iteration=1, metric=best, params={"x": 0.1}, artifact_version=1),
        budget_left=3 - iteration,
        run_status="running",
    )
    return ToolOutcome(ok=True, text="", data=done.model_dump(mode="json"))


def rendered(view: LiveView) -> str:
    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    console.print(view)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_the_panel_shows_the_experiment_that_is_training_and_how_long_it_has_run():
    view = LiveView("stateful", "scripted")
    view.started(a_run())
    view.tool_started("run_experiment", {"params": {"x": 0.1, "y": 2}})
    view.since -= 42  # as if it had been training for 42 s
    text = rendered(view)
    assert "experiment #1 running (run_experiment x=0.1 y=2)" in text and "42s" in text
    assert "0/3 used" in text


def test_the_panel_follows_each_experiment_and_the_plain_view_prints_one_line_each():
    out = io.StringIO()
    view = LiveView("stateful", "scripted", plain=True, out=out)
    view.started(a_run())
    view.tool_ended("run_experiment", result(1, 0.5, 0.5, True))
    view.tool_ended("run_experiment", result(2, 0.4, 0.5, False))
    view.tool_ended("run_experiment", ToolOutcome(ok=False, text="exact repeat of #1:\nchange x", data=None))
    text = rendered(view)
    assert "2/3 used" in text and "score 0.5000 (#1)" in text and "waiting for the model" in text
    assert out.getvalue().splitlines() == [
        "run r-0123456789 (toy-quadratic, stateful, scripted): 0/3 used",
        "#1 ok score=0.5000 in 1.5s (new best) [1/3 used]",
        "#2 ok score=0.4000 in 1.5s (best 0.5000 at #1) [2/3 used]",
        "refused run_experiment: exact repeat of #1: change x",
    ]


def test_the_plain_view_prints_the_re_evaluations_of_a_would_be_best_and_counts_their_budget():
    out = io.StringIO()
    view = LiveView("stateful", "scripted", plain=True, out=out)
    view.started(a_run())
    first = result(1, 0.5, 0.5, True)
    again = Experiment.model_validate(
        {
            **first.data["experiment"],
            "id": 2,
            "iteration": 2,
            "metric": 0.48,
            "note": "re-evaluation 1/1 of #1 (seed 2)",
        }  # type: ignore[index]
    )
    first.data["reevaluations"] = [again.model_dump(mode="json")]  # type: ignore[index]
    first.data["budget_left"] = 1  # type: ignore[index]  # as the server counts it: #1 and #2 charged
    first.data["message"] = (
        "re-evaluated on 1 more seed(s) (#2): mean score 0.4900 over 2 vs no best yet: kept"  # type: ignore[index]
    )
    view.tool_ended("run_experiment", first)
    assert out.getvalue().splitlines()[1:] == [
        "#1 ok score=0.5000 in 1.5s (new best) [2/3 used]",
        "  #2 ok score=0.4800: re-evaluation 1/1 of #1 (seed 2)",
        "  re-evaluated on 1 more seed(s) (#2): mean score 0.4900 over 2 vs no best yet: kept",
    ]


def test_with_a_token_budget_the_panel_and_each_line_show_the_tokens_spent_against_it():
    out = io.StringIO()
    view = LiveView("stateful", "scripted", plain=True, out=out, token_budget=10_000)
    view.started(a_run())
    view({"run": a_run(), "calls": 1, "tokens": {"context": 900, "full": 8_123}})
    view.tool_ended("run_experiment", result(1, 0.5, 0.5, True))
    assert "context 900 · full 8,123 / 10,000 budget (81%)" in rendered(view)
    assert out.getvalue().splitlines()[-1] == (
        "#1 ok score=0.5000 in 1.5s (new best) [1/3 used; tokens 8,123 / 10,000 budget (81%)]"
    )


def test_the_final_lines_and_panel_say_how_close_the_run_came_to_its_token_budget(tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    done = AgentResult(
        run_id="r-0123456789", mode="stateful", stop_reason="token-budget", detail="token budget reached",
        experiments=1, llm_calls=1, best_metric=None, transcript=str(transcript), scripted=False,
        full_tokens=9_999, token_budget=10_000, run=a_run(),
    )  # fmt: skip
    args = argparse.Namespace(server_url=None, db=str(tmp_path / "runs.db"))
    assert "full tokens 9,999 / 10,000 budget (99%)" in result_lines(done, args)
    view = LiveView("stateful", "scripted")
    view({"run": a_run(), "calls": 1, "tokens": {"context": 900, "full": 9_999}})
    console = Console(file=io.StringIO(), width=160)
    console.print(final_panel(view, done))
    assert "full 9,999 / 10,000 budget (99%)" in console.file.getvalue()  # type: ignore[attr-defined]
