"""The bounded view of a run that the LLM sees every turn.

Its size does not grow with the number of experiments: a fixed number of lines, each of capped length.
Tokens are the product here (it is re-sent every turn), so it is terse: parameters are shown only
where they differ from the defaults (best) or from the best (recent lines). The full history stays in
the store and is reachable with get_experiment_history.
"""

from typing import Any

from autoresearch_mcp.contract.models import Experiment, Run
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.tasks.base import Task

LAST_EXPERIMENTS = 5
LAST_NOTES = 2
NOTE_CHARS = 120
ERROR_CHARS = 70
DESCRIPTION_CHARS = 40
STATUS_ORDER = ("ok", "crash", "timeout", "incorrect", "interrupted", "running")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _changed(params: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if reference.get(key) != value}


def experiment_line(
    exp: Experiment, task: Task, best: Experiment | None, descriptions: dict[int, str]
) -> str:
    """`#7 ok 0.7601 max_depth=10` — status, metric, and what differs from the best."""
    parts = [f"#{exp.iteration}", exp.status]
    if exp.metric is not None:
        parts.append(f"{exp.metric:.4f}")
    if best is not None and exp.id == best.id:
        parts.append("(best)")
    elif exp.params:
        reference = best.params if best is not None else _defaults(task)
        changed = _changed(exp.params, reference)
        parts.append(task.format_params(changed) if changed else "same params as best")
    if not exp.params or (best is not None and exp.artifact_version != best.artifact_version):
        description = descriptions.get(exp.artifact_version, "")
        parts.append(
            f"v{exp.artifact_version}" + (f" {_clip(description, DESCRIPTION_CHARS)}" if description else "")
        )
    if exp.status not in ("ok", "running") and exp.error_tail and exp.error_tail.strip():
        parts.append("error: " + _clip(exp.error_tail.strip().splitlines()[0], ERROR_CHARS))
    return _clip(" ".join(parts), 240)


def _defaults(task: Task) -> dict[str, Any]:
    return task.params_model().model_dump()


def render_summary(store: Store, run: Run, task: Task) -> str:
    goal = "higher" if task.direction == "max" else "lower"
    target = (
        f", target {task.metric}{'>=' if task.direction == 'max' else '<='}{run.target:g}"
        if run.target
        else ""
    )
    lines = [f"Run {run.id} {task.name}: {run.status}, {run.used}/{run.budget} used{target}"]
    best = store.best_experiment(run.id, run.direction)
    versions = {v.version: v.description for v in store.artifacts.versions(run.id)}
    if best is None or best.metric is None:
        lines.append(f"Best: none yet ({task.metric}, {goal} is better)")
    else:
        changed = _changed(best.params, _defaults(task))
        params = f": {task.format_params(changed)}" if changed else (": defaults" if best.params else "")
        lines.append(
            f"Best {task.metric}={best.metric:.4f} (#{best.iteration}, train.py v{best.artifact_version}){params}"
        )
    current = max(versions)
    if current > 1:
        lines.append(f"train.py now v{current}: {_clip(versions[current], 60)}")
    recent, _ = store.experiments(run.id, last=LAST_EXPERIMENTS)
    if recent:
        lines.append("Last (changes vs best):" if task.params_model.model_fields else "Last:")
        lines.extend(experiment_line(exp, task, best, versions) for exp in recent)
    for kind, label in (("strategy", "Strategy"), ("failed", "Failed")):
        notes = store.notes.list(run.id, kind, last=LAST_NOTES)
        if notes:
            lines.append(f"{label}: " + " | ".join(_clip(note.text, NOTE_CHARS) for note in notes))
    counts = store.status_counts(run.id)
    refused = store.events.counts(run.id).get("refusal", 0)
    tally = [f"{status} {counts[status]}" for status in STATUS_ORDER if counts.get(status)]
    if refused:
        tally.append(f"refused {refused}")
    streak = store.consecutive_failures(run.id)
    if streak:
        tally.append(f"{streak} failures in a row")
    if tally:
        lines.append("Counts: " + ", ".join(tally))
    return "\n".join(lines)
