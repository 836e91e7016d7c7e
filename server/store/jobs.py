"""The jobs table (migrations 002 and 010): one row per background experiment, next to the run store."""

import os
import sqlite3
import uuid

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Job, JobStatus
from autoresearch_mcp.server.store.db import Database, now, orphaned, process_token, this_host

SELECT_JOB = "SELECT j.*, e.iteration AS iteration FROM jobs j JOIN experiments e ON e.id = j.experiment_id"


class JobRecords:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, run_id: str, experiment_id: int, executor: str) -> Job:
        job_id = "j-" + uuid.uuid4().hex[:10]
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs (id, run_id, experiment_id, status, executor, submitted_at, owner_pid,"
                " owner_host, owner_token) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                (job_id, run_id, experiment_id, executor, now(), os.getpid(), this_host(), process_token()),
            )
        return self.get(job_id)

    def get(self, job_id: str) -> Job:
        row = self.db.reader().execute(f"{SELECT_JOB} WHERE j.id = ?", (job_id,)).fetchone()
        if row is None:
            raise ResearchError(
                f"unknown job {job_id!r}; submit_training_job returns the job id", kind="unknown_job"
            )
        return _job_from_row(row)

    def mark_running(self, job_id: str, worker: str, worker_pid: int | None) -> bool:
        """The job reached a worker. Its experiment's start becomes now: it may have queued a while.
        False when it was no longer queued (nothing changed)."""
        stamp = now()
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = 'running', worker = ?, worker_pid = ?, started_at = ?"
                " WHERE id = ? AND status = 'queued'",
                (worker, worker_pid, stamp, job_id),
            )
            if cur.rowcount:
                conn.execute(
                    "UPDATE experiments SET started_at = ? WHERE id ="
                    " (SELECT experiment_id FROM jobs WHERE id = ?) AND status = 'running'",
                    (stamp, job_id),
                )
            return cur.rowcount > 0

    def finish(
        self, job_id: str, status: JobStatus, error: str | None = None, message: str | None = None
    ) -> bool:
        """End a queued or running job, with `message` saying why its experiment was or was not kept;
        False when it had already ended (nothing changed)."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = ?, error = ?, message = ?, finished_at = ?,"
                " started_at = COALESCE(started_at, ?) WHERE id = ? AND status IN ('queued', 'running')",
                (status, error, message, now(), now(), job_id),
            )
            return cur.rowcount > 0

    def message(self, job_id: str) -> str | None:
        """Why the job's experiment was or was not kept, where the job was told its verdict."""
        row = self.db.reader().execute("SELECT message FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else row[0]

    def fail_orphans(self) -> int:
        """Jobs left queued or running by a server process that no longer exists.

        Run after Store.mark_orphans_interrupted: their experiments are then 'interrupted' already,
        unless the outcome was stored just before the server died (then the job is done)."""
        rows = (
            self.db.reader()
            .execute(
                "SELECT j.id, j.status, j.owner_pid, j.owner_host, j.owner_token, e.status AS exp_status"
                " FROM jobs j"
                " JOIN experiments e ON e.id = j.experiment_id WHERE j.status IN ('queued', 'running')"
            )
            .fetchall()
        )
        dead = orphaned(rows)
        for row in dead:
            if row["exp_status"] in ("running", "interrupted"):
                self.finish(row["id"], "failed", f"the server stopped while this job was {row['status']}")
            else:
                self.finish(row["id"], "done")
        return len(dead)


def _job_from_row(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        run_id=row["run_id"],
        experiment_id=row["experiment_id"],
        iteration=row["iteration"],
        status=row["status"],
        executor=row["executor"],
        worker=row["worker"],
        worker_pid=row["worker_pid"],
        error=row["error"],
        submitted_at=row["submitted_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )
