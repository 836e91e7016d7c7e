"""Text that comes from the model or the server (a finish reason, a run name, a table) is printed as
text, so `[/]` or `[bold` in it cannot crash the CLI."""

import argparse
import io

from rich.console import Console

from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.client.live import LiveView, final_panel, result_lines
from autoresearch_mcp.contract.models import Run

MARKUP = "[/] [bold unclosed [/nope] [link=javascript:x]y[/link]"


def _run() -> Run:
    return Run(
        id=MARKUP, name=MARKUP, task=MARKUP, status="stopped", budget=2, used=1, target=None, seed=1,
        metric_name="score", direction="max", created_at="2026-11-30T12:00:00+00:00",
    )  # fmt: skip


def test_a_finish_reason_that_looks_like_markup_is_printed_as_it_is(tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("")
    result = AgentResult(
        run_id="r-1", mode="stateful", stop_reason="llm-done", detail=MARKUP, experiments=0, llm_calls=0,
        best_metric=None, transcript=str(transcript), scripted=False, run=_run(),
    )  # fmt: skip
    args = argparse.Namespace(server_url=None, db=str(tmp_path / "runs.db"))
    out = io.StringIO()
    console = Console(file=out, width=300)
    for line in result_lines(result, args):
        console.print(line, markup=False)
    console.print(final_panel(LiveView("stateful", MARKUP), result))
    assert MARKUP in out.getvalue()


def test_the_live_view_renders_server_text_that_looks_like_markup():
    view = LiveView("stateful", MARKUP)
    view.started(_run())
    view({"run": _run(), "calls": 1, "tokens": {"context": 1, "full": 1}})
    out = io.StringIO()
    Console(file=out, width=300).print(view)
    assert MARKUP in out.getvalue()
