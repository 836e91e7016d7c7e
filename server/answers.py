"""Each tool's answer as a model reads it: a few lines of text, where programs read the structured
content (unchanged, the contract's models).

A host shows its model the text content of a result, and often nothing else; pretty-printed JSON of the
whole record spent a thousand characters on ids, timestamps and empty fields, and left out why a result
was or was not kept. Each rendering here says what a model acts on next: the outcome, its metrics, the
best and the budget, and why, in that order; train.py as plain text, once.
"""

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.models import (
    JUDGED_BY_WORDS,
    ArtifactInfo,
    Experiment,
    ExperimentResult,
    HistoryPage,
    JobInfo,
    Note,
    RunList,
    StartedRun,
    SummaryText,
)
from autoresearch_mcp.contract.profile import ProfileResult
from autoresearch_mcp.server.store.artifacts import version_name
from autoresearch_mcp.server.summary import secondary
from autoresearch_mcp.server.tasks.intervals import best_suffix

EXPERIMENT_CHARS = 400
ERROR_CHARS = 120
ROW_CHARS = 120
NOTE_CHARS = 50
PARAMS_CHARS = 24  # the least of a history row the params keep
METRICS_SHOWN = 4  # besides the task's metric
PROFILE_FUNCTIONS = 8
LINE_CHARS = 80


@dataclass(frozen=True)
class Reading:
    """What a rendering needs of the run's task: its metric's name, its params' defaults (params are
    shown as what differs from them), its params in words (start_run's answer)."""

    metric: str = "metric"
    defaults: dict[str, Any] = field(default_factory=dict)
    params_help: str = ""
    files: list[str] = field(default_factory=list)  # the task's editable files: what a version is

    def version(self, version: int) -> str:
        return version_name(self.files, version)

    def params(self, params: dict[str, Any], rest: str = " (others default)") -> str:
        changed = {k: v for k, v in params.items() if self.defaults.get(k, object()) != v}
        if not changed:
            return "defaults"
        shown = _params(changed)
        return shown + rest if len(changed) < len(params) else shown


def number(value: float) -> str:
    """A measured value to 5 significant digits: enough to tell results apart, no float noise."""
    return f"{value:.5g}"


def seconds(value: float) -> str:
    """A run time as a reader compares them: `0.42s`, `8.1s`, `95s`."""
    return f"{value:.2g}s" if value < 10 else f"{value:.0f}s"


def _params(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={number(v) if isinstance(v, float) else v}" for k, v in params.items())


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _closed(text: str) -> str:
    """A cut text with the parentheses it opened closed: an error cut inside `(pid 12)` ran on into the
    rest of the answer."""
    return text + ")" * max(text.count("(") - text.count(")"), 0)


def _secondary(exp: Experiment, metric: str) -> str:
    return ", ".join(f"{k} {number(v)}" for k, v in secondary(exp.metrics, metric, METRICS_SHOWN))


def experiment_text(result: ExperimentResult, reading: Reading) -> str:
    """`#3 ok: macro_f1 0.74123 (precision 0.75, ...); params ...; best 0.74123 (#3); 12 of budget left.
    Kept: ...` at most EXPERIMENT_CHARS, the verdict's sentence last and never cut."""
    exp, metric = result.experiment, reading.metric
    head = f"#{exp.iteration} {exp.status}" + (f" in {seconds(exp.duration_s)}" if exp.duration_s else "")
    if exp.metric is not None:
        head += f": {metric} {number(exp.metric)}{best_suffix(exp.metrics, metric, level=True)}"
    secondary = _secondary(exp, metric)
    if exp.status not in ("ok", "running") and exp.error_tail and exp.error_tail.strip():
        secondary = _closed(error_headline(exp.error_tail)[:ERROR_CHARS])
    if secondary:
        head += f" ({secondary})"
    parts = [head]
    if exp.params:
        parts.append(f"params {reading.params(exp.params)}")
    else:
        parts.append(reading.version(exp.artifact_version))
    if result.best is not None and not result.is_new_best:
        parts.append(f"best {number(result.best.metric)} (#{result.best.iteration})")
    left = f"budget left {result.budget_left}"
    parts.append(left if result.run_status == "running" else f"{left}, run {result.run_status}")
    why = _sentence(result.message or ("Kept: a new best." if result.is_new_best else "Not kept."))
    body = _clip("; ".join(parts) + ".", EXPERIMENT_CHARS - len(why) - 1)
    return f"{body} {why}"


def _sentence(text: str) -> str:
    """The verdict as one sentence: capitalised, ended with a full stop."""
    text = " ".join(text.split())
    text = text[:1].upper() + text[1:]
    return _clip(text if text.endswith(".") else text + ".", EXPERIMENT_CHARS // 2)


def history_text(page: HistoryPage, reading: Reading) -> str:
    """A table: one row per experiment (iteration, status, run time, metric, kept, params or version,
    note or error), each at most ROW_CHARS, then where the page stands. The note keeps its share of a
    row: the params are cut first (the structured answer has them whole), as the note is the only
    record of why an experiment was tried."""
    lines = [f"# | status | {reading.metric} | kept | time | params (vs defaults) or version | note"]
    for exp in page.experiments:
        value = number(exp.metric) if exp.metric is not None else "-"
        what = reading.params(exp.params, rest="") if exp.params else f"v{exp.artifact_version}"
        said = exp.note or ""
        if exp.status not in ("ok", "running") and exp.error_tail and exp.error_tail.strip():
            said = error_headline(exp.error_tail)
        took = seconds(exp.duration_s) if exp.duration_s else ""
        row = f"{exp.iteration} | {exp.status} | {value} | {'yes' if exp.kept else ''} | {took} | "
        tail = f" | {_clip(said, NOTE_CHARS)}" if said else ""
        lines.append(row + _clip(what, max(ROW_CHARS - len(row) - len(tail), PARAMS_CHARS)) + tail)
    shown = len(page.experiments)
    where = f"{shown} of {page.total}"
    if page.next_offset is not None:
        where += f"; more from offset={page.next_offset}"
    lines.append(where)
    return "\n".join(lines)


def artifact_text(info: ArtifactInfo, reading: Reading) -> str:
    """The version, and the source as plain text when the answer carries it."""
    head = f"{reading.version(info.version)} ({info.lines} lines): {info.description}"
    return head if info.source is None else f"{head}\n{info.source}"


def started_text(started: StartedRun, reading: Reading) -> str:
    lines = [
        f"run_id {started.run_id}",
        f"{started.task_description} Experiments: {started.experiment_tool}; the metric is "
        f"{JUDGED_BY_WORDS[started.judged_by]}"
        + (f"; each is stopped after {started.timeout_s:g} s." if started.timeout_s else "."),
    ]
    if reading.params_help:
        lines.append(f"params:\n{reading.params_help}")
    return "\n".join([*lines, started.summary])


def job_text(info: JobInfo, reading: Reading) -> str:
    job, result = info.job, info.result
    line = f"job {job.id}: {job.status} (#{job.iteration})"
    if job.error:
        line += f": {_closed(_clip(job.error, ERROR_CHARS))}"
    if result is not None:
        if job.error and result.experiment.status == "interrupted":  # why is the job's error, said above
            exp = result.experiment.model_copy(update={"error_tail": None})
            result = result.model_copy(update={"experiment": exp})
        line += "\n" + experiment_text(result, reading)
    return line


def runs_text(runs: RunList) -> str:
    lines = []
    for run in runs.runs:
        best = (
            f"best {run.metric_name} {number(run.best.metric)} (#{run.best.iteration})"
            if run.best
            else "no best"
        )
        lines.append(f"{run.id} {run.task}: {run.status}, {run.used}/{run.budget} used, {best}")
    return "\n".join(lines) or "no runs"


def profile_text(result: ProfileResult, reading: Reading) -> str:
    """`slow.py v2 (how it was profiled):`, then one line per function, hottest first (share, time,
    where), the time outside the profiled files, the hottest function's slowest lines."""
    profile = result.profile
    if profile is None:
        return result.note or "no profile"
    lines = [f"{reading.version(result.version)} ({profile.how}):"]
    for f in profile.functions[:PROFILE_FUNCTIONS]:
        lines.append(f"{f.name} {f.share:.0%}, {number(f.ms)} ms ({f.file}:{f.first_line}-{f.last_line})")
    if len(profile.functions) > PROFILE_FUNCTIONS:
        lines.append(
            f"{len(profile.functions) - PROFILE_FUNCTIONS} more, each under {int(profile.functions[PROFILE_FUNCTIONS].share * 100) + 1}%"
        )
    if profile.other_share >= 0.005:
        lines.append(f"outside the profiled files {profile.other_share:.0%}")
    if profile.hot and profile.lines:
        lines.append(f"slowest lines of {profile.hot}:")
        lines.extend(
            f"  {line.line} {line.share:.0%} {_clip(line.text, LINE_CHARS)}" for line in profile.lines
        )
    return "\n".join(lines)


def plain_text(result: BaseModel, reading: Reading) -> str:
    """The text of any tool's answer; a result without a rendering of its own is compact JSON."""
    match result:
        case ExperimentResult():
            return experiment_text(result, reading)
        case HistoryPage():
            return history_text(result, reading)
        case ArtifactInfo():
            return artifact_text(result, reading)
        case SummaryText():
            return result.summary
        case StartedRun():
            return started_text(result, reading)
        case JobInfo():
            return job_text(result, reading)
        case RunList():
            return runs_text(result)
        case Note():
            return f"note {result.id} ({result.kind}) recorded"
        case ProfileResult():
            return profile_text(result, reading)
    return result.model_dump_json(exclude_none=True)
