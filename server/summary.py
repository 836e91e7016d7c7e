"""The bounded view of a run that the LLM sees every turn.

Its size does not grow with the number of experiments: a fixed number of lines, each of capped length.
Tokens are the product here (it is re-sent every turn), so it is terse: parameters are shown only
where they differ from the defaults (best) or from the best (recent lines), and the best's own row
among the recent ones is only its number. The full history stays in the store and is reachable with
get_experiment_history.
"""

import functools
from typing import Any, Literal

from pydantic import BaseModel

from autoresearch_mcp.contract.arguments import SUMMARY_LAST, SUMMARY_MAX_LAST
from autoresearch_mcp.contract.errors import ResearchError, error_headline
from autoresearch_mcp.contract.models import Experiment, Run
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.contract.variety import bounds_of, change_of, least_varied_first
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.store.artifacts import version_name
from autoresearch_mcp.server.store.experiments import better
from autoresearch_mcp.server.suggest import suggestion_line
from autoresearch_mcp.server.tasks.base import Task
from autoresearch_mcp.server.tasks.intervals import best_suffix
from autoresearch_mcp.server.tasks.speed import NOT_SHOWN, SHOWN_FIRST, VERDICT_METRICS

LAST_EXPERIMENTS, MAX_LAST = SUMMARY_LAST, SUMMARY_MAX_LAST


def listed_last(last: int | str) -> int:
    """`last` (a number, or its text in a resource's query) as how many experiments a summary lists,
    or a one-line refusal."""
    if isinstance(last, str) and last.isdigit():
        last = int(last)
    if not isinstance(last, int) or not 1 <= last <= MAX_LAST:
        raise ResearchError(f"last is a number of experiments from 1 to {MAX_LAST}, not {last!r}")
    return last


LAST_NOTES = 2
WORST_SHOWN = 2  # the earlier run's failed approaches a started-from run shows
NOTE_CHARS = 300
ERROR_CHARS = 70
DESCRIPTION_CHARS = 40
STATUS_ORDER = ("ok", "crash", "timeout", "incorrect", "interrupted", "running")
SECONDARY_SHOWN = 4
# Whose words: "neutral" states facts (hosts, outside agents); "small" adds what helps a small local
# model (an order naming a value to change each turn) and leaves out the secondary metrics it does not
# use (the bundled agent, `serve --tools-for`).
Words = Literal["neutral", "small"]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _changed(params: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if reference.get(key) != value}


# What a task's params model gives is the same every turn; building it (the JSON schema above all) was
# most of a render at small sizes, so it is made once per model.
@functools.cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


@functools.cache
def _defaults_of(model: type[BaseModel]) -> dict[str, Any]:
    return model().model_dump()


@functools.cache
def _positions(model: type[BaseModel]) -> dict[str, int]:
    return {name: i for i, name in enumerate(model.model_fields)}


def _in_schema_order(params: dict[str, Any], task: Task) -> dict[str, Any]:
    """Stored params are key-sorted; the model reads them in the order of the task's schema."""
    order = _positions(task.params_model)
    return dict(sorted(params.items(), key=lambda kv: order.get(kv[0], len(order))))


def _digits(store: Store, run: Run) -> int:
    """Significant digits that tell the best from the runner-up (4 at least): on a metric near 0.004,
    4 decimals showed both as 0.0040."""
    top, _ = store.experiments(run.id, order="metric", direction=run.direction, status="ok", limit=2)
    values = [exp.metric for exp in top if exp.metric is not None]
    if len(values) < 2:
        return 4
    return next((d for d in range(4, 13) if f"{values[0]:.{d}g}" != f"{values[1]:.{d}g}"), 12)


def _value(value: float, digits: int | None) -> str:
    """Significant digits, or (None: the small profile's words, as its prompts were tuned on) 4
    decimals."""
    return f"{value:.4f}" if digits is None else f"{value:.{max(4, digits)}g}"


def secondary(
    metrics: dict[str, float], metric: str, limit: int = SECONDARY_SHOWN
) -> list[tuple[str, float]]:
    """The metrics a reader is shown besides the task's: not its interval or mean (best_suffix shows
    them), nor what the keep rule reads (the verdict's sentence says it in words)."""
    own = {
        f"{metric}_low",
        f"{metric}_high",
        f"{metric}_mean",
        "evaluations",
        metric,
        *VERDICT_METRICS,
        *NOT_SHOWN,
    }
    shown = [(name, value) for name, value in metrics.items() if name not in own]
    first = {name: index for index, name in enumerate(SHOWN_FIRST)}
    return sorted(shown, key=lambda item: first.get(item[0], len(first)))[:limit]


def secondary_metrics(metrics: dict[str, float], metric: str) -> str:
    return ", ".join(f"{name} {value:.4g}" for name, value in secondary(metrics, metric))


def experiment_line(
    exp: Experiment,
    task: Task,
    best: Experiment | None,
    descriptions: dict[int, str],
    digits: int | None = None,
    words: Words = "neutral",
) -> str:
    """`#7 0.7601 max_depth=10`: iteration, metric (or status), and the params that differ from the
    best (from the defaults while there is none) on a params task, or the train.py version it ran (a
    code task); the best's own row `#5 (best)`."""
    parts = [f"#{exp.iteration}"]
    is_best = best is not None and exp.id == best.id
    if not (is_best and exp.params):  # a params task's best row: its metric is on the Best line
        parts.append(
            _value(exp.metric, digits) if exp.status == "ok" and exp.metric is not None else exp.status
        )
    if is_best:
        parts.append("(best)")
    else:
        if _looks_better(exp, best, task):  # a better figure than the best's, within its noise
            parts.append(_not_kept(exp, best) if words == "neutral" else "(not kept)")
        if exp.params:
            parts.append(_params_vs(exp, best, task))
    if not exp.params or (best is not None and exp.artifact_version != best.artifact_version):
        description = descriptions.get(exp.artifact_version, "")
        parts.append(
            f"v{exp.artifact_version}" + (f" {_clip(description, DESCRIPTION_CHARS)}" if description else "")
        )
    if exp.status not in ("ok", "running") and exp.error_tail and exp.error_tail.strip():
        parts.append("error: " + _clip(error_headline(exp.error_tail), ERROR_CHARS))
    return _clip(" ".join(parts), 240)


def _looks_better(exp: Experiment, best: Experiment | None, task: Task) -> bool:
    """Whether a row's figure beats the best's although it was not kept (the keep rule asks more than a
    better figure: a speedup's interval above the best's)."""
    if exp.kept or exp.status != "ok" or exp.metric is None or best is None or best.metric is None:
        return False
    return better(exp.metric, best.metric, task.direction)


def _not_kept(exp: Experiment, best: Experiment) -> str:
    """Why a better figure was not kept, as the keep rule said it: a speed task compares the candidate
    with the best of the moment timed beside it (vs_best), not the figures the summary shows."""
    if exp.params == best.params and exp.artifact_version == best.artifact_version:
        return "(not kept: a re-measurement of the best)"
    low, high, against = (exp.metrics.get(f"vs_best{end}") for end in ("_low", "_high", "_iteration"))
    if low is None or high is None or against is None:
        return "(not kept)"
    than = "the original" if against == 0 else f"#{int(against)}"
    return f"(not kept: {'surely slower' if high < 1.0 else 'not surely faster'} than {than})"


def _params_vs(exp: Experiment, best: Experiment | None, task: Task) -> str:
    """An experiment's params as what differs from the best's, or from the defaults while there is no
    best."""
    changed = _changed(exp.params, best.params if best is not None else _defaults(task))
    if changed:
        return task.format_params(_in_schema_order(changed, task))
    return "defaults" if best is None else "same params as best"


def _defaults(task: Task) -> dict[str, Any]:
    return dict(_defaults_of(task.params_model))


def least_varied(store: Store, run: Run, earlier: Run | None, task: Task, best: dict[str, Any]) -> str:
    """The param with the fewest distinct values tried so far, as a change of the best's value: where
    an untried change is most likely. Ties rotate with each experiment (by schema order at first): a
    model that copies the best configuration needs a name to change, and the same name every turn
    stops being read. A run started from an earlier one counts the earlier
    run's experiments too, so it goes on where that run left off instead of varying again, in the
    same order, what it varied most."""
    names = list(task.params_model.model_fields)
    used = run.used + (earlier.used if earlier is not None else 0)
    counts = store.counts.distinct_values(run.id, names, earlier.id if earlier is not None else None)
    ranked = least_varied_first(counts)
    ties = [n for n in ranked if counts[n] == counts[ranked[0]]]
    name = ties[used % len(ties)]
    return change_of(name, bounds_of(_schema(task.params_model), name), best.get(name))


def render_summary(
    store: Store, run: Run, task: Task, words: Words = "neutral", last: int = LAST_EXPERIMENTS
) -> str:
    """Params tasks: the best configuration in full (names once), then recent experiments as what
    differs from it, so a caller can send only its changes (run_experiment with base="best"). A
    finished run says how it ended, and asks for nothing. `last`: how many recent experiments are
    listed (a batch's every result, where several ended since the last turn)."""
    goal = "higher" if task.direction == "max" else "lower"
    target = f", target {'>=' if task.direction == 'max' else '<='}{run.target:g}" if run.target else ""
    # Params work: what differs between experiments is their params. Code work's params, if any, stay
    # as the best's while train.py changes: its summary is by version.
    has_params = bool(task.params_model.model_fields) and task.experiment_tool == ToolName.RUN_EXPERIMENT
    # A params run that is running needs no name or status: the model knows what it tunes (every
    # token here is re-sent each turn).
    head = "" if has_params and run.status == "running" else f"{task.name}: {run.status}, "
    lines = [f"{head}{run.used}/{run.budget} used, {goal} {task.metric} is better{target}"]
    if run.status != "running" and run.finish_reason:
        lines.append(f"Ended: {_clip(run.finish_reason, NOTE_CHARS)}")
    if run.judged_by == "self-reported":  # no trusted step decides: whoever reads the run must know
        lines.append(f"{task.metric} is self-reported: the edited script prints it (no [evaluate])")
    best = store.best_experiment(run.id, run.direction)
    files = task.editable()
    current = store.artifacts.latest_version(run.id)
    recent, _ = store.experiments(run.id, last=last)
    # Only the versions this summary names: reading every version (each a whole train.py) grew with
    # the run on a code task.
    versions = store.artifacts.descriptions(run.id, {current, *(exp.artifact_version for exp in recent)})
    digits = _digits(store, run) if words == "neutral" else None
    counts = store.counts.statuses(run.id)
    if best is None or best.metric is None:
        # Left out, params take the defaults (the task's params schema lists them): params {} is a
        # sound first experiment, an order only the small profile's words give, and only before any
        # experiment. Code work's first is the script as it is, whatever params it has.
        first = words == "small" and has_params and run.status == "running" and not counts
        lines.append("Best: none yet" + (". First experiment: params {} (the defaults)." if first else ""))
    else:
        where = f"#{best.iteration}" + (
            "" if has_params else f", {version_name(files, best.artifact_version)}"
        )
        params = ""
        if best.params:
            # As changes from the defaults: the whole configuration in the fewest tokens, and no full
            # list of values for a reply to copy back unchanged.
            changed = _changed(best.params, _defaults(task))
            shown = task.format_params(_in_schema_order(changed, task))
            params = f": {shown}, others default" if changed else ": defaults"
        others = secondary_metrics(best.metrics, task.metric) if words == "neutral" else ""
        where += f"; {others}" if others else ""
        value = _value(best.metric, digits)
        # the neutral words name the interval's level, as the answers do
        suffix = best_suffix(best.metrics, task.metric, level=words == "neutral")
        lines.append(f"Best {task.metric}={value}{suffix} ({where}){params}")
    if current > 1:
        lines.append(f"{version_name(files, current)} now: {_clip(versions[current], 60)}")
    running = counts.get("running", 0)
    if running:  # measured at once (jobs): listed once, on their own line, so no proposal repeats one
        recent = [exp for exp in recent if exp.status != "running"]
    if recent:
        lines.append("Last (vs best):" if has_params and best is not None else "Last:")
        lines.extend(experiment_line(exp, task, best, versions, digits, words) for exp in recent)
    if running:
        lines.append(running_line(store, run, task, best, running))
    for kind, label in (("strategy", "Strategy"), ("failed", "Failed")):
        notes = store.notes.list(run.id, kind, last=LAST_NOTES)
        if notes:
            lines.append(f"{label}: " + " | ".join(_clip(note.text, NOTE_CHARS) for note in notes))
    earlier = store.get_run(run.from_run) if run.from_run else None  # read once, for both lines
    lines.extend(earlier_run_lines(store, run, earlier, task, words))
    refused = store.counts.events(run.id).get("refusal", 0)
    tally = [f"{status} {counts[status]}" for status in STATUS_ORDER if counts.get(status)]
    if tally == [f"ok {run.used}"] and not refused:
        tally = []  # all ok: the first line says as much
    if refused:
        tally.append(f"refused {refused}")
    failed, refusals = store.counts.consecutive_failures(run.id)
    if failed + refusals:
        # the small profile's agent counts a refusal as a failure of its own streak: its words say so
        # in the few words its prompts were tuned on
        what = "refusals or failures" if refusals and words == "neutral" else "failures"
        tally.append(f"{failed + refusals} {what} in a row")
    if tally:
        lines.append("Counts: " + ", ".join(tally))
    if (suggested := suggestion_line(store, run, task)) is not None:
        lines.append(suggested)
    if words == "small" and has_params and recent and run.status == "running":
        lines.append(
            f"Change at least one value, e.g. {least_varied(store, run, earlier, task, best.params if best else {})}."
        )
    return "\n".join(lines)


RUNNING_SHOWN = 8
RUNNING_LINE_CHARS = 400


def running_line(store: Store, run: Run, task: Task, best: Experiment | None, count: int) -> str:
    """`Running: #16 lr=0.1, #17 max_depth=9`: the experiments not finished yet (queued or running), each
    as what differs from the best (the defaults while there is none); the latest RUNNING_SHOWN, and how
    many more."""
    pending, _ = store.experiments(run.id, status="running", last=RUNNING_SHOWN)
    pending.sort(key=lambda exp: exp.iteration)
    shown = []
    for exp in pending:
        if exp.params:
            what = _params_vs(exp, best, task)
        else:
            what = version_name(task.editable(), exp.artifact_version)
        shown.append(f"#{exp.iteration} {what}")
    more = f" (+{count - len(shown)} more)" if count > len(shown) else ""
    return _clip("Running: " + ", ".join(shown) + more, RUNNING_LINE_CHARS)


EARLIER_LINE_CHARS = 300


def earlier_run_lines(
    store: Store, run: Run, earlier: Run | None, task: Task, words: Words = "neutral"
) -> list[str]:
    """A run started from an earlier one (start_run's from_run): that run's best (metric, where, its
    params), what it measured here as #1, and its latest notes; at most three lines of capped length,
    whatever the length of either run."""
    if earlier is None:
        return []
    head = f"From {earlier.id} ({earlier.status}, {earlier.used}/{earlier.budget} used): "
    best = store.best_experiment(earlier.id, earlier.direction)
    if best is None or best.metric is None:
        lines = [head + "no successful experiment there, nothing re-measured"]
    else:
        where = f"its #{best.iteration}" + (
            "" if best.params else f", {version_name(task.editable(), best.artifact_version)}"
        )
        again = store.experiment_at(run.id, 1)
        if again is None:
            measured = ""
        elif again.status == "ok" and again.metric is not None:
            measured = f"; re-measured here as #1: {again.metric:.4f}"
        else:
            measured = f"; re-measured here as #1: {again.status}"
        params = ""
        if best.params:
            ours = store.best_experiment(run.id, run.direction)
            same = ours is not None and ours.params == best.params
            shown = task.format_params(_in_schema_order(best.params, task))
            params = "; params as Best here" if same else f"; params {shown}"
        lines = [head + f"best {task.metric}={best.metric:.4f} ({where}){measured}{params}"]
    for kind, label in (("strategy", "Earlier strategy"), ("failed", "Earlier failed")):
        notes = store.notes.list(earlier.id, kind, last=LAST_NOTES)
        if notes:
            lines.append(f"{label}: " + " | ".join(_clip(note.text, NOTE_CHARS) for note in notes))
    worst = earlier_worst(store, earlier, task, best, words)
    if worst:
        lines.append("Earlier worst (what differed from its best): " + " | ".join(worst))
    return [_clip(line, EARLIER_LINE_CHARS) for line in lines]


def earlier_worst(
    store: Store, earlier: Run, task: Task, best: Experiment | None, words: Words = "neutral"
) -> list[str]:
    """The earlier run's failed approaches as its experiments show them, for models that write no
    notes (a forced tool call leaves no room for one, and an approach whose row has left the summary
    is tried again): its latest failures, then (params tasks) its worst results."""
    failed = [
        exp
        for status in ("crash", "timeout", "incorrect")
        for exp in store.experiments(earlier.id, status=status, last=WORST_SHOWN)[0]
    ]
    failed.sort(key=lambda exp: exp.iteration, reverse=True)
    shown = failed[:WORST_SHOWN]
    if task.params_model.model_fields and best is not None and len(shown) < WORST_SHOWN:
        flip = "min" if earlier.direction == "max" else "max"
        low, _ = store.experiments(
            earlier.id, order="metric", direction=flip, status="ok", last=WORST_SHOWN - len(shown)
        )
        shown += [exp for exp in low if exp.id != best.id]
    versions = store.artifacts.descriptions(earlier.id, {exp.artifact_version for exp in shown})
    return [experiment_line(exp, task, best, versions, words=words) for exp in shown]
