"""The run store: one SQLite file (WAL), the only copy of every run's history.

Runs and experiments live here; train.py versions, notes, events and jobs in the records it is
composed of (store.artifacts, store.notes, store.events, store.jobs), all on one Database.
"""

import json
import os
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from autoresearch_mcp.contract.errors import RepeatError, ResearchError
from autoresearch_mcp.contract.models import (
    BestResult,
    Experiment,
    ExperimentStatus,
    Run,
    RunStatus,
)
from autoresearch_mcp.server.store.artifacts import ArtifactRecords
from autoresearch_mcp.server.store.db import (
    Database,
    canonical_json,
    now,
    orphaned,
    process_token,
    sha256,
    this_host,
)
from autoresearch_mcp.server.store.jobs import JobRecords
from autoresearch_mcp.server.store.notes import EventRecords, NoteRecords

# What a run's budget is charged with: every experiment but the interrupted ones. One the server or
# its operator cut short (Ctrl-C, a killed server, a dead job worker) measured nothing the agent asked
# for, so it costs nothing, and a resumed run still gets every experiment it was promised.
CHARGED = "SELECT COUNT(*) FROM experiments WHERE run_id = ? AND status != 'interrupted'"


def better(value: float, than: float, direction: Literal["max", "min"]) -> bool:
    return value > than if direction == "max" else value < than


@dataclass(frozen=True)
class Incumbent:
    """The run's best experiment as a keep rule sees it: `value` is its metric, or the mean over its
    re-evaluations where it has one; `samples` its stored raw measurements."""

    experiment: Experiment
    value: float
    samples: list[float] = field(default_factory=list)


# Decides, given the current best (None: there is none), whether an experiment becomes the new best.
KeepRule = Callable[[Incumbent | None], bool]


class Store:
    """Runs and experiments here; train.py versions, notes, events and jobs in the records it holds."""

    def __init__(self, path: Path | str) -> None:
        self.db = Database(path)
        self.artifacts = ArtifactRecords(self.db)
        self.notes = NoteRecords(self.db)
        self.events = EventRecords(self.db)
        self.jobs = JobRecords(self.db)

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
        conn = self.db.reader()
        used = conn.execute(CHARGED, (row["id"],)).fetchone()[0]
        best = self.best_experiment(row["id"], config.get("direction", "max"))
        metric = config.get("metric", "metric")
        return Run(
            id=row["id"],
            name=row["name"],
            task=row["task"],
            status=row["status"],
            budget=row["budget"],
            used=used,
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

    # -- experiments -------------------------------------------------------------------------
    def reserve_experiment(
        self,
        run_id: str,
        params: dict[str, Any],
        artifact_version: int,
        note: str | None,
        repeat_ok: bool = False,
    ) -> Experiment:
        """Record an experiment as running before it runs. Checks status and budget atomically; an exact
        repeat is refused unless `repeat_ok` (a re-evaluation on another seed)."""
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
            used = conn.execute(CHARGED, (run_id,)).fetchone()[0]
            if used >= run["budget"]:
                raise ResearchError(
                    f"run {run_id} has used its whole budget ({used}/{run['budget']}). "
                    "Call finish_run, or start a new run with a larger budget.",
                    kind="budget_exhausted",
                )
            key = sha256(canonical_json(params))
            earlier = conn.execute(
                "SELECT * FROM experiments WHERE run_id = ? AND params_key = ? AND artifact_version = ?"
                " AND status != 'interrupted' ORDER BY iteration LIMIT 1",
                (run_id, key, artifact_version),
            ).fetchone()
            if earlier is not None and not repeat_ok:
                exp = _experiment_from_row(earlier)
                raise RepeatError(
                    f"exact repeat of experiment #{exp.iteration} (same params on train.py v{artifact_version}),"
                    f" which ended {exp.status}"
                    + (f" with {exp.metric:.4f}" if exp.metric is not None else "")
                    + ". Not run again; try different params or change train.py.",
                    exp,
                )
            cur = conn.execute(
                "INSERT INTO experiments (run_id, iteration, params_json, params_key, artifact_version,"
                " status, note, started_at, owner_pid, owner_host, owner_token) VALUES (?, ?, ?, ?, ?,"
                " 'running', ?, ?, ?, ?, ?)",
                (
                    run_id,
                    # After the last iteration, not after the charged count: an interrupted one keeps its number.
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
        keep: KeepRule | None = None,
    ) -> Experiment:
        """Store the outcome; mark it kept when `keep` says it beats the current best (by default: a
        strictly better metric). Decided in the same transaction as the write, so two experiments ending
        at once are each compared with the best the other left."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT e.run_id, r.config_json FROM experiments e JOIN runs r ON r.id = e.run_id"
                " WHERE e.id = ?",
                (exp_id,),
            ).fetchone()
            config = json.loads(row["config_json"])
            direction = config.get("direction", "max")
            kept = False
            if status == "ok" and metric is not None:
                best = self._incumbent(conn, row["run_id"], config, exclude=exp_id)
                rule = keep or (lambda best: best is None or better(metric, best.value, direction))
                kept = bool(rule(best))
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

    def decide_keep(self, exp_id: int, keep: KeepRule, metrics: dict[str, float]) -> Experiment:
        """Decide later whether a finished ok experiment becomes the best (after its re-evaluations),
        merging `metrics` into its own."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT e.run_id, e.metrics_json, r.config_json FROM experiments e"
                " JOIN runs r ON r.id = e.run_id WHERE e.id = ?",
                (exp_id,),
            ).fetchone()
            best = self._incumbent(conn, row["run_id"], json.loads(row["config_json"]), exclude=exp_id)
            kept = bool(keep(best))
            merged = {**json.loads(row["metrics_json"]), **metrics}
            conn.execute(
                "UPDATE experiments SET metrics_json = ?, kept = ? WHERE id = ?",
                (canonical_json(merged), int(kept), exp_id),
            )
            if kept:
                self._set_kept_seq(conn, row["run_id"], exp_id)
        return self.get_experiment(exp_id)

    def _set_kept_seq(self, conn: sqlite3.Connection, run_id: str, exp_id: int) -> None:
        conn.execute(
            "UPDATE experiments SET kept_seq = (SELECT COALESCE(MAX(kept_seq), 0) + 1 FROM experiments"
            " WHERE run_id = ?) WHERE id = ?",
            (run_id, exp_id),
        )

    def incumbent(self, run_id: str) -> Incumbent | None:
        """The current best as a keep rule sees it."""
        row = self.db.reader().execute("SELECT config_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        return self._incumbent(self.db.reader(), run_id, json.loads(row["config_json"]))

    def _incumbent(
        self, conn: sqlite3.Connection, run_id: str, config: dict[str, Any], exclude: int | None = None
    ) -> Incumbent | None:
        row = self._best_row(conn, run_id, config.get("direction", "max"), exclude)
        if row is None:
            return None
        exp = _experiment_from_row(row)
        assert exp.metric is not None  # (the query's condition)
        value = exp.metrics.get(f"{config.get('metric', 'metric')}_mean", exp.metric)
        samples = json.loads(row["samples_json"]) if row["samples_json"] else []
        return Incumbent(experiment=exp, value=value, samples=samples)

    def _best_row(
        self, conn: sqlite3.Connection, run_id: str, direction: str, exclude: int | None = None
    ) -> sqlite3.Row | None:
        # The latest experiment to become the best; kept rows from before kept_seq existed come after
        # every numbered one and are ordered by metric, as the best was chosen then.
        order = "DESC" if direction == "max" else "ASC"
        return conn.execute(
            "SELECT * FROM experiments WHERE run_id = ? AND status = 'ok' AND metric IS NOT NULL AND kept = 1"
            f" AND id != ? ORDER BY kept_seq IS NULL, kept_seq DESC, metric {order}, iteration ASC LIMIT 1",
            (run_id, -1 if exclude is None else exclude),
        ).fetchone()

    def get_experiment(self, exp_id: int) -> Experiment:
        row = self.db.reader().execute("SELECT * FROM experiments WHERE id = ?", (exp_id,)).fetchone()
        if row is None:
            raise ResearchError(f"unknown experiment {exp_id}", kind="bad_argument")
        return _experiment_from_row(row)

    def experiment_at(self, run_id: str, iteration: int) -> Experiment | None:
        row = (
            self.db.reader()
            .execute("SELECT * FROM experiments WHERE run_id = ? AND iteration = ?", (run_id, iteration))
            .fetchone()
        )
        return None if row is None else _experiment_from_row(row)

    def best_experiment(self, run_id: str, direction: Literal["max", "min"] = "max") -> Experiment | None:
        """The run's best: the latest experiment that became the best (see complete_experiment)."""
        row = self._best_row(self.db.reader(), run_id, direction)
        return None if row is None else _experiment_from_row(row)

    def samples(self, exp_id: int) -> list[float]:
        """An experiment's stored raw measurements (empty when its task keeps none)."""
        row = (
            self.db.reader()
            .execute("SELECT samples_json FROM experiments WHERE id = ?", (exp_id,))
            .fetchone()
        )
        return json.loads(row["samples_json"]) if row is not None and row["samples_json"] else []

    def experiments(
        self,
        run_id: str,
        *,
        last: int | None = None,
        offset: int = 0,
        order: Literal["iteration", "metric"] = "iteration",
        status: ExperimentStatus | None = None,
        direction: Literal["max", "min"] = "max",
    ) -> tuple[list[Experiment], int]:
        """A page of experiments and the total that match. `last` takes the most recent N."""
        where, args = "run_id = ?", [run_id]
        if status is not None:
            where += " AND status = ?"
            args.append(status)
        conn = self.db.reader()
        total = conn.execute(f"SELECT COUNT(*) FROM experiments WHERE {where}", args).fetchone()[0]
        if order == "metric":
            metric_order = "DESC" if direction == "max" else "ASC"
            order_by = f"metric IS NULL, metric {metric_order}, iteration ASC"
        else:
            order_by = "iteration DESC" if last is not None else "iteration ASC"
        limit = last if last is not None else -1
        rows = conn.execute(
            f"SELECT * FROM experiments WHERE {where} ORDER BY {order_by} LIMIT ? OFFSET ?",
            [*args, limit, offset],
        ).fetchall()
        page = [_experiment_from_row(row) for row in rows]
        if order == "iteration" and last is not None:
            page.reverse()  # the most recent N, still in iteration order
        return page, total

    def status_counts(self, run_id: str) -> dict[str, int]:
        rows = self.db.reader().execute(
            "SELECT status, COUNT(*) AS n FROM experiments WHERE run_id = ? GROUP BY status", (run_id,)
        )
        return {row["status"]: row["n"] for row in rows}

    def distinct_values(self, run_ids: list[str], names: list[str]) -> dict[str, int]:
        """How many distinct values each param took over the experiments of these runs (a run and the
        one it started from; counted in SQL: the summary reads this every turn, however long the run)."""
        if not names or not run_ids:
            return dict.fromkeys(names, 0)
        columns = ", ".join(
            f"COUNT(DISTINCT json_extract(params_json, ?)) AS c{i}" for i in range(len(names))
        )
        row = (
            self.db.reader()
            .execute(
                f"SELECT {columns} FROM experiments WHERE run_id IN ({', '.join('?' * len(run_ids))})",
                [*(f'$."{name}"' for name in names), *run_ids],
            )
            .fetchone()
        )
        return {name: row[i] for i, name in enumerate(names)}

    def consecutive_failures(self, run_id: str) -> int:
        """Experiments that failed and refusals, counted back from the latest until a success."""
        conn = self.db.reader()
        last_ok = conn.execute(
            "SELECT MAX(started_at) FROM experiments WHERE run_id = ? AND status = 'ok'", (run_id,)
        ).fetchone()[0]
        since = last_ok or ""
        failed = conn.execute(
            "SELECT COUNT(*) FROM experiments WHERE run_id = ? AND status IN"
            " ('crash', 'timeout', 'incorrect', 'interrupted') AND started_at > ?",
            (run_id, since),
        ).fetchone()[0]
        refused = conn.execute(
            "SELECT COUNT(*) FROM events WHERE run_id = ? AND kind = 'refusal' AND created_at > ?",
            (run_id, since),
        ).fetchone()[0]
        return failed + refused

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


def _experiment_from_row(row: sqlite3.Row) -> Experiment:
    return Experiment(
        id=row["id"],
        run_id=row["run_id"],
        iteration=row["iteration"],
        params=json.loads(row["params_json"]),
        artifact_version=row["artifact_version"],
        status=row["status"],
        metrics=json.loads(row["metrics_json"]),
        metric=row["metric"],
        kept=bool(row["kept"]),
        note=row["note"],
        error_tail=row["error_tail"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        duration_s=row["duration_s"],
    )
