"""Runs in and out of the store as whole documents (contract.transfer.RunDocument): the bulk path behind
`autoresearch-mcp import`, and the same document read straight from the store.

An import is one transaction per run: all of it or none of it. The run keeps its id, so that a run
moved to another machine is still the run its transcripts and `from_run` links name; a run whose id is
taken is refused, or given a fresh id with `new_id`. Experiment and note ids are the database's own and
are always new; iterations, train.py versions and every recorded value are kept. What an export does
not carry comes back as follows: the order in which experiments became the best is rebuilt from the
iterations, with the run's best last (so the best is the same); a codeopt-records experiment's raw
timings are not exported, so an imported run's next keep decision compares against the best's metric
alone; an experiment exported while it ran is imported as interrupted (it is not running here); the
refusals logged as events are not exported.
"""

import uuid
from collections.abc import Callable, Iterator
from typing import Any

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import ArtifactVersion, Experiment
from autoresearch_mcp.contract.transfer import RunDocument
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.store.db import canonical_json, now, sha256

INTERRUPTED_TAIL = "exported while it ran; imported as interrupted"


def import_run(
    store: Store, doc: RunDocument, initial_source: Callable[[str], str], *, new_id: bool = False
) -> str:
    """Store the document's run with its experiments, train.py versions and notes; return its id.
    `initial_source(task)`: the task's original train.py, for an export that carries no versions."""
    run = doc.run
    versions = sorted(doc.train_py, key=lambda v: v.version)
    used = {exp.artifact_version for exp in doc.experiments} | (
        {run.best.artifact_version} if run.best else set()
    )
    if not versions:
        if used - {1}:
            raise ResearchError(
                f"run {run.id}: its experiments ran train.py versions {sorted(used - {1})}, but the file"
                " holds no train.py versions; export it again with this version of autoresearch-mcp"
            )
        source = initial_source(run.task)
        versions = [_original(run.id, source, run.created_at)]
    known = {v.version for v in versions}
    if used - known:
        raise ResearchError(
            f"run {run.id}: train.py versions {sorted(used - known)} are missing from the file"
        )
    iterations = [exp.iteration for exp in doc.experiments]
    if len(set(iterations)) != len(iterations):
        raise ResearchError(f"run {run.id}: an iteration appears twice in the file")
    config = {"metric": run.metric_name, "direction": run.direction, **run.config}
    with store.db.transaction() as conn:
        run_id = run.id
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None:
            if not new_id:
                raise ResearchError(
                    f"run {run_id} is already in this database: nothing imported (pass --new-ids to import"
                    " it as a new run)",
                    kind="bad_argument",
                )
            run_id = "r-" + uuid.uuid4().hex[:10]
        from_run = run.from_run
        if (
            from_run is not None
            and conn.execute("SELECT 1 FROM runs WHERE id = ?", (from_run,)).fetchone() is None
        ):
            from_run = None  # the run it started from did not come along
        conn.execute(
            "INSERT INTO runs (id, name, task, status, budget, target, seed, config_json, created_at,"
            " updated_at, finished_at, finish_reason, from_run, tags_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                run.name,
                run.task,
                run.status,
                run.budget,
                run.target,
                run.seed,
                canonical_json(config),
                run.created_at,
                run.finished_at or run.created_at,
                run.finished_at,
                run.finish_reason,
                from_run,
                canonical_json(run.tags),
            ),
        )
        conn.executemany(
            "INSERT INTO artifacts (run_id, version, source, sha256, description, parent_version, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (run_id, v.version, v.source, sha256(v.source), v.description, v.parent_version, v.created_at)
                for v in versions
            ],
        )
        conn.executemany(
            "INSERT INTO experiments (run_id, iteration, params_json, params_key, artifact_version, status,"
            " metrics_json, metric, kept, kept_seq, note, error_tail, started_at, finished_at, duration_s)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _experiment_rows(run_id, doc),
        )
        conn.executemany(
            "INSERT INTO notes (run_id, kind, text, created_at) VALUES (?, ?, ?, ?)",
            [(run_id, n.kind, n.text, n.created_at) for n in sorted(doc.notes, key=lambda n: n.id)],
        )
    return run_id


def _original(run_id: str, source: str, created_at: str) -> ArtifactVersion:
    return ArtifactVersion(
        run_id=run_id,
        version=1,
        source=source,
        sha256=sha256(source),
        description="original",
        parent_version=None,
        created_at=created_at,
    )


def _experiment_rows(run_id: str, doc: RunDocument) -> Iterator[tuple[Any, ...]]:
    """Rows in iteration order. kept_seq numbers the kept ones in that order, the run's best last: the
    best is the latest experiment to have become it, so the imported run has the same best."""
    experiments = sorted(doc.experiments, key=lambda e: e.iteration)
    best = doc.run.best.iteration if doc.run.best else None
    kept = [e.iteration for e in experiments if e.kept and e.iteration != best]
    if best is not None:
        kept.append(best)
    seq = {iteration: i + 1 for i, iteration in enumerate(kept)}
    for exp in experiments:
        yield _row(run_id, exp, seq.get(exp.iteration))


def _row(run_id: str, exp: Experiment, kept_seq: int | None) -> tuple[Any, ...]:
    params = canonical_json(exp.params)
    running = exp.status == "running"
    return (
        run_id,
        exp.iteration,
        params,
        sha256(params),
        exp.artifact_version,
        "interrupted" if running else exp.status,
        canonical_json(exp.metrics),
        exp.metric,
        int(kept_seq is not None),
        kept_seq,
        exp.note,
        INTERRUPTED_TAIL if running else exp.error_tail,
        exp.started_at,
        (exp.finished_at or now()) if running else exp.finished_at,
        exp.duration_s,
    )


def export_run(store: Store, run_id: str) -> RunDocument:
    """The document `export --format json` writes for this run, read from the store."""
    experiments, _ = store.experiments(run_id)
    return RunDocument(
        run=store.get_run(run_id),
        experiments=experiments,
        train_py=store.artifacts.versions(run_id),
        notes=store.notes.list(run_id),
    )
