"""What a person watching `autoresearch-mcp run` sees while the agent works.

One line per experiment (its status, metric, time, and why it failed) and per refusal, everywhere. On a
terminal those lines scroll above a panel refreshed four times a second with the run, its budget, the
best result, the tokens used, and what is happening now (the experiment that is running, or the wait
for the model) with a spinner and its elapsed time, so a 50-second training does not look like a hang;
a long line wraps between words, never inside an id or a value. Anywhere else (a pipe, a log file, CI)
the lines are plain and never wrapped. At the end: the panel once more from the run as the server has
it, then the run's status in the database's words, the best result, the tokens, and where the run is
kept with the commands that show it.
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console, Group
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from autoresearch_mcp.client.check import AgentResult
from autoresearch_mcp.client.connect import ResearchClient, ToolOutcome
from autoresearch_mcp.contract.env import default_db_path
from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.models import ExperimentResult, Run
from autoresearch_mcp.contract.tools import EXPERIMENT_TOOLS, ToolName
from autoresearch_mcp.contract.transcript import budget_share, load_transcript, totals

PROG = "autoresearch-mcp"
SCRIPTED_WHAT = "a deterministic test double, no language model was used"
SCRIPTED_NOTE = f"scripted backend: {SCRIPTED_WHAT}"


REASON_CHARS = 300  # why an experiment failed, on its line: `show` has the whole tail


def short_params(params: dict[str, Any], limit: int = 6) -> str:
    items = [f"{k}={v}" for k, v in params.items()]
    return " ".join(items[:limit]) + (" ..." if len(items) > limit else "")


def all_params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def failure_reason(tail: str | None) -> str:
    """The line that says why an experiment failed, clipped between words (the run line; `show` has
    all of it)."""
    headline = error_headline(tail or "")
    if len(headline) <= REASON_CHARS:
        return headline
    return headline[:REASON_CHARS].rsplit(" ", 1)[0] + " …"


class LiveView:
    """The state of one run as the agent sees it, fed by the agent's progress events (after each LLM
    call) and by `ObservedClient` (before and after each tool call)."""

    def __init__(
        self,
        mode: str,
        llm: str,
        *,
        plain: bool = False,
        out: TextIO | None = None,
        token_budget: int | None = None,
        console: Console | None = None,
    ) -> None:
        self.mode, self.llm, self.plain, self.token_budget = mode, llm, plain, token_budget
        self.out = out or sys.stdout
        self.console = console  # a terminal's: lines go above the live panel
        self.run: Run | None = None
        self.used = 0
        self.last_iteration = 0  # the run's latest experiment: the next one is numbered after it
        self.best: tuple[float, int] | None = None
        self.calls = 0
        self.context = self.full = 0
        self.activity = "connecting to the server"
        self.since = time.monotonic()
        self.spinner = Spinner("dots")

    # -- events ---------------------------------------------------------------------------------
    def started(self, run: Run, last_iteration: int | None = None) -> None:
        self.run, self.used = run, run.used
        self.last_iteration = run.used if last_iteration is None else last_iteration
        if run.best is not None:
            self.best = (run.best.metric, run.best.iteration)
        self._now("waiting for the model")
        line = f"run {run.id} ({run.task}, {self.mode}, {self.llm}): {run.used}/{run.budget} used"
        if run.from_run:
            line += f", started from {run.from_run}"
            if run.best is not None and run.best.iteration == 1:
                line += f" (its best re-measured as #1: {run.metric_name}={run.best.metric:.4f})"
        self._line(line)

    def __call__(self, event: dict[str, Any]) -> None:
        """An LLM call ended (the agent's progress callback)."""
        self.context += event["tokens"]["context"]
        self.full += event["tokens"]["full"]
        self.calls = event.get("calls", self.calls)
        self._now("the model answered")

    def tool_started(self, tool: str, arguments: dict[str, Any]) -> None:
        if tool in EXPERIMENT_TOOLS:
            params = arguments.get("params")
            what = f" {short_params(params)}" if isinstance(params, dict) and params else ""
            self._now(f"experiment #{self.last_iteration + 1} running ({tool}{what})")
        elif tool not in (ToolName.GET_EXPERIMENT_HISTORY, ToolName.GET_RUN_SUMMARY):
            self._now(f"calling {tool}")

    def tool_ended(self, tool: str, outcome: ToolOutcome) -> None:
        if (
            tool == ToolName.GET_JOB
            and outcome.ok
            and isinstance(recorded := (outcome.data or {}).get("result"), dict)
        ):
            # A job of a batch (--batch), collected: shown as the experiment it recorded.
            tool, outcome = ToolName.RUN_EXPERIMENT, outcome.model_copy(update={"data": recorded})
        if not outcome.ok:
            self._line(f"refused {tool}: {' '.join(outcome.text.split())[:160]}")
        elif tool in EXPERIMENT_TOOLS and outcome.data is not None:
            result = ExperimentResult.model_validate(outcome.data)
            exp = result.experiment
            self.last_iteration = max([exp.iteration, *(again.iteration for again in result.reevaluations)])
            # From the budget the server reports: an interrupted experiment keeps its number, uncharged.
            if self.run is not None:
                self.used = self.run.budget - result.budget_left
            else:
                self.used = max(
                    [self.used, exp.iteration, *(again.iteration for again in result.reevaluations)]
                )
            if result.best is not None:
                self.best = (result.best.metric, result.best.iteration)
            metric = "-" if exp.metric is None else f"{exp.metric:.4f}"
            took = "" if exp.duration_s is None else f" in {exp.duration_s:.1f}s"
            if result.is_new_best:
                best = " (new best)"
            else:
                best = f" (best {self.best[0]:.4f} at #{self.best[1]})" if self.best else ""
            name = self.run.metric_name if self.run else "metric"
            budget = f"{self.used}/{self.run.budget}" if self.run else str(self.used)
            if self.token_budget is not None:
                budget += f" used; tokens {budget_share(self.full, self.token_budget)}"
            else:
                budget += " used"
            why = f": {failure_reason(exp.error_tail)}" if exp.status not in ("ok", "running") else ""
            self._line(f"#{exp.iteration} {exp.status} {name}={metric}{took}{best} [{budget}]{why}")
            for again in result.reevaluations:  # start_run's reeval_seeds: the would-be best on more seeds
                value = "-" if again.metric is None else f"{again.metric:.4f}"
                self._line(f"  #{again.iteration} {again.status} {name}={value}: {again.note}")
            if result.message and (result.reevaluations or self._unexpected(result)):
                self._line(f"  {result.message}")
        self._now("waiting for the model")

    def _unexpected(self, result: ExperimentResult) -> bool:
        """A keep decision the line does not explain: a metric past the best's that was not kept (a
        noisy task wants it surely better), or a first result that was not kept."""
        exp, best = result.experiment, result.best
        if exp.status != "ok" or exp.metric is None or result.is_new_best:
            return False
        if best is None:
            return True
        higher = self.run is None or self.run.direction == "max"
        return exp.metric > best.metric if higher else exp.metric < best.metric

    # -- rendering ------------------------------------------------------------------------------
    def _now(self, activity: str) -> None:
        self.activity, self.since = activity, time.monotonic()

    def _line(self, text: str) -> None:
        if self.plain:
            print(text, file=self.out, flush=True)
        elif self.console is not None:  # above the live panel, which rich redraws below it
            self.console.print(Text(text))

    def __rich__(self) -> Group:
        table = Table(title=Text(f"autoresearch-mcp · {self.mode} · {self.llm}"), show_header=False)
        if self.run is not None:
            table.add_row("run", Text(f"{self.run.id} ({self.run.task})"))
            if self.run.from_run:
                table.add_row("from", Text(self.run.from_run))
            table.add_row("budget", Text(f"{self.used}/{self.run.budget} used"))
            name = self.run.metric_name
            table.add_row("best", Text(f"{name} {self.best[0]:.4f} (#{self.best[1]})" if self.best else "-"))
        table.add_row("LLM calls", Text(str(self.calls)))
        table.add_row("tokens", Text(tokens_text(self.context, self.full, self.token_budget)))
        elapsed = time.monotonic() - self.since
        self.spinner.update(text=Text(f"{elapsed:3.0f}s  {self.activity}"))
        return Group(table, self.spinner)


def tokens_text(context: int, full: int, token_budget: int | None) -> str:
    """The panel's tokens row; with a token budget, the full tokens against it."""
    if token_budget is None:
        return f"context {context:,} · full {full:,}"
    return f"context {context:,} · full {budget_share(full, token_budget)}"


def where_to_look(args: argparse.Namespace, run_id: str) -> list[str]:
    """Where the run is kept and the commands that show it."""
    if args.server_url:
        at = f" --server-url {args.server_url}"
        return [f"stored by the server at {args.server_url}; look at it with:", f"  {PROG} show {run_id}{at}"]
    db = Path(args.db).expanduser().resolve() if args.db else default_db_path()
    flag = f" --db {db}" if args.db else ""
    commands = [
        (f"{PROG} show {run_id}{flag}", "summary, best, experiments"),
        (f"{PROG} report {run_id}{flag}", "one HTML file"),
        (f"{PROG} dashboard{flag}", "every run, live, in the browser"),
    ]
    width = max(len(command) for command, _ in commands)
    return [f"stored in {db}; look at it with:"] + [f"  {c.ljust(width)}  # {what}" for c, what in commands]


def result_lines(result: AgentResult, args: argparse.Namespace) -> list[str]:
    """The final lines: the run's status as the database has it, best, tokens, where to look."""
    total = totals(load_transcript(result.transcript))
    run = result.run
    status = run.status if run else "stopped"
    lines = [f"{result.mode} run {result.run_id} {status}: {result.detail}"]
    if run is not None and run.from_run:
        lines.append(f"started from {run.from_run}")
    if run is not None and run.best is not None:
        lines.append(
            f"best {run.metric_name} {run.best.metric:.4f} at #{run.best.iteration}"
            f" ({all_params(run.best.params) or 'train.py v' + str(run.best.artifact_version)})"
        )
    else:
        lines.append("no successful experiment")
    per = total.calls / result.experiments if result.experiments else 0.0
    lines.append(
        f"{plural(result.experiments, 'experiment')}, {plural(result.llm_calls, 'LLM call')} ({per:.2f} per experiment);"
        f" tokens: context {total.context:,} · full {total.full:,} · cache-weighted {total.cache_weighted:,.0f}"
        f" · output {total.output:,}"
    )
    if result.token_budget is not None:
        lines.append(f"full tokens {budget_share(result.full_tokens, result.token_budget)}")
    lines += where_to_look(args, result.run_id)
    lines.append(f"transcript: {result.transcript}")
    if result.scripted:
        lines.append(SCRIPTED_NOTE)
    return lines


def final_panel(view: LiveView, result: AgentResult) -> Table:
    """The live panel once more, from the run as the server has it at the end (all text as Text: a run
    name or a model's finish reason is never read as rich markup)."""
    run = result.run
    table = Table(title=Text(f"autoresearch-mcp · {view.mode} · {view.llm}"), show_header=False)
    if run is not None:
        table.add_row("run", Text(f"{run.id} ({run.task})"))
        if run.from_run:
            table.add_row("from", Text(run.from_run))
        table.add_row("status", Text(run.status))
        table.add_row("budget", Text(f"{run.used}/{run.budget} used"))
        best = f"{run.metric_name} {run.best.metric:.4f} (#{run.best.iteration})" if run.best else "-"
        table.add_row("best", Text(best))
    table.add_row("LLM calls", Text(str(result.llm_calls)))
    table.add_row("tokens", Text(tokens_text(view.context, view.full, result.token_budget)))
    return table


class ObservedClient(ResearchClient):
    """The agent's client, telling the view when a tool call starts and ends."""

    def __init__(self, rc: ResearchClient, view: LiveView) -> None:
        super().__init__(rc.client)
        self.view = view

    async def call_tool(self, name: ToolName | str, arguments: dict[str, Any]) -> ToolOutcome:
        self.view.tool_started(name, arguments)
        outcome = await super().call_tool(name, arguments)
        self.view.tool_ended(name, outcome)
        return outcome
