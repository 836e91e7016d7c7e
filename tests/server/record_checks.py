"""What "nothing committed is lost, nothing is half-written" means for the run store, as checks that the
hostile-input, hostile-code and kill tests share. They read the SQLite file directly, not through the
server, so a server bug cannot hide from them."""

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

# The records that are history: once written, a row of these never changes (except as noted below).
HISTORY_TABLES = ("experiments", "artifacts", "notes", "events")
KEYS = {"experiments": "id", "artifacts": "run_id, version", "notes": "id", "events": "id"}
# Columns of a running experiment that its own end fills in (a job's start also moves started_at).
EXPERIMENT_END_COLUMNS = frozenset(
    {"status", "metrics_json", "metric", "kept", "error_tail", "finished_at", "duration_s", "started_at"}
)
RUN_FIXED_COLUMNS = ("id", "name", "task", "budget", "target", "seed", "created_at")
FINISHED_RUN = ("converged", "exhausted", "stopped")
TERMINAL_EXPERIMENT = ("ok", "crash", "timeout", "incorrect", "interrupted")

Snapshot = dict[str, dict[Any, dict[str, Any]]]


def connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    return conn


def snapshot(db: Path) -> Snapshot:
    """Every row of the history tables, runs and jobs, keyed by primary key."""
    conn = connect(db)
    try:
        snap: Snapshot = {}
        for table, key in (*KEYS.items(), ("runs", "id"), ("jobs", "id")):
            rows = conn.execute(f"SELECT * FROM {table}").fetchall()
            cols = [c.strip() for c in key.split(",")]
            snap[table] = {tuple(row[c] for c in cols): dict(row) for row in rows}
        snap["schema"] = {
            (row["type"], row["name"]): dict(row) for row in conn.execute("SELECT * FROM sqlite_master")
        }
        return snap
    finally:
        conn.close()


def assert_earlier_records_intact(before: Snapshot, after: Snapshot) -> None:
    """Every row that existed before is still there, unchanged; the only changes allowed are the ends
    of experiments and jobs that were still running, and runs that finished."""
    assert after["schema"] == before["schema"], "the schema changed"
    for table in HISTORY_TABLES:
        for key, row in before[table].items():
            assert key in after[table], f"{table} row {key} disappeared"
            now = after[table][key]
            if table == "experiments" and row["status"] == "running":
                changed = {c for c in row if row[c] != now[c]}
                assert changed <= EXPERIMENT_END_COLUMNS, f"experiment {key}: {changed} changed"
                continue
            assert now == row, f"{table} row {key} changed:\nbefore {row}\nafter  {now}"
    for key, run in before["runs"].items():
        assert key in after["runs"], f"run {key} disappeared"
        now = after["runs"][key]
        assert [now[c] for c in RUN_FIXED_COLUMNS] == [run[c] for c in RUN_FIXED_COLUMNS], key
        assert now["status"] == run["status"] or (
            run["status"] == "running" and now["status"] in FINISHED_RUN
        ), f"run {key}: {run['status']} -> {now['status']}"
    for key, job in before["jobs"].items():
        assert key in after["jobs"], f"job {key} disappeared"
        now = after["jobs"][key]
        assert (now["run_id"], now["experiment_id"]) == (job["run_id"], job["experiment_id"])
        if job["status"] in ("done", "failed"):
            assert now == job, f"finished job {key} changed"


def assert_store_consistent(db: Path, *, server_running: bool = False) -> None:
    """The file is sound and every record whole: integrity_check ok; each run's train.py versions are
    1..n with parents n-1 and a sha256 that matches the stored source; iterations 1..k per run; with no
    server running, no experiment or job is left running (a dead server's work reads 'interrupted')."""
    conn = connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        runs = [row["id"] for row in conn.execute("SELECT id FROM runs")]
        for run_id in runs:
            versions = conn.execute(
                "SELECT version, parent_version, source, sha256 FROM artifacts WHERE run_id = ?"
                " ORDER BY version",
                (run_id,),
            ).fetchall()
            assert [v["version"] for v in versions] == list(range(1, len(versions) + 1)), run_id
            for v in versions:
                assert hashlib.sha256(v["source"].encode()).hexdigest() == v["sha256"], (run_id, v["version"])
                assert v["parent_version"] == (None if v["version"] == 1 else v["version"] - 1)
            iterations = [
                row[0]
                for row in conn.execute(
                    "SELECT iteration FROM experiments WHERE run_id = ? ORDER BY iteration", (run_id,)
                )
            ]
            assert iterations == list(range(1, len(iterations) + 1)), run_id
        statuses = {row[0] for row in conn.execute("SELECT DISTINCT status FROM experiments")}
        allowed = {*TERMINAL_EXPERIMENT, "running"} if server_running else set(TERMINAL_EXPERIMENT)
        assert statuses <= allowed, f"experiment statuses {statuses}"
        for row in conn.execute("SELECT * FROM experiments WHERE status != 'running'"):
            assert row["finished_at"] is not None, dict(row)
            if row["status"] == "ok":
                assert row["metric"] is not None, dict(row)
        if not server_running:
            open_jobs = conn.execute("SELECT id, status FROM jobs WHERE status IN ('queued', 'running')")
            assert open_jobs.fetchall() == []
            # no job's experiment is left running either
            for row in conn.execute(
                "SELECT j.id, j.status, e.status AS exp FROM jobs j"
                " JOIN experiments e ON e.id = j.experiment_id"
            ):
                assert row["exp"] != "running", dict(row)
    finally:
        conn.close()


def processes_mentioning(marker: str) -> list[tuple[int, str]]:
    """Live processes whose command line contains `marker` (e.g. a sandbox's temporary directory), from
    /proc; zombies have no command line and do not count. Empty where there is no /proc."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker in cmdline:
            found.append((int(entry.name), cmdline.strip()))
    return found


def parent_of(pid: int) -> int | None:
    """The parent's pid, from /proc (None once the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])  # after "pid (comm)": state, then ppid
