"""What the dashboard and the report show, read from the store and the client transcripts. Reads only."""

import glob
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from autoresearch_mcp.contract.files import edited_files, file_diffs
from autoresearch_mcp.contract.models import Experiment, ExperimentStatus, Note, Run, RunStatus, line_count
from autoresearch_mcp.contract.transcript import (
    TokenTotals,
    budget_use,
    load_transcript,
    totals_by_iteration,
)
from autoresearch_mcp.server.store import Store


class RunRow(BaseModel):
    id: str
    name: str | None
    task: str
    status: RunStatus
    metric_name: str
    direction: Literal["max", "min"]
    best_metric: float | None
    best_iteration: int | None
    used: int
    running: int = Field(default=0, description="experiments being measured now")
    budget: int
    created_at: str
    from_run: str | None = Field(default=None, description="the run it started from (start_run's from_run)")
    scripted: bool = Field(default=False, description="the scripted test double proposed its experiments")
    tags: list[str] = Field(default_factory=list)
    stamp: str = Field(
        description="changes whenever anything the run's page shows changes: the page polls it"
    )


class CurvePoint(BaseModel):
    iteration: int
    status: ExperimentStatus
    metric: float | None
    kept: bool
    best: float | None = Field(description="the best metric over this and every earlier experiment")


class VersionInfo(BaseModel):
    version: int
    description: str
    sha256: str
    parent_version: int | None
    created_at: str
    lines: int


class TokenRow(BaseModel):
    iteration: int
    totals: TokenTotals


class TokenUse(BaseModel):
    """One client transcript of the run (`<run_id>-<mode>.jsonl`), summed per iteration."""

    mode: str
    file: str
    per_iteration: list[TokenRow]
    total: TokenTotals
    token_budget: int | None = Field(
        default=None,
        description="the full tokens the client held its calls to (--token-budget), as its transcript says; "
        "None without one, or in a transcript written before the client recorded it",
    )
    budget_spent: int | None = Field(
        default=None,
        description="the full tokens spent against the budget: the latest session's calls (with --run-id, "
        "those since the resume), so less than total.full after a resume",
    )


class RunDetail(BaseModel):
    run: Run
    stamp: str
    experiments: list[Experiment]
    changes: dict[int, dict[str, Any]] = Field(
        description="iteration -> the params that differ from the best's (all of them before there is "
        "a best, none for the best itself): what the table highlights, as the text summary does"
    )
    edits: dict[int, str] = Field(description="train.py version -> the description of its edit")
    curve: list[CurvePoint]
    versions: list[VersionInfo]
    notes: list[Note]
    tokens: list[TokenUse]


class DiffLine(BaseModel):
    kind: Literal["file", "hunk", "add", "del", "ctx"]
    text: str


class VersionDiff(BaseModel):
    run_id: str
    a: int
    b: int
    files: list[str] = Field(description="the files that differ (all the run's files where none does)")
    added: int
    removed: int
    lines: list[DiffLine]
    unified: str


def transcript_paths(transcripts: Path, run_id: str) -> list[Path]:
    return sorted(transcripts.glob(f"{glob.escape(run_id)}-*.jsonl"))


def _stamp(store: Store, run: Run, transcripts: Path) -> str:
    # Cheap reads only (counts, the last note id, the latest version number, file sizes): it is polled.
    counts = store.status_counts(run.id)
    finished = sum(n for status, n in counts.items() if status != "running")
    last_note = store.notes.list(run.id, last=1)
    latest = store.artifacts.get(run.id).version
    size = sum(p.stat().st_size for p in transcript_paths(transcripts, run.id))
    note_id = last_note[0].id if last_note else 0
    # A rename or a new tag (`autoresearch-mcp rename`, `tag`) changes the page too.
    labels = hashlib.sha256(json.dumps([run.name, run.tags]).encode()).hexdigest()[:8]
    return f"{run.status}|{run.used}|{finished}|{note_id}|{latest}|{size}|{labels}"


def run_rows(store: Store, transcripts: Path) -> list[RunRow]:
    return [
        RunRow(
            id=run.id,
            name=run.name,
            task=run.task,
            status=run.status,
            metric_name=run.metric_name,
            direction=run.direction,
            best_metric=run.best.metric if run.best else None,
            best_iteration=run.best.iteration if run.best else None,
            used=run.used,
            running=run.running,
            budget=run.budget,
            created_at=run.created_at,
            from_run=run.from_run,
            scripted=run.scripted,
            tags=run.tags,
            stamp=_stamp(store, run, transcripts),
        )
        for run in store.list_runs()
    ]


def best_so_far(experiments: list[Experiment], direction: Literal["max", "min"]) -> list[CurvePoint]:
    """The best follows the experiments that became the best (kept), as the task's rule decided: a
    higher metric that was within the noise, or a lucky seed that re-evaluation did not confirm, is no
    new best. (`direction` stays for callers: kept already holds it.)"""
    points, best = [], None
    for exp in experiments:
        if exp.kept and exp.metric is not None:
            best = exp.metric
        points.append(
            CurvePoint(
                iteration=exp.iteration, status=exp.status, metric=exp.metric, kept=exp.kept, best=best
            )
        )
    return points


def token_use(transcripts: Path, run_id: str) -> list[TokenUse]:
    uses = []
    for path in transcript_paths(transcripts, run_id):
        # A transcript written with --transcript may hold other runs too: keep this run's calls.
        records = [r for r in load_transcript(path) if r.get("run_id") == run_id]
        if not records:
            continue
        per_iteration = [TokenRow(iteration=i, totals=t) for i, t in totals_by_iteration(records).items()]
        total = TokenTotals()
        for record in records:
            total.add(record)
        mode = path.stem.removeprefix(f"{run_id}-")
        budget = budget_use(records)
        uses.append(
            TokenUse(
                mode=mode,
                file=path.name,
                per_iteration=per_iteration,
                total=total,
                token_budget=budget.budget if budget else None,
                budget_spent=budget.spent if budget else None,
            )
        )
    return uses


def changes_from_best(
    experiments: list[Experiment], best: dict[str, Any] | None
) -> dict[int, dict[str, Any]]:
    if best is None:
        return {e.iteration: dict(e.params) for e in experiments}
    return {e.iteration: {k: v for k, v in e.params.items() if best.get(k) != v} for e in experiments}


def run_detail(store: Store, run_id: str, transcripts: Path) -> RunDetail:
    run = store.get_run(run_id)
    experiments, _ = store.experiments(run_id)
    versions = [
        VersionInfo(
            version=v.version,
            description=v.description,
            sha256=v.sha256,
            parent_version=v.parent_version,
            created_at=v.created_at,
            lines=line_count(v.source),
        )
        for v in store.artifacts.versions(run_id)
    ]
    return RunDetail(
        run=run,
        stamp=_stamp(store, run, transcripts),
        experiments=experiments,
        changes=changes_from_best(experiments, run.best.params if run.best else None),
        edits={v.version: v.description for v in versions},
        curve=best_so_far(experiments, run.direction),
        versions=versions,
        notes=store.notes.list(run_id),
        tokens=token_use(transcripts, run_id),
    )


def version_diff(store: Store, run_id: str, a: int, b: int) -> VersionDiff:
    """Version a -> version b as unified diffs, one per file that changed under its own name (what
    `show` prints), each line classified for rendering."""
    old, new = store.artifacts.get(run_id, a), store.artifacts.get(run_id, b)
    names = edited_files(store.get_run(run_id).config)
    per_file = file_diffs(old.source, new.source, names, a, b)
    lines = []
    for diff in per_file:
        for index, text in enumerate(diff.lines):
            if index < 2:  # its `---` and `+++` lines
                kind = "file"
            elif text.startswith("@@"):
                kind = "hunk"
            elif text.startswith("+"):
                kind = "add"
            elif text.startswith("-"):
                kind = "del"
            else:
                kind = "ctx"
            lines.append(DiffLine(kind=kind, text=text))
    return VersionDiff(
        run_id=run_id,
        a=a,
        b=b,
        files=[diff.name for diff in per_file] or names,
        added=sum(line.kind == "add" for line in lines),
        removed=sum(line.kind == "del" for line in lines),
        lines=lines,
        unified="\n".join(line.text for line in lines),
    )
