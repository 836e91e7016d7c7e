"""What the summary counts each turn, read from counters the writes keep (migration 008) or through an
index: none of these reads grows with the run.

run_counts holds, per run, its experiments by status (`experiments.<status>`) and its events by kind
(`events.<kind>`); param_counts the distinct values each param took. Both are kept by triggers in the
transaction of the write they count, so they are never stale and need no upkeep here.
"""

import sqlite3

from autoresearch_mcp.server.store.db import Database

# Not "interrupted": the worker died (the server was stopped), which is no failure of the proposal.
FAILED = ("crash", "timeout", "incorrect")


def run_counters(conn: sqlite3.Connection, run_id: str) -> dict[str, int]:
    """Every counter of the run: `experiments.<status>` and `events.<kind>` (zero ones left out)."""
    rows = conn.execute("SELECT counter, n FROM run_counts WHERE run_id = ?", (run_id,))
    return {row[0]: row[1] for row in rows if row[1]}


def used_of(counters: dict[str, int]) -> int:
    """Experiments that count against the budget: every one that ran to an outcome, whatever its status.
    An interrupted one (the server or its operator cut it short: Ctrl-C, a killed server, a dead job
    worker) measured nothing the agent asked for, so it costs nothing, and a resumed run still gets every
    experiment it was promised."""
    return sum(
        n
        for counter, n in counters.items()
        if counter.startswith("experiments.") and counter != "experiments.interrupted"
    )


class RunCounts:
    def __init__(self, db: Database) -> None:
        self.db = db

    def used(self, run_id: str, conn: sqlite3.Connection | None = None) -> int:
        return used_of(run_counters(conn or self.db.reader(), run_id))

    def statuses(self, run_id: str) -> dict[str, int]:
        """Experiments by status."""
        counters = run_counters(self.db.reader(), run_id)
        return {key.split(".", 1)[1]: n for key, n in counters.items() if key.startswith("experiments.")}

    def events(self, run_id: str) -> dict[str, int]:
        """Events (refusals, ...) by kind."""
        counters = run_counters(self.db.reader(), run_id)
        return {key.split(".", 1)[1]: n for key, n in counters.items() if key.startswith("events.")}

    def distinct_values(
        self,
        run_id: str,
        names: list[str],
        earlier: str | None = None,
        conn: sqlite3.Connection | None = None,
    ) -> dict[str, int]:
        """How many distinct values each param took over the run's experiments, and over those of
        `earlier` too when given (the run it started from): |A ∪ B| = |A| + |B| - |A ∩ B|, where the
        triggers keep |A ∩ B| as the run's `shared` count."""
        conn = conn or self.db.reader()
        rows = conn.execute(
            "SELECT name, distinct_values, shared FROM param_counts WHERE run_id = ?", (run_id,)
        ).fetchall()
        own = {row[0]: row[1] for row in rows}
        counts = {name: own.get(name, 0) for name in names}
        if earlier is not None:
            shared = {row[0]: row[2] for row in rows}
            theirs = dict(
                conn.execute(
                    "SELECT name, distinct_values FROM param_counts WHERE run_id = ?", (earlier,)
                ).fetchall()
            )
            counts = {name: n + theirs.get(name, 0) - shared.get(name, 0) for name, n in counts.items()}
        return counts

    def consecutive_failures(self, run_id: str) -> tuple[int, int]:
        """Experiments that failed, and refusals, counted back from the latest until a success: the
        last ok is one index lookup, and only what came after it is counted (the streak itself).
        Apart, since a refusal costs no budget and a reader should not take it for a failed run."""
        conn = self.db.reader()
        last_ok = conn.execute(
            "SELECT MAX(started_at) FROM experiments WHERE run_id = ? AND status = 'ok'", (run_id,)
        ).fetchone()[0]
        since = last_ok or ""
        failed = conn.execute(
            f"SELECT COUNT(*) FROM experiments WHERE run_id = ? AND status IN ({', '.join('?' * len(FAILED))})"
            " AND started_at > ?",
            (run_id, *FAILED, since),
        ).fetchone()[0]
        refused = conn.execute(
            "SELECT COUNT(*) FROM events WHERE run_id = ? AND kind = 'refusal' AND created_at > ?",
            (run_id, since),
        ).fetchone()[0]
        return failed, refused
