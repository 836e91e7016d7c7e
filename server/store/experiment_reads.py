"""The reads of experiments the summary and the history tools make every turn: one by id or iteration,
a page, the stored samples, the status counts. Each goes through an index or a maintained counter
(tests/server/test_query_plans.py holds them to it)."""

import json
import sqlite3
from typing import Literal

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Experiment, ExperimentStatus
from autoresearch_mcp.server.store.counts import RunCounts
from autoresearch_mcp.server.store.db import Database
from autoresearch_mcp.server.store.pages import Order, page_rows


class ExperimentReads:
    db: Database
    counts: RunCounts

    def get_experiment(self, exp_id: int) -> Experiment:
        row = self.db.reader().execute("SELECT * FROM experiments WHERE id = ?", (exp_id,)).fetchone()
        if row is None:
            raise ResearchError(f"unknown experiment {exp_id}", kind="bad_argument")
        return experiment_from_row(row)

    def experiment_at(self, run_id: str, iteration: int) -> Experiment | None:
        row = (
            self.db.reader()
            .execute("SELECT * FROM experiments WHERE run_id = ? AND iteration = ?", (run_id, iteration))
            .fetchone()
        )
        return None if row is None else experiment_from_row(row)

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
        order: Order = "iteration",
        status: ExperimentStatus | None = None,
        direction: Literal["max", "min"] = "max",
        limit: int | None = None,
    ) -> tuple[list[Experiment], int]:
        """A page of experiments and the total that match. `last` takes the most recent N (best first
        in metric order); otherwise `limit` rows from `offset` (None: all of them)."""
        statuses = self.counts.statuses(run_id)
        total = sum(statuses.values()) if status is None else statuses.get(status, 0)
        rows = page_rows(
            self.db.reader(),
            run_id,
            limit=last if last is not None else limit,
            offset=offset,
            order=order,
            status=status,
            newest_first=last is not None,
            direction=direction,
        )
        page = [experiment_from_row(row) for row in rows]
        if order == "iteration" and last is not None:
            page.reverse()  # the most recent N, still in iteration order
        return page, total

    def status_counts(self, run_id: str) -> dict[str, int]:
        return self.counts.statuses(run_id)


def experiment_from_row(row: sqlite3.Row) -> Experiment:
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
