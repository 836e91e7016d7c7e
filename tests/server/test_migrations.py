"""Schema migrations: applied once, even when several servers open a new database at the same moment."""

import sqlite3
import threading
from pathlib import Path

from autoresearch_mcp.server.store import Store, migrations


def test_servers_opening_a_new_database_together_apply_each_migration_once(tmp_path: Path):
    db = tmp_path / "shared.db"
    start = threading.Barrier(6)
    errors: list[BaseException] = []

    def open_store() -> None:
        start.wait()
        try:
            Store(db).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    conn = sqlite3.connect(db)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]
    finally:
        conn.close()
    assert names == sorted(name for name, _ in migrations.MIGRATIONS)


def test_reopening_a_database_applies_nothing_new(tmp_path: Path):
    Store(tmp_path / "runs.db").close()
    conn = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    try:
        assert migrations.apply(conn) == []
    finally:
        conn.close()


def test_a_database_from_the_previous_release_upgrades_in_place_and_keeps_its_rows(tmp_path: Path):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        saved = migrations.MIGRATIONS[:]
        migrations.MIGRATIONS[:] = [m for m in saved if m[0] < "003"]
        try:
            migrations.apply(conn)
        finally:
            migrations.MIGRATIONS[:] = saved
        conn.execute(
            "INSERT INTO runs (id, task, status, budget, seed, created_at, updated_at)"
            " VALUES ('r-old', 'toy-quadratic', 'running', 5, 1, 'then', 'then')"
        )
        conn.execute(
            "INSERT INTO experiments (run_id, iteration, params_json, params_key, artifact_version, status,"
            " started_at, owner_pid, owner_host) VALUES ('r-old', 1, '{}', 'k', 1, 'ok', 'then', 1, 'h')"
        )
        assert migrations.apply(conn) == [name for name, _ in saved if name >= "003"]
        row = conn.execute("SELECT status, owner_pid, owner_token FROM experiments").fetchone()
    finally:
        conn.close()
    assert row == ("ok", 1, None)


def test_an_existing_database_gets_its_counters_and_indexes_from_the_rows_it_has(tmp_path: Path):
    db = tmp_path / "before-008.db"
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        saved = migrations.MIGRATIONS[:]
        migrations.MIGRATIONS[:] = [m for m in saved if m[0] < "008"]
        try:
            migrations.apply(conn)
        finally:
            migrations.MIGRATIONS[:] = saved
        for run, earlier in (("r-a", None), ("r-b", "r-a")):
            conn.execute(
                "INSERT INTO runs (id, task, status, budget, seed, created_at, updated_at, from_run)"
                " VALUES (?, 'toy-quadratic', 'running', 50, 1, 'then', 'then', ?)",
                (run, earlier),
            )
        rows = [
            ("r-a", 1, '{"x": 1.0, "y": 2}', "ok"),
            ("r-a", 2, '{"x": 1.0, "y": 3}', "crash"),
            ("r-a", 3, '{"x": 2.0, "y": null}', "ok"),
            ("r-b", 1, '{"x": 2.0, "y": 3}', "ok"),
            ("r-b", 2, '{"x": 5.0, "y": 3}', "timeout"),
        ]
        for run, iteration, params, status in rows:
            conn.execute(
                "INSERT INTO experiments (run_id, iteration, params_json, params_key, artifact_version,"
                " status, started_at) VALUES (?, ?, ?, ?, 1, ?, 'then')",
                (run, iteration, params, f"k{run}{iteration}", status),
            )
        conn.execute(
            "INSERT INTO events (run_id, kind, tool, detail, created_at) VALUES ('r-b', 'refusal', 't', 'd', 'x')"
        )
        assert migrations.apply(conn) == [name for name, _ in saved if name >= "008"]
    finally:
        conn.close()
    store = Store(db)
    try:
        assert store.counts.statuses("r-a") == {"ok": 2, "crash": 1}
        assert store.counts.events("r-b") == {"refusal": 1} and store.get_run("r-b").used == 2
        # as COUNT(DISTINCT ...) over the rows counted them: a run alone, and with the run it started from
        assert store.counts.distinct_values("r-a", ["x", "y"]) == {"x": 2, "y": 2}
        assert store.counts.distinct_values("r-b", ["x", "y"]) == {"x": 2, "y": 1}
        assert store.counts.distinct_values("r-b", ["x", "y"], "r-a") == {"x": 3, "y": 2}
        # and kept up from there by the writes themselves
        exp = store.reserve_experiment("r-b", {"x": 1.0, "y": 9}, 1, None)
        store.complete_experiment(exp.id, status="ok", metrics={}, metric=1.0, error_tail=None, duration_s=0)
        assert store.counts.distinct_values("r-b", ["x", "y"], "r-a") == {"x": 3, "y": 3}
        assert store.counts.statuses("r-b") == {"ok": 2, "timeout": 1}
    finally:
        store.close()
