"""A run's notes (strategy, failed approaches) and its event log (refusals, errors)."""

from autoresearch_mcp.contract.models import Event, Note, NoteKind
from autoresearch_mcp.server.store.db import Database, now


class NoteRecords:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, run_id: str, kind: NoteKind, text: str) -> Note:
        with self.db.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO notes (run_id, kind, text, created_at) VALUES (?, ?, ?, ?)",
                (run_id, kind, text, now()),
            )
        row = self.db.reader().execute("SELECT * FROM notes WHERE id = ?", (cur.lastrowid,)).fetchone()
        return Note(**dict(row))

    def list(self, run_id: str, kind: NoteKind | None = None, last: int | None = None) -> list[Note]:
        where, args = "run_id = ?", [run_id]
        if kind is not None:
            where += " AND kind = ?"
            args.append(kind)
        rows = (
            self.db.reader()
            .execute(f"SELECT * FROM notes WHERE {where} ORDER BY id DESC LIMIT ?", [*args, last or -1])
            .fetchall()
        )
        return [Note(**dict(row)) for row in reversed(rows)]


class EventRecords:
    """Refusals and other things that happened without becoming an experiment."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def log(self, run_id: str | None, kind: str, tool: str, detail: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO events (run_id, kind, tool, detail, created_at) VALUES (?, ?, ?, ?, ?)",
                (run_id, kind, tool, detail, now()),
            )

    def list(self, run_id: str) -> list[Event]:
        rows = self.db.reader().execute("SELECT * FROM events WHERE run_id = ? ORDER BY id", (run_id,))
        return [Event(**dict(row)) for row in rows]

    def counts(self, run_id: str) -> dict[str, int]:
        """Events by kind, from the counters the inserts keep (store.counts)."""
        rows = self.db.reader().execute(
            "SELECT counter, n FROM run_counts WHERE run_id = ? AND counter >= 'events.' AND counter < 'events/'",
            (run_id,),
        )
        return {row["counter"].split(".", 1)[1]: row["n"] for row in rows if row["n"]}
