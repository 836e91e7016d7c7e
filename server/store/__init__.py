"""The run store: one SQLite file (WAL), the only copy of every run's history.

Runs live here; experiments in store.experiments (the half of the Store about them); train.py
versions, notes, events, jobs, profiles and the per-run counters in the records it is composed of
(store.artifacts, store.notes, store.jobs, store.profiles, store.counts), all on one Database.
"""

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import BestResult, Run, RunStatus
from autoresearch_mcp.server.store.artifacts import ArtifactRecords
from autoresearch_mcp.server.store.counts import RunCounts, run_counters, used_of
from autoresearch_mcp.server.store.db import Database, canonical_json, now
from autoresearch_mcp.server.store.experiments import BestChanged, ExperimentStore, Incumbent, Keep, better
from autoresearch_mcp.server.store.jobs import JobRecords
from autoresearch_mcp.server.store.notes import EventRecords, NoteRecords
from autoresearch_mcp.server.store.profiles import ProfileRecords

__all__ = ["BestChanged", "Incumbent", "Keep", "RunRef", "Store", "better"]

# A run as a caller hands it over: the record it holds (read once, passed along), or its id.
RunRef = Run | str


class Store(ExperimentStore):
    """Runs here, experiments in ExperimentStore; train.py versions, notes, events, jobs and counters
    in the records it holds."""

    def __init__(self, path: Path | str) -> None:
        self.db = Database(path)
        self.counts = RunCounts(self.db)
        self.artifacts = ArtifactRecords(self.db)
        self.notes = NoteRecords(self.db)
        self.events = EventRecords(self.db)
        self.jobs = JobRecords(self.db)
        self.profiles = ProfileRecords(self.db)

    @property
    def path(self) -> Path:
        return self.db.path

    def close(self) -> None:
        self.db.close()

    # -- runs --------------------------------------------------------------------------------
    def create_run(
        self,
        *,
        task: str,
        budget: int,
        target: float | None,
        seed: int,
        name: str | None,
        config: dict[str, Any],
        initial_source: str,
        from_run: str | None = None,
    ) -> Run:
        run_id = "r-" + uuid.uuid4().hex[:10]
        stamp = now()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO runs (id, name, task, status, budget, target, seed, config_json, created_at,"
                " updated_at, from_run) VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
                (run_id, name, task, budget, target, seed, canonical_json(config), stamp, stamp, from_run),
            )
            self.artifacts.insert(conn, run_id, 1, initial_source, "original", None)
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> Run:
        row = self.db.reader().execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise ResearchError(
                f"unknown run {run_id!r}. Call list_runs to see the runs, or start_run to begin one.",
                kind="unknown_run",
            )
        return self._run_from_row(row)

    def run(self, ref: RunRef) -> Run:
        """The record itself, or the run the id names."""
        return ref if isinstance(ref, Run) else self.get_run(ref)

    def status_of(self, run_id: str) -> RunStatus:
        row = self.db.reader().execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise ResearchError(f"unknown run {run_id!r}", kind="unknown_run")
        return row["status"]

    def list_runs(self, status: RunStatus | None = None) -> list[Run]:
        sql, args = "SELECT * FROM runs", ()
        if status is not None:
            sql, args = sql + " WHERE status = ?", (status,)
        rows = self.db.reader().execute(sql + " ORDER BY created_at DESC, rowid DESC", args).fetchall()
        return [self._run_from_row(row) for row in rows]

    def run_ids(self) -> list[str]:
        """Every run id, newest first."""
        rows = self.db.reader().execute("SELECT id FROM runs ORDER BY created_at DESC, rowid DESC").fetchall()
        return [row["id"] for row in rows]

    def set_run_status(self, run_id: str, status: RunStatus, reason: str | None = None) -> Run:
        stamp = now()
        finished = None if status == "running" else stamp
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, updated_at = ?, finished_at = ?, finish_reason = ? WHERE id = ?",
                (status, stamp, finished, reason, run_id),
            )
        return self.get_run(run_id)

    def add_finish_reason(self, run_id: str, reason: str) -> Run:
        """A finished run's reason, with more said after it (finish_run on a run the budget ended)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT finish_reason FROM runs WHERE id = ?", (run_id,)).fetchone()
            said = row["finish_reason"] if row is not None else None
            if said is None or reason not in said:
                joined = reason if not said else f"{said}; {reason}"
                conn.execute(
                    "UPDATE runs SET finish_reason = ?, updated_at = ? WHERE id = ?", (joined, now(), run_id)
                )
        return self.get_run(run_id)

    def update_run_options(self, run_id: str, values: dict[str, Any]) -> None:
        """Merge values into the run's task options (e.g. a baseline measured once per run)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT config_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            config = json.loads(row["config_json"])
            config.setdefault("options", {}).update(values)
            conn.execute(
                "UPDATE runs SET config_json = ?, updated_at = ? WHERE id = ?",
                (canonical_json(config), now(), run_id),
            )

    def _run_from_row(self, row: sqlite3.Row) -> Run:
        config = json.loads(row["config_json"])
        counters = run_counters(self.db.reader(), row["id"])
        best = self.best_experiment(row["id"], config.get("direction", "max"))
        metric = config.get("metric", "metric")
        return Run(
            id=row["id"],
            name=row["name"],
            task=row["task"],
            status=row["status"],
            budget=row["budget"],
            used=used_of(counters),
            running=counters.get("experiments.running", 0),
            target=row["target"],
            seed=row["seed"],
            metric_name=metric,
            direction=config.get("direction", "max"),
            best=None
            if best is None
            else BestResult(
                iteration=best.iteration,
                metric=best.metric if best.metric is not None else float("nan"),
                params=best.params,
                artifact_version=best.artifact_version,
                low=best.metrics.get(f"{metric}_low"),
                high=best.metrics.get(f"{metric}_high"),
                mean=best.metrics.get(f"{metric}_mean"),
            ),
            created_at=row["created_at"],
            finished_at=row["finished_at"],
            finish_reason=row["finish_reason"],
            config=config,
            from_run=row["from_run"],
            tags=json.loads(row["tags_json"]),
            llm=config.get("llm"),
        )
