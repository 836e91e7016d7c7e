"""query_results: read-only SQL over the documented views, enforced by SQLite itself.

The query runs in a worker process (query_worker.py: killed if it overruns, since one SQLite function
call can outlast any progress handler), on its own connection opened with `mode=ro` (no write can reach
the file), under an authorizer that allows SELECT, reads of the views, reads of base tables only as a
view's own expansion, and a list of harmless functions; it denies everything else (writes, ATTACH,
PRAGMA, extensions, the schema table). A progress handler ends a query after TIME_LIMIT_S; rows and cell
sizes are capped; printf/format refuse widths and precisions that would build huge strings.

Why the view check needs a reference set: SQLite names the "view" responsible for a base-table read, but
a CTE counts as one too, so `WITH v_runs AS (SELECT * FROM events) ...` would pass a name check. A base
read is allowed only when that (table, column) is one the real view itself reads (measured from the
database with EXPLAIN, not parsed from text), and every view exposes what it reads.
"""

import math
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.arguments import MAX_QUERY_ROWS
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import QueryResult

TIME_LIMIT_S = 2.0
MAX_ROWS = MAX_QUERY_ROWS
MAX_CELL_CHARS = 20_000
MAX_RESULT_CHARS = 500_000
MAX_VALUE_BYTES = 5_000_000  # SQLITE_LIMIT_LENGTH: no string or blob bigger than this, even in flight

# The views, their columns, and what they mean: the tool description comes from this, and
# tests/test_docs.py checks docs/query-results.md against it.
VIEWS: dict[str, str] = {
    "v_runs": "run_id, name, task, status, budget, used (interrupted experiments not counted), target, seed, "
    "metric_name, direction ('max'|'min'), best_metric, config (JSON), created_at, updated_at, finished_at, "
    "finish_reason, from_run (the run it started from; null if none), tags (JSON list)",
    "v_experiments": "experiment_id, run_id, task, iteration, status, metric, kept (0/1), params (JSON), "
    "metrics (JSON), artifact_version, note, error_tail, started_at, finished_at, duration_s",
    "v_artifacts": "run_id, version, parent_version, description, sha256, lines, source, created_at",
    "v_notes": "note_id, run_id, kind ('strategy'|'failed'), text, created_at",
    "v_events": "event_id, run_id, kind ('refusal'), tool, detail, created_at",
    "v_jobs": "job_id, run_id, experiment_id, iteration, status ('queued'|'running'|'done'|'failed'), "
    "executor, worker, error, submitted_at, started_at, finished_at",
}

_SAFE = """
    abs avg count max min sum total group_concat string_agg round length octet_length lower upper substr
    substring trim ltrim rtrim replace instr coalesce ifnull iif nullif typeof printf format char hex
    unicode quote like glob random sign date time datetime julianday strftime unixepoch timediff
    json json_extract json_array_length json_type json_valid json_object json_array json_group_array
    json_group_object json_quote -> ->> row_number rank dense_rank percent_rank cume_dist ntile lag lead
    first_value last_value nth_value acos asin atan atan2 ceil ceiling cos degrees exp floor ln log log10
    log2 mod pi pow power radians sin sqrt tan trunc
"""
SAFE_FUNCTIONS = frozenset(_SAFE.split())
MAX_FORMAT_WIDTH = 1000  # printf/format: widths and precisions beyond this build strings nobody reads
_FORMAT_SPEC = re.compile(r"%%|%[-+ 0#,!]*(\*|\d+)?(?:\.(\*|\d+))?")


def query_results(db_path: Path, sql: str, max_rows: int = 200) -> QueryResult:
    """Run one read-only query in the query worker (a process: see query_worker.py)."""
    from autoresearch_mcp.server.query_worker import query_in_worker  # (it imports this module)

    if not 1 <= max_rows <= MAX_ROWS:
        raise ResearchError(f"max_rows must be between 1 and {MAX_ROWS}", kind="bad_query")
    return query_in_worker(db_path, sql, max_rows)


def run_query(db_path: Path, sql: str, max_rows: int) -> QueryResult:
    """The query itself, in this process (the worker's side)."""
    conn = sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        return _run(conn, sql, max_rows)
    finally:
        conn.close()


def _bounded_format(denied: list[str]) -> Any:
    """printf/format as SQLite has them, refusing `*` and widths or precisions over MAX_FORMAT_WIDTH."""
    builtin = sqlite3.connect(":memory:")  # its own printf is the real one

    def printf(form: Any, *args: Any) -> Any:
        if isinstance(form, str):
            for match in _FORMAT_SPEC.finditer(form):
                for size in match.groups():
                    if size == "*" or (size is not None and int(size) > MAX_FORMAT_WIDTH):
                        denied.append(
                            f"printf/format width or precision {size} is not allowed "
                            f"(at most {MAX_FORMAT_WIDTH}, and no *)"
                        )
                        raise ValueError(denied[-1])
        marks = ", ".join("?" * (1 + len(args)))
        return builtin.execute(f"SELECT printf({marks})", (form, *args)).fetchone()[0]

    return printf


def _run(conn: sqlite3.Connection, sql: str, max_rows: int) -> QueryResult:
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    reads = _view_reads(conn)
    denied: list[str] = []
    for name in ("printf", "format"):
        conn.create_function(name, -1, _bounded_format(denied))
    conn.set_authorizer(_authorizer(reads, denied))
    started = time.monotonic()
    deadline = started + TIME_LIMIT_S
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cursor = conn.execute(sql)
        rows = cursor.fetchmany(max_rows + 1)
    except sqlite3.ProgrammingError as exc:  # e.g. "You can only execute one statement at a time."
        raise ResearchError(
            f"refused: {str(exc).rstrip('.')}. Send one SELECT statement.", kind="bad_query"
        ) from None
    except sqlite3.Error as exc:
        raise ResearchError(_explain(exc, denied, time.monotonic() > deadline), kind="bad_query") from None
    finally:
        conn.set_progress_handler(None, 0)
    columns = [d[0] for d in cursor.description or ()]
    truncated = len(rows) > max_rows
    out: list[list[Any]] = []
    size = 0
    for row in rows[:max_rows]:
        cells = [_cell(value) for value in row]
        size += sum(len(str(c)) for c in cells)
        if size > MAX_RESULT_CHARS:
            truncated = True
            break
        out.append(cells)
    return QueryResult(
        columns=columns, rows=out, truncated=truncated, elapsed_s=round(time.monotonic() - started, 3)
    )


def _view_reads(conn: sqlite3.Connection) -> dict[str, set[tuple[str, str]]]:
    """For each view, the (table, column) pairs of base tables that its own definition reads."""
    reads: dict[str, set[tuple[str, str]]] = {name: set() for name in VIEWS}

    def record(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if action == sqlite3.SQLITE_READ and source in reads and arg1 not in VIEWS:
            reads[source].add((arg1 or "", arg2 or ""))
        return sqlite3.SQLITE_OK

    conn.set_authorizer(record)
    try:
        for name in VIEWS:
            conn.execute(f"EXPLAIN SELECT * FROM {name}").fetchall()
    except sqlite3.OperationalError as exc:
        raise ResearchError(
            f"the results views are missing from this database ({exc})", kind="bad_query"
        ) from None
    finally:
        conn.set_authorizer(None)
    return reads


def _authorizer(reads: dict[str, set[tuple[str, str]]], denied: list[str]) -> Any:
    expanded: set[str] = set()  # base tables some view of this statement has read

    def authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() in SAFE_FUNCTIONS:
                return sqlite3.SQLITE_OK
            denied.append(f"the function {arg2}() is not allowed")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_READ:
            if arg1 in VIEWS and db == "main":
                return sqlite3.SQLITE_OK
            if source in reads and (arg1 or "", arg2 or "") in reads[source]:
                expanded.add(arg1 or "")
                return sqlite3.SQLITE_OK
            # count(*) over a view compiles to a column-less read of its table, reported after the
            # view's expansion and without the view's name. It reveals only the number of rows.
            if not arg2 and source is None and arg1 in expanded:
                return sqlite3.SQLITE_OK
            denied.append(f"{arg1} is not readable: query the views ({', '.join(VIEWS)})")
            return sqlite3.SQLITE_DENY
        if arg1 in ("sqlite_master", "sqlite_temp_master"):  # how SQLite starts CREATE, DROP, json_each
            denied.append("schema changes and table-valued functions (json_each, pragma_*) are not allowed")
        else:
            denied.append(_ACTION_NAMES.get(action, f"action {action}") + " is not allowed")
        return sqlite3.SQLITE_DENY

    return authorize


_ACTION_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ")
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE", "SQLITE_DROP", "SQLITE_ALTER"))
    or name
    in (
        "SQLITE_INSERT",
        "SQLITE_UPDATE",
        "SQLITE_DELETE",
        "SQLITE_PRAGMA",
        "SQLITE_ATTACH",
        "SQLITE_DETACH",
        "SQLITE_TRANSACTION",
        "SQLITE_SAVEPOINT",
        "SQLITE_REINDEX",
        "SQLITE_ANALYZE",
    )
}


def _explain(exc: sqlite3.Error, denied: list[str], timed_out: bool) -> str:
    if timed_out:
        return (
            f"refused: the query ran longer than {TIME_LIMIT_S:g} s and was stopped. "
            "Add a LIMIT or a narrower WHERE."
        )
    if denied:
        return f"refused: {denied[0]}. Only SELECT over the views is allowed ({', '.join(VIEWS)})."
    return f"SQL error: {str(exc).rstrip('.')}. Views: " + "; ".join(
        f"{v}({cols})" for v, cols in VIEWS.items()
    )


def _cell(value: Any) -> Any:
    if isinstance(value, bytes):
        value = value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no infinity: the model reads "inf"
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS] + f"…[{len(value) - MAX_CELL_CHARS} more characters]"
    return value


def describe_views() -> str:
    """The views and their columns, one per line (for docs and errors)."""
    return "\n".join(f"- {name}({columns})" for name, columns in VIEWS.items())


def view_names() -> str:
    """The views by name (for the tool description: a query's answer names its columns)."""
    return ", ".join(VIEWS)
