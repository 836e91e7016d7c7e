"""Pages of a run's experiments, each read through an index, so a page costs the same at the 100th
experiment as at the 100,000th (an OFFSET still steps over the index entries it skips).

Orders: iteration (the unique (run_id, iteration) index, or (run_id, status, iteration) under a
status filter), or metric, best first (the (run_id, metric) and (run_id, status, metric) indexes):
experiments with a metric, then those without one in iteration order. "Metric IS NULL first" cannot
come out of an index, so the two parts are read one after the other.
"""

import sqlite3
from typing import Literal

Order = Literal["iteration", "metric"]


def page_rows(
    conn: sqlite3.Connection,
    run_id: str,
    *,
    limit: int | None,
    offset: int,
    order: Order,
    status: str | None,
    newest_first: bool,
    direction: Literal["max", "min"],
) -> list[sqlite3.Row]:
    """`limit` rows (None: all) from `offset` in the given order. `newest_first` reverses iteration
    order (a caller that wants the most recent N)."""
    where, args = "run_id = ?", [run_id]
    if status is not None:
        where += " AND status = ?"
        args.append(status)
    size = -1 if limit is None else limit
    if order == "iteration":
        by = "iteration DESC" if newest_first else "iteration ASC"
        return conn.execute(
            f"SELECT * FROM experiments WHERE {where} ORDER BY {by} LIMIT ? OFFSET ?", [*args, size, offset]
        ).fetchall()
    metric_order = "DESC" if direction == "max" else "ASC"
    rows = conn.execute(
        f"SELECT * FROM experiments WHERE {where} AND metric IS NOT NULL"
        f" ORDER BY metric {metric_order}, iteration ASC LIMIT ? OFFSET ?",
        [*args, size, offset],
    ).fetchall()
    if limit is not None and len(rows) >= limit:
        return rows
    # The rest of the page comes from the experiments without a metric; where it starts in them
    # depends on how many have one (counted only when the page begins past them).
    if rows:
        skip = 0
    else:
        with_metric = conn.execute(
            f"SELECT COUNT(*) FROM experiments WHERE {where} AND metric IS NOT NULL", args
        ).fetchone()[0]
        skip = max(offset - with_metric, 0)
    rest = -1 if limit is None else limit - len(rows)
    rows += conn.execute(
        f"SELECT * FROM experiments WHERE {where} AND metric IS NULL ORDER BY iteration ASC LIMIT ? OFFSET ?",
        [*args, rest, skip],
    ).fetchall()
    return rows
