"""Flat at any size: every query a turn or a write makes goes through an index or a counter, and a
summary costs the same work on a run of 100 experiments as on one of 5,000.

Work is counted in SQLite virtual-machine steps (a progress handler called on every step), not in
seconds: the same on any machine and under any load."""

import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from bulk import bulk_run

from autoresearch_mcp.contract.arguments import HISTORY_PAGE
from autoresearch_mcp.contract.errors import RefusedError
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store

# What a plan may never do with these: read every row (SCAN), even through a covering index.
COUNTED = (
    "experiments",
    "events",
    "notes",
    "artifacts",
    "runs",
    "run_counts",
    "param_values",
    "param_counts",
)
SCAN = re.compile(rf"\bSCAN ({'|'.join(COUNTED)})\b")


@contextmanager
def traced(store: Store) -> Iterator[list[str]]:
    """Every statement this thread's connection runs, with its values written in."""
    seen: list[str] = []
    conn = store.db.reader()
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def plan(conn: sqlite3.Connection, sql: str) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]


def trigger_statements(conn: sqlite3.Connection) -> list[str]:
    """The statements inside every trigger, NEW.x and OLD.x written as values: a trigger runs on
    every write, so its lookups must be indexed too."""
    statements = []
    for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger'"):
        body = sql[sql.upper().index(" BEGIN") + 6 : sql.upper().rindex("END")]
        body = re.sub(r"\b(?:NEW|OLD)\.params_json\b", "'{\"x\": 1}'", body)
        body = re.sub(r"\b(?:NEW|OLD)\.value\b", "1", body)
        body = re.sub(r"\b(?:NEW|OLD)\.(\w+)", "'r-0000000001'", body)
        statements += [part.strip() for part in body.split(";") if part.strip()]
    return statements


def test_every_query_of_a_turn_and_of_a_write_goes_through_an_index(tmp_path: Path):
    settings = ServerSettings(db_path=tmp_path / "runs.db")
    store = Store(settings.db_path)
    service = Research(settings, store).open()
    long_run = bulk_run(store, 2000)
    with traced(store) as seen:
        # a turn: the run, its summary, a page of history in each order
        service.runs.get_run(long_run)
        service.runs.get_run_summary(long_run)
        service.experiments.get_experiment_history(long_run, None, 0, "iteration", None)
        service.experiments.get_experiment_history(long_run, None, HISTORY_PAGE, "metric", None)
        service.experiments.get_experiment_history(long_run, 5, 0, "metric", "ok")
        service.experiments.get_experiment_history(long_run, 5, 0, "iteration", "crash")
        # the writes: an experiment, a refused repeat, a note, a new version, a run started from it
        service.experiments.run_experiment(long_run, {"x": 0.25, "y": -0.25}, None)
        with pytest.raises(RefusedError):
            service.experiments.run_experiment(long_run, {"x": 0.25, "y": -0.25}, None)
        service.runs.add_note(long_run, "try smaller x", "strategy")
        service.train_py.modify_train_py(
            long_run, "a comment", None, [("import time\n", "import time\n# c\n")]
        )
        later, _ = service.runs.start_run("toy-quadratic", 5, None, 1, None, from_run=long_run)
        service.runs.get_run_summary(later.id)
    conn = store.db.reader()
    statements = [
        s
        for s in dict.fromkeys(seen)
        if not s.startswith("--") and s.split()[0] in ("SELECT", "INSERT", "UPDATE")
    ]
    assert len(statements) > 30  # (the trace saw the turn and the writes)
    plans = {sql: plan(conn, sql) for sql in statements + trigger_statements(conn)}
    scans = {sql: steps for sql, steps in plans.items() if any(SCAN.search(step) for step in steps)}
    assert scans == {}


def steps_of(store: Store, work: Callable[[], object]) -> int:
    """SQLite virtual-machine steps `work` takes on this thread's connection."""
    count = 0

    def step() -> int:
        nonlocal count
        count += 1
        return 0

    conn = store.db.reader()
    conn.set_progress_handler(step, 1)
    try:
        work()
    finally:
        conn.set_progress_handler(None, 0)
    return count


@pytest.mark.parametrize("what", ["summary", "history page", "exact repeat", "run"])
def test_a_turn_costs_the_same_work_at_100_and_at_5000_experiments(tmp_path: Path, what: str):
    def work(service: Research, run_id: str) -> Callable[[], object]:
        def repeat() -> None:
            with pytest.raises(RefusedError):
                service.store.reserve_experiment(
                    run_id, service.store.experiment_at(run_id, 5).params, 1, None
                )

        return {
            "summary": lambda: service.runs.get_run_summary(run_id),
            "history page": lambda: service.experiments.get_experiment_history(
                run_id, None, 0, "iteration", None
            ),
            "exact repeat": repeat,
            "run": lambda: service.runs.get_run(run_id),
        }[what]

    cost = {}
    for n in (100, 5000):
        settings = ServerSettings(db_path=tmp_path / f"{n}.db")
        service = Research(settings).open()
        run_id = bulk_run(service.store, n)
        cost[n] = steps_of(service.store, work(service, run_id))
    assert cost[5000] <= cost[100] * 1.1, cost
