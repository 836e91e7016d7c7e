"""train.py versions of a run: append-only, each with its parent and a description."""

import sqlite3
from collections.abc import Sequence

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import ArtifactVersion
from autoresearch_mcp.server.store.db import Database, now, sha256


def version_name(files: Sequence[str], version: int) -> str:
    """`slow.py v3`: a version named by the file it is, where there is one (a folder's script need not be
    train.py); `code v3` where a version is several files."""
    if len(files) > 1:
        return f"code v{version}"
    return f"{files[0] if files else 'train.py'} v{version}"


class ArtifactRecords:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        version: int,
        source: str,
        description: str,
        parent: int | None,
    ) -> None:
        conn.execute(
            "INSERT INTO artifacts (run_id, version, source, sha256, description, parent_version,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run_id, version, source, sha256(source), description, parent, now()),
        )

    def add(
        self, run_id: str, source: str, description: str, expected_parent: int | None = None
    ) -> ArtifactVersion:
        """Append a version. With expected_parent, refuse if someone else changed the artifact first."""
        with self.db.transaction() as conn:
            latest = conn.execute(
                "SELECT MAX(version) FROM artifacts WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            if latest is None:
                raise ResearchError(f"unknown run {run_id!r}", kind="unknown_run")
            if expected_parent is not None and latest != expected_parent:
                raise ResearchError(
                    f"train.py changed while you edited it (now version {latest}, you edited "
                    f"version {expected_parent}). Read it again with get_current_train_py and redo the edit."
                )
            self.insert(conn, run_id, latest + 1, source, description, latest)
        return self.get(run_id, latest + 1)

    def get(self, run_id: str, version: int | None = None) -> ArtifactVersion:
        conn = self.db.reader()
        if version is None:
            row = conn.execute(
                "SELECT * FROM artifacts WHERE run_id = ? ORDER BY version DESC LIMIT 1", (run_id,)
            ).fetchone()
        else:
            row = conn.execute(
                "SELECT * FROM artifacts WHERE run_id = ? AND version = ?", (run_id, version)
            ).fetchone()
        if row is None:
            latest = conn.execute("SELECT MAX(version) FROM artifacts WHERE run_id = ?", (run_id,)).fetchone()
            if latest[0] is None:
                raise ResearchError(f"unknown run {run_id!r}", kind="unknown_run")
            raise ResearchError(
                f"train.py has no version {version}; versions are 1..{latest[0]}", kind="unknown_version"
            )
        return ArtifactVersion(**dict(row))

    def latest_version(self, run_id: str) -> int:
        """The current version's number (0 for an unknown run)."""
        row = self.db.reader().execute("SELECT MAX(version) FROM artifacts WHERE run_id = ?", (run_id,))
        return row.fetchone()[0] or 0

    def descriptions(self, run_id: str, versions: set[int]) -> dict[int, str]:
        """The description of each of these versions: the few a summary names, without reading every
        version's source."""
        if not versions:
            return {}
        rows = self.db.reader().execute(
            f"SELECT version, description FROM artifacts WHERE run_id = ? AND version IN"
            f" ({', '.join('?' * len(versions))})",
            (run_id, *sorted(versions)),
        )
        return {row["version"]: row["description"] for row in rows}

    def versions(self, run_id: str) -> list[ArtifactVersion]:
        rows = (
            self.db.reader()
            .execute("SELECT * FROM artifacts WHERE run_id = ? ORDER BY version", (run_id,))
            .fetchall()
        )
        return [ArtifactVersion(**dict(row)) for row in rows]
