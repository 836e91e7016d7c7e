"""Experiments in the run store: reserved before they run, completed after, kept when they beat the
best (the reads of them: experiment_reads.py).

Every query here is answered through an index or a maintained counter (store.counts), so none of them
grows with the run; tests/server/test_query_plans.py holds them to it with EXPLAIN QUERY PLAN.
"""

import json
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from autoresearch_mcp.contract.errors import RepeatError, ResearchError
from autoresearch_mcp.contract.models import Experiment, ExperimentStatus
from autoresearch_mcp.server.store.artifacts import version_name
from autoresearch_mcp.server.store.counts import RunCounts
from autoresearch_mcp.server.store.db import (
    Database,
    canonical_json,
    now,
    orphaned,
    process_token,
    sha256,
    this_host,
)
from autoresearch_mcp.server.store.experiment_reads import ExperimentReads, experiment_from_row


def better(value: float, than: float, direction: Literal["max", "min"]) -> bool:
    return value > than if direction == "max" else value < than


@dataclass(frozen=True)
class Incumbent:
    """The run's best experiment as a keep rule sees it: `value` is its metric, or the mean over its
    re-evaluations where it has one; `samples` its stored raw measurements, pooled with those of its
    re-measurements (the same params on the same code, measured after it became the best: `pooled`
    of them)."""

    experiment: Experiment
    value: float
    samples: list[float] = field(default_factory=list)
    pooled: int = 0


@dataclass(frozen=True)
class Keep:
    """A keep decision, taken by the task's rule (Task.keeps) against the best of its time: whether the
    experiment becomes the best, and `over`, the id of the best it was compared with (None: none)."""

    kept: bool
    over: int | None


class BestChanged(Exception):
    """Another experiment became the best between a keep decision and its write: decide again."""


# The exact-repeat lookup names its index: ordered by iteration, the planner would rather walk the
# (run_id, iteration) index over the whole run than sort the one or two rows this index finds.
# The best's re-measurements: the same params on the same code (any version with the best's source),
# measured ok after it, with their raw samples.
REMEASURED = (
    "SELECT e.samples_json FROM experiments e JOIN artifacts a"
    " ON a.run_id = e.run_id AND a.version = e.artifact_version"
    " WHERE e.run_id = ? AND e.params_key = ? AND e.iteration > ? AND e.status = 'ok'"
    " AND e.samples_json IS NOT NULL"
    " AND a.sha256 = (SELECT sha256 FROM artifacts WHERE run_id = ? AND version = ?) ORDER BY e.iteration"
)
EARLIER_RUN = (
    "SELECT * FROM experiments INDEXED BY experiments_by_run_key"
    " WHERE run_id = ? AND params_key = ? AND artifact_version = ? AND status != 'interrupted'"
    " ORDER BY iteration LIMIT 1"
)


class ExperimentStore(ExperimentReads):
    """The experiments half of the Store (which composes it with runs and the other records)."""

    db: Database
    counts: RunCounts

    def reserve_experiment(
        self,
        run_id: str,
        params: dict[str, Any],
        artifact_version: int,
        note: str | None,
        repeat_ok: bool = False,
        files: Sequence[str] = ("train.py",),
        noisy: bool = True,
    ) -> Experiment:
        """Record an experiment as running before it runs. Checks status and budget atomically; an exact
        repeat is refused unless `repeat_ok` (a re-evaluation on another seed), in words naming the
        task's editable `files` (none: only its params may change), and offering a re-measurement only
        where the task is `noisy` (a timing: elsewhere the server refuses remeasure)."""
        with self.db.transaction() as conn:
            run = conn.execute("SELECT status, budget FROM runs WHERE id = ?", (run_id,)).fetchone()
            if run is None:
                raise ResearchError(f"unknown run {run_id!r}", kind="unknown_run")
            if run["status"] != "running":
                raise ResearchError(
                    f"run {run_id} is {run['status']}: it takes no more experiments. "
                    "Start a new run with start_run.",
                    kind="run_finished",
                )
            used = self.counts.used(run_id, conn)
            if used >= run["budget"]:
                raise ResearchError(
                    f"run {run_id} has used its whole budget ({used}/{run['budget']}). "
                    "Call finish_run, or start a new run with a larger budget.",
                    kind="budget_exhausted",
                )
            key = sha256(canonical_json(params))
            earlier = conn.execute(EARLIER_RUN, (run_id, key, artifact_version)).fetchone()
            if earlier is not None and not repeat_ok:
                exp = experiment_from_row(earlier)
                # A pending one (a job queued or running, workers in parallel) has no result yet.
                ended = (
                    "which has not finished yet (queued or running): its result comes with a later summary"
                    if exp.status == "running"
                    else f"which ended {exp.status}"
                    + (f" with {exp.metric:.4f}" if exp.metric is not None else "")
                )
                on = f" on {version_name(files, artifact_version)}" if files else ""
                change = " or ".join(files)
                if not params:
                    again = ", or pass remeasure=true for another sample" if noisy else ""
                    instead = f"change {change}{again}."
                else:
                    instead = (
                        f"try different params or change {change}." if files else "try different params."
                    )
                raise RepeatError(
                    f"exact repeat of experiment #{exp.iteration} (same params{on}), {ended}. Not run again; "
                    + instead,
                    exp,
                    distinct=self.counts.distinct_values(run_id, list(exp.params), conn=conn),
                )
            cur = conn.execute(
                "INSERT INTO experiments (run_id, iteration, params_json, params_key, artifact_version,"
                " status, note, started_at, owner_pid, owner_host, owner_token) VALUES (?, ?, ?, ?, ?,"
                " 'running', ?, ?, ?, ?, ?)",
                (
                    run_id,
                    # After the last iteration, not after the charged count: an interrupted one keeps its
                    # number (the (run_id, iteration) index answers MAX at once).
                    conn.execute(
                        "SELECT COALESCE(MAX(iteration), 0) + 1 FROM experiments WHERE run_id = ?", (run_id,)
                    ).fetchone()[0],
                    canonical_json(params),
                    key,
                    artifact_version,
                    note,
                    now(),
                    os.getpid(),
                    this_host(),
                    process_token(),
                ),
            )
            exp_id = cur.lastrowid
        assert exp_id is not None
        return self.get_experiment(exp_id)

    def complete_experiment(
        self,
        exp_id: int,
        *,
        status: ExperimentStatus,
        metrics: dict[str, float],
        metric: float | None,
        error_tail: str | None,
        duration_s: float,
        samples: list[float] | None = None,
        keep: Keep | None = None,
    ) -> Experiment:
        """Store the outcome, kept as `keep` decided; BestChanged when the best it was decided against
        is no longer the best (two experiments ending at once are each compared with the best the other
        left). Without `keep`: kept when its metric is strictly better than the best's."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT e.run_id, r.config_json FROM experiments e JOIN runs r ON r.id = e.run_id"
                " WHERE e.id = ?",
                (exp_id,),
            ).fetchone()
            config = json.loads(row["config_json"])
            kept = False
            if status == "ok" and metric is not None:
                best = self._incumbent(conn, row["run_id"], config, exclude=exp_id)
                if keep is None:
                    kept = best is None or better(metric, best.value, config.get("direction", "max"))
                else:
                    _check_over(best, keep)
                    kept = keep.kept
            conn.execute(
                "UPDATE experiments SET status = ?, metrics_json = ?, metric = ?, kept = ?, error_tail = ?,"
                " finished_at = ?, duration_s = ?, samples_json = ? WHERE id = ?",
                (
                    status,
                    canonical_json(metrics),
                    metric,
                    int(kept),
                    error_tail,
                    now(),
                    duration_s,
                    canonical_json(samples) if samples else None,
                    exp_id,
                ),
            )
            if kept:
                self._set_kept_seq(conn, row["run_id"], exp_id)
        return self.get_experiment(exp_id)

    def decide_keep(self, exp_id: int, keep: Keep, metrics: dict[str, float]) -> Experiment:
        """Keep a finished ok experiment later (after its re-evaluations) as `keep` decided, merging
        `metrics` into its own; BestChanged as complete_experiment."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT e.run_id, e.metrics_json, r.config_json FROM experiments e"
                " JOIN runs r ON r.id = e.run_id WHERE e.id = ?",
                (exp_id,),
            ).fetchone()
            best = self._incumbent(conn, row["run_id"], json.loads(row["config_json"]), exclude=exp_id)
            _check_over(best, keep)
            kept = keep.kept
            merged = {**json.loads(row["metrics_json"]), **metrics}
            conn.execute(
                "UPDATE experiments SET metrics_json = ?, kept = ? WHERE id = ?",
                (canonical_json(merged), int(kept), exp_id),
            )
            if kept:
                self._set_kept_seq(conn, row["run_id"], exp_id)
        return self.get_experiment(exp_id)

    def _set_kept_seq(self, conn: sqlite3.Connection, run_id: str, exp_id: int) -> None:
        # Only kept rows carry a kept_seq: `kept = 1` lets the largest come from the partial index.
        conn.execute(
            "UPDATE experiments SET kept_seq = (SELECT COALESCE(MAX(kept_seq), 0) + 1 FROM experiments"
            " WHERE run_id = ? AND kept = 1) WHERE id = ?",
            (run_id, exp_id),
        )

    def incumbent(self, run_id: str, config: dict[str, Any] | None = None) -> Incumbent | None:
        """The current best as a keep rule sees it (`config`: the run's, when the caller holds it)."""
        if config is None:
            row = self.db.reader().execute("SELECT config_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            config = json.loads(row["config_json"])
        return self._incumbent(self.db.reader(), run_id, config)

    def _incumbent(
        self, conn: sqlite3.Connection, run_id: str, config: dict[str, Any], exclude: int | None = None
    ) -> Incumbent | None:
        row = self._best_row(conn, run_id, config.get("direction", "max"), exclude)
        if row is None:
            return None
        exp = experiment_from_row(row)
        assert exp.metric is not None  # (the query's condition)
        value = exp.metrics.get(f"{config.get('metric', 'metric')}_mean", exp.metric)
        samples = json.loads(row["samples_json"]) if row["samples_json"] else []
        again = conn.execute(
            REMEASURED, (run_id, row["params_key"], exp.iteration, run_id, exp.artifact_version)
        )
        pooled = [json.loads(found["samples_json"]) for found in again.fetchall()]
        if samples:
            samples = [*samples, *(value for more in pooled for value in more)]
        return Incumbent(experiment=exp, value=value, samples=samples, pooled=len(pooled) if samples else 0)

    def _best_row(
        self, conn: sqlite3.Connection, run_id: str, direction: str, exclude: int | None = None
    ) -> sqlite3.Row | None:
        # The latest experiment to become the best: the highest kept_seq, straight from the partial
        # index of kept rows. Kept rows from before kept_seq existed count only where no numbered one
        # does, ordered by metric, as the best was chosen then.
        kept = "run_id = ? AND kept = 1 AND status = 'ok' AND metric IS NOT NULL AND id != ?"
        args = (run_id, -1 if exclude is None else exclude)
        row = conn.execute(
            f"SELECT * FROM experiments WHERE {kept} AND kept_seq IS NOT NULL ORDER BY kept_seq DESC LIMIT 1",
            args,
        ).fetchone()
        if row is not None:
            return row
        order = "DESC" if direction == "max" else "ASC"
        return conn.execute(
            f"SELECT * FROM experiments WHERE {kept} AND kept_seq IS NULL ORDER BY metric {order},"
            " iteration ASC LIMIT 1",
            args,
        ).fetchone()

    def best_experiment(self, run_id: str, direction: Literal["max", "min"] = "max") -> Experiment | None:
        """The run's best: the latest experiment that became the best (see complete_experiment)."""
        row = self._best_row(self.db.reader(), run_id, direction)
        return None if row is None else experiment_from_row(row)

    def mark_orphans_interrupted(self) -> int:
        """Experiments left 'running' by a server process that no longer exists become 'interrupted'."""
        rows = (
            self.db.reader()
            .execute(
                "SELECT id, owner_pid, owner_host, owner_token FROM experiments WHERE status = 'running'"
            )
            .fetchall()
        )
        dead = [r["id"] for r in orphaned(rows)]
        stamp = now()
        with self.db.transaction() as conn:
            for exp_id in dead:
                conn.execute(
                    "UPDATE experiments SET status = 'interrupted', finished_at = ?, error_tail = ?"
                    " WHERE id = ? AND status = 'running'",
                    (stamp, "the server stopped while this experiment ran", exp_id),
                )
        return len(dead)


def _check_over(best: Incumbent | None, keep: Keep) -> None:
    if (None if best is None else best.experiment.id) != keep.over:
        raise BestChanged
