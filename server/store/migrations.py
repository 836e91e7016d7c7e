"""Append-only schema migrations. Never edit a shipped migration: add a new one at the end. One file
on purpose: the schema's whole history, in the order a database goes through it."""

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


# Flat at any size: what the summary and the write path read each turn, kept up to date in the write's
# own transaction (triggers, so every way in, an import or a bulk insert too, keeps them) or reached
# through an index, so that neither grows with the run. Counted per run: experiments by status and
# events by kind (run_counts); the distinct values each param took (param_values, param_counts), with
# how many of them the run it started from took too (`shared`), so the union over both is a sum.
# Experiments are deleted only with their whole run (`delete`, server/manage.py), which removes the
# run's counters too; so a value stays counted once seen.
migration(
    "008_flat_reads",
    """
    CREATE TABLE run_counts (
        run_id TEXT NOT NULL,
        counter TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (run_id, counter)
    ) WITHOUT ROWID;
    CREATE TRIGGER experiments_counted AFTER INSERT ON experiments BEGIN
        INSERT INTO run_counts (run_id, counter, n) VALUES (NEW.run_id, 'experiments.' || NEW.status, 1)
            ON CONFLICT (run_id, counter) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER experiments_recounted AFTER UPDATE OF status ON experiments
    WHEN OLD.status != NEW.status BEGIN
        UPDATE run_counts SET n = n - 1 WHERE run_id = OLD.run_id AND counter = 'experiments.' || OLD.status;
        INSERT INTO run_counts (run_id, counter, n) VALUES (NEW.run_id, 'experiments.' || NEW.status, 1)
            ON CONFLICT (run_id, counter) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER experiments_uncounted AFTER DELETE ON experiments BEGIN
        UPDATE run_counts SET n = n - 1 WHERE run_id = OLD.run_id AND counter = 'experiments.' || OLD.status;
    END;
    CREATE TRIGGER events_counted AFTER INSERT ON events WHEN NEW.run_id IS NOT NULL BEGIN
        INSERT INTO run_counts (run_id, counter, n) VALUES (NEW.run_id, 'events.' || NEW.kind, 1)
            ON CONFLICT (run_id, counter) DO UPDATE SET n = n + 1;
    END;
    CREATE TABLE param_values (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        value,
        PRIMARY KEY (run_id, name, value)
    ) WITHOUT ROWID;
    CREATE TABLE param_counts (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        distinct_values INTEGER NOT NULL DEFAULT 0,
        shared INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, name)
    ) WITHOUT ROWID;
    CREATE INDEX runs_by_from_run ON runs (from_run);
    CREATE INDEX runs_by_status ON runs (status);
    CREATE TRIGGER experiments_param_values AFTER INSERT ON experiments BEGIN
        INSERT OR IGNORE INTO param_values (run_id, name, value)
            SELECT NEW.run_id, key, value FROM json_each(NEW.params_json) WHERE value IS NOT NULL;
    END;
    CREATE TRIGGER param_values_counted AFTER INSERT ON param_values BEGIN
        INSERT INTO param_counts (run_id, name, distinct_values) VALUES (NEW.run_id, NEW.name, 1)
            ON CONFLICT (run_id, name) DO UPDATE SET distinct_values = distinct_values + 1;
        UPDATE param_counts SET shared = shared + 1
        WHERE run_id = NEW.run_id AND name = NEW.name AND EXISTS (
            SELECT 1 FROM runs r JOIN param_values p ON p.run_id = r.from_run
            WHERE r.id = NEW.run_id AND p.name = NEW.name AND p.value = NEW.value);
        UPDATE param_counts SET shared = shared + 1
        WHERE name = NEW.name AND run_id IN (
            SELECT r.id FROM runs r JOIN param_values p ON p.run_id = r.id
            WHERE r.from_run = NEW.run_id AND p.name = NEW.name AND p.value = NEW.value);
    END;
    CREATE INDEX experiments_by_status ON experiments (run_id, status, iteration);
    CREATE INDEX experiments_by_start ON experiments (run_id, status, started_at);
    CREATE INDEX experiments_by_status_metric ON experiments (run_id, status, metric);
    CREATE INDEX experiments_by_metric ON experiments (run_id, metric);
    CREATE INDEX experiments_kept ON experiments (run_id, kept_seq) WHERE kept = 1;
    CREATE INDEX experiments_running ON experiments (id) WHERE status = 'running';
    CREATE INDEX events_by_run ON events (run_id, kind, created_at);
    CREATE INDEX notes_by_run ON notes (run_id, kind);
    INSERT INTO run_counts (run_id, counter, n)
        SELECT run_id, 'experiments.' || status, COUNT(*) FROM experiments GROUP BY run_id, status;
    INSERT INTO run_counts (run_id, counter, n)
        SELECT run_id, 'events.' || kind, COUNT(*) FROM events WHERE run_id IS NOT NULL GROUP BY run_id, kind;
    INSERT OR IGNORE INTO param_values (run_id, name, value)
        SELECT e.run_id, j.key, j.value FROM experiments e, json_each(e.params_json) j
        WHERE j.value IS NOT NULL;
    """,
)


# Profiles of train.py versions (contract/profile.py), by content: a version reverted to, or the
# same text in a later version, finds its profile again instead of running the profiler.
migration(
    "009_profiles",
    """
    CREATE TABLE profiles (
        run_id TEXT NOT NULL REFERENCES runs(id),
        sha256 TEXT NOT NULL,
        profile_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (run_id, sha256)
    );
    """,
)


# Why a job's experiment was or was not kept, as run_experiment's answer says it: get_job's answer comes
# after the verdict, whose words exist only when it is made.
migration("010_job_message", "ALTER TABLE jobs ADD COLUMN message TEXT;")


def statements(sql: str) -> list[str]:
    """The statements of a migration script: split at each `;` that ends one (a trigger's body holds
    several), as sqlite3.complete_statement tells."""
    done, pending = [], ""
    for piece in sql.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                done.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        done.append(pending.strip())
    return done


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
            for statement in statements(sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (name, applied_at) VALUES (?, datetime('now'))", (name,)
            )
        applied.append(name)
    return applied
