"""The SQLite file under the run store: per-thread connections and write transactions.

Each thread gets its own connection (MCP runs sync tools on worker threads). Every change that reads
before it writes runs inside BEGIN IMMEDIATE, so two callers cannot both take the last unit of budget.
"""

import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autoresearch_mcp.sandbox.resources import pid_alive
from autoresearch_mcp.server.store import migrations

BUSY_TIMEOUT_S = 30.0
OPEN_ATTEMPTS = 20


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def this_host() -> str:
    return socket.gethostname()


# This server process, among every process that ever had its PID on this host; a forked child is a
# process of its own, so it draws a new one.
_token = uuid.uuid4().hex


def process_token() -> str:
    return _token


def _new_token() -> None:
    global _token
    _token = uuid.uuid4().hex


os.register_at_fork(after_in_child=_new_token)


def owner_alive(pid: int | None, host: str | None, token: str | None) -> bool:
    """Whether the server process that recorded a row may still be running. Rows of another host count
    as alive (there is no way to know); a row with this process's PID but not its token was written by
    an earlier server that had the same PID."""
    if host != this_host():
        return True
    if pid is None:
        return False
    if pid == os.getpid():
        return token == _token
    return pid_alive(pid)


def orphaned(rows: list[sqlite3.Row]) -> list[sqlite3.Row]:
    """The rows (with owner_pid, owner_host, owner_token) whose server process is gone."""
    return [r for r in rows if not owner_alive(r["owner_pid"], r["owner_host"], r["owner_token"])]


class Database:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        conn = self._conn()
        # Servers opening a new database at the same moment: SQLite can answer the WAL switch or the
        # first schema read with "database is locked" at once, without waiting out the busy timeout
        # (seen once in six threads in CI). Each migration is its own transaction, so trying the whole
        # opening again is safe.
        for attempt in range(OPEN_ATTEMPTS):
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                migrations.apply(conn)
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == OPEN_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def reader(self) -> sqlite3.Connection:
        """This thread's connection, for reads outside a transaction (e.g. the jobs table)."""
        return self._conn()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
