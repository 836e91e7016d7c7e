"""Append-only schema migrations. Never edit a shipped migration: add a new one at the end."""

import sqlite3

MIGRATIONS: list[tuple[str, str]] = []


def migration(name: str, sql: str) -> None:
    MIGRATIONS.append((name, sql))


migration(
    "001_initial",
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        name TEXT,
        task TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'converged', 'exhausted', 'stopped')),
        budget INTEGER NOT NULL,
        target REAL,
        seed INTEGER NOT NULL,
        config_json TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        finished_at TEXT,
        finish_reason TEXT
    );
    CREATE TABLE artifacts (
        run_id TEXT NOT NULL REFERENCES runs(id),
        version INTEGER NOT NULL,
        source TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        description TEXT NOT NULL,
        parent_version INTEGER,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, version)
    );
    CREATE TABLE experiments (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(id),
        iteration INTEGER NOT NULL,
        params_json TEXT NOT NULL,
        params_key TEXT NOT NULL,
        artifact_version INTEGER NOT NULL,
        status TEXT NOT NULL
            CHECK (status IN ('running', 'ok', 'crash', 'timeout', 'incorrect', 'interrupted')),
        metrics_json TEXT NOT NULL DEFAULT '{}',
        metric REAL,
        kept INTEGER NOT NULL DEFAULT 0,
        note TEXT,
        error_tail TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        duration_s REAL,
        owner_pid INTEGER,
        owner_host TEXT,
        UNIQUE (run_id, iteration)
    );
    CREATE INDEX experiments_by_run_key ON experiments (run_id, params_key, artifact_version);
    CREATE TABLE notes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(id),
        kind TEXT NOT NULL CHECK (kind IN ('strategy', 'failed')),
        text TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT REFERENCES runs(id),
        kind TEXT NOT NULL,
        tool TEXT NOT NULL,
        detail TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    """,
)


def apply(conn: sqlite3.Connection) -> list[str]:
    """Apply the migrations this database has not seen yet; return their names."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
    applied = []
    for name, sql in MIGRATIONS:
        if name in done:
            continue
        with conn:  # one transaction per migration: all of it or none of it
            conn.execute("BEGIN IMMEDIATE")
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, datetime('now'))", (name,)
            )
        applied.append(name)
    return applied
