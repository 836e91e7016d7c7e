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


# Background jobs, and the read-only views that query_results may read (nothing else). Every column a
# view reads it also exposes, so a query that shadows a view name with a CTE learns nothing more (see
# query.py). No count(*) inside views: SQLite reports it as an anonymous read of the table.
migration(
    "002_jobs_and_views",
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id),
        experiment_id INTEGER NOT NULL REFERENCES experiments(id),
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
        executor TEXT NOT NULL,
        worker TEXT,
        worker_pid INTEGER,
        error TEXT,
        submitted_at TEXT NOT NULL,
        started_at TEXT,
        finished_at TEXT,
        owner_pid INTEGER,
        owner_host TEXT
    );
    CREATE INDEX jobs_by_status ON jobs (status);
    CREATE VIEW v_runs AS
    SELECT r.id AS run_id, r.name AS name, r.task AS task, r.status AS status, r.budget AS budget,
        (SELECT count(e.id) FROM experiments e WHERE e.run_id = r.id) AS used,
        r.target AS target, r.seed AS seed,
        json_extract(r.config_json, '$.metric') AS metric_name,
        json_extract(r.config_json, '$.direction') AS direction,
        (SELECT CASE json_extract(r.config_json, '$.direction') WHEN 'min' THEN min(e.metric)
                ELSE max(e.metric) END
         FROM experiments e WHERE e.run_id = r.id AND e.status = 'ok') AS best_metric,
        r.config_json AS config, r.created_at AS created_at, r.updated_at AS updated_at,
        r.finished_at AS finished_at, r.finish_reason AS finish_reason
    FROM runs r;
    CREATE VIEW v_experiments AS
    SELECT e.id AS experiment_id, e.run_id AS run_id, r.task AS task, e.iteration AS iteration,
        e.status AS status, e.metric AS metric, e.kept AS kept, e.params_json AS params,
        e.metrics_json AS metrics, e.artifact_version AS artifact_version, e.note AS note,
        e.error_tail AS error_tail, e.started_at AS started_at, e.finished_at AS finished_at,
        e.duration_s AS duration_s
    FROM experiments e JOIN runs r ON r.id = e.run_id;
    CREATE VIEW v_artifacts AS
    SELECT a.run_id AS run_id, a.version AS version, a.parent_version AS parent_version,
        a.description AS description, a.sha256 AS sha256,
        length(a.source) - length(replace(a.source, char(10), '')) + 1 AS lines,
        a.source AS source, a.created_at AS created_at
    FROM artifacts a;
    CREATE VIEW v_notes AS
    SELECT n.id AS note_id, n.run_id AS run_id, n.kind AS kind, n.text AS text, n.created_at AS created_at
    FROM notes n;
    CREATE VIEW v_events AS
    SELECT v.id AS event_id, v.run_id AS run_id, v.kind AS kind, v.tool AS tool, v.detail AS detail,
        v.created_at AS created_at
    FROM events v;
    CREATE VIEW v_jobs AS
    SELECT j.id AS job_id, j.run_id AS run_id, j.experiment_id AS experiment_id, e.iteration AS iteration,
        j.status AS status, j.executor AS executor, j.worker AS worker, j.error AS error,
        j.submitted_at AS submitted_at, j.started_at AS started_at, j.finished_at AS finished_at
    FROM jobs j JOIN experiments e ON e.id = j.experiment_id;
    """,
)


# Which server process owns a running experiment or job: the PID alone cannot tell a restarted server
# from its predecessor when both get the same PID (PID 1 in a container, on every start).
migration(
    "003_owner_token",
    """
    ALTER TABLE experiments ADD COLUMN owner_token TEXT;
    ALTER TABLE jobs ADD COLUMN owner_token TEXT;
    """,
)


# v_artifacts counted one line too many for a file ending in a newline (every train.py): count as the
# tools and the dashboard do (contract.models.line_count).
migration(
    "004_artifact_line_count",
    """
    DROP VIEW v_artifacts;
    CREATE VIEW v_artifacts AS
    SELECT a.run_id AS run_id, a.version AS version, a.parent_version AS parent_version,
        a.description AS description, a.sha256 AS sha256,
        length(a.source) - length(replace(a.source, char(10), ''))
            + (a.source != '' AND substr(a.source, -1) != char(10)) AS lines,
        a.source AS source, a.created_at AS created_at
    FROM artifacts a;
    """,
)


# What a keep rule needs beyond the metrics: an experiment's raw measurements (codeopt-records: each
# call's time), and the order in which experiments became the best. The best is the latest kept one: a
# metric measured at another time is not always comparable (timings drift with the machine's load), so
# the highest metric need not be the best.
migration(
    "005_samples_and_keep_order",
    """
    ALTER TABLE experiments ADD COLUMN samples_json TEXT;
    ALTER TABLE experiments ADD COLUMN kept_seq INTEGER;
    """,
)


# Memory across runs: the run a run started from (start_run's from_run), shown by v_runs too.
migration(
    "006_runs_from_run",
    """
    ALTER TABLE runs ADD COLUMN from_run TEXT REFERENCES runs(id);
    DROP VIEW v_runs;
    CREATE VIEW v_runs AS
    SELECT r.id AS run_id, r.name AS name, r.task AS task, r.status AS status, r.budget AS budget,
        (SELECT count(e.id) FROM experiments e WHERE e.run_id = r.id) AS used,
        r.target AS target, r.seed AS seed,
        json_extract(r.config_json, '$.metric') AS metric_name,
        json_extract(r.config_json, '$.direction') AS direction,
        (SELECT CASE json_extract(r.config_json, '$.direction') WHEN 'min' THEN min(e.metric)
                ELSE max(e.metric) END
         FROM experiments e WHERE e.run_id = r.id AND e.status = 'ok') AS best_metric,
        r.config_json AS config, r.created_at AS created_at, r.updated_at AS updated_at,
        r.finished_at AS finished_at, r.finish_reason AS finish_reason, r.from_run AS from_run
    FROM runs r;
    """,
)


# Tags a person puts on a run (`autoresearch-mcp tag`), and the budget's rule for interrupted
# experiments: one the server or the operator cut short (Ctrl-C, a killed server, a dead job worker)
# measured nothing, so it is not charged; v_runs counts `used` the way the store does.
migration(
    "007_run_tags_and_uncharged_interruptions",
    """
    ALTER TABLE runs ADD COLUMN tags_json TEXT NOT NULL DEFAULT '[]';
    DROP VIEW v_runs;
    CREATE VIEW v_runs AS
    SELECT r.id AS run_id, r.name AS name, r.task AS task, r.status AS status, r.budget AS budget,
        (SELECT count(e.id) FROM experiments e WHERE e.run_id = r.id AND e.status != 'interrupted') AS used,
        r.target AS target, r.seed AS seed,
        json_extract(r.config_json, '$.metric') AS metric_name,
        json_extract(r.config_json, '$.direction') AS direction,
        (SELECT CASE json_extract(r.config_json, '$.direction') WHEN 'min' THEN min(e.metric)
                ELSE max(e.metric) END
         FROM experiments e WHERE e.run_id = r.id AND e.status = 'ok') AS best_metric,
        r.config_json AS config, r.created_at AS created_at, r.updated_at AS updated_at,
        r.finished_at AS finished_at, r.finish_reason AS finish_reason, r.from_run AS from_run,
        r.tags_json AS tags
    FROM runs r;
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
            # Another process opening the same new database may have applied it while we waited for
            # the write lock (two servers started at once): check again inside the transaction.
            if conn.execute("SELECT 1 FROM schema_migrations WHERE name = ?", (name,)).fetchone():
                continue
            for statement in sql.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, datetime('now'))", (name,)
            )
        applied.append(name)
    return applied
