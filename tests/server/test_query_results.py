"""query_results: SQL over the documented views only, enforced by SQLite (read-only connection +
authorizer + progress handler), on a real store filled through the real tools."""

import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.query import VIEWS
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

pytestmark = pytest.mark.asyncio


@asynccontextmanager
async def filled(settings: ServerSettings):
    """A server with one toy run: three experiments (one crash), a note, a second train.py version."""
    research = Research(settings).open()
    server = build_server(research)
    async with Client(server, raise_exceptions=True) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 5}))["run_id"]
        for x in (1.0, 0.5, 9.0):
            await call(client, "run_experiment", {"params": {"x": x, "y": 0.25}})
        await call(client, "add_note", {"text": "x near 0.3"})
        await call(
            client,
            "modify_train_py",
            {
                "description": "comment",
                "edits": [{"search": "import time\n", "replace": "import time\n# v2\n"}],
            },
        )
        yield client, run_id


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refused(client: Client, sql: str) -> str:
    result = await client.call_tool("query_results", {"sql": sql})
    assert result.is_error, result.structured_content
    return result.content[0].text


def dump(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        rows = [("schema", *names)]
        for table in ("runs", "experiments", "artifacts", "notes", "events", "jobs"):
            rows += [(table, *row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1")]
        return rows
    finally:
        conn.close()


async def test_the_views_answer_questions_about_runs_experiments_artifacts_and_notes(settings):
    async with filled(settings) as (client, run_id):
        best = await call(
            client,
            "query_results",
            {
                "sql": "SELECT iteration, json_extract(params, '$.x') AS x, metrics ->> 'score' AS score"
                " FROM v_experiments WHERE status = 'ok' ORDER BY metric DESC"
            },
        )
        assert best["columns"] == ["iteration", "x", "score"]
        assert [row[:2] for row in best["rows"]] == [[2, 0.5], [1, 1.0]]
        assert best["truncated"] is False
        runs = await call(client, "query_results", {"sql": "SELECT run_id, used, best_metric FROM v_runs"})
        assert runs["rows"] == [[run_id, 3, pytest.approx(-0.2425)]]
        counts = await call(
            client,
            "query_results",
            {
                "sql": "SELECT (SELECT count(*) FROM v_artifacts), (SELECT count(*) FROM v_notes),"
                # (in iteration order: without ORDER BY the order is the plan's, and an index may set it)
                " (SELECT group_concat(status) FROM (SELECT status FROM v_experiments ORDER BY iteration)),"
                " (SELECT count(*) FROM v_jobs)"
            },
        )
        assert counts["rows"] == [[2, 1, "ok,ok,crash", 0]]
        for view in VIEWS:  # every documented view exists, with the documented columns
            cols = await call(client, "query_results", {"sql": f"SELECT * FROM {view}", "max_rows": 1})
            documented = [c.split(" ")[0] for c in VIEWS[view].split(", ")]
            assert cols["columns"] == documented


async def test_rows_are_capped_by_max_rows(settings):
    async with filled(settings) as (client, _):
        page = await call(client, "query_results", {"sql": "SELECT * FROM v_experiments", "max_rows": 2})
        assert len(page["rows"]) == 2 and page["truncated"] is True
        too_many = await client.call_tool("query_results", {"sql": "SELECT 1", "max_rows": 5000})
        assert too_many.is_error and "less than or equal to 1000" in too_many.content[0].text


async def test_writes_attach_pragma_extensions_raw_tables_and_runaway_queries_are_refused(settings):
    async with filled(settings) as (client, _):
        before = dump(settings.db_path)
        attempts = {
            "INSERT INTO notes (run_id, kind, text, created_at) VALUES ('r', 'strategy', 'x', 'now')": "INSERT",
            "UPDATE runs SET budget = 1000": "UPDATE",
            "DELETE FROM experiments": "DELETE",
            "DROP VIEW v_runs": "schema changes",
            "CREATE TEMP TABLE t AS SELECT * FROM v_runs": "schema changes",
            f"ATTACH DATABASE '{settings.db_path.parent / 'other.db'}' AS other": "ATTACH",
            "PRAGMA table_info(runs)": "PRAGMA",
            "SELECT * FROM pragma_table_info('runs')": "table-valued functions",
            "SELECT load_extension('/tmp/evil.so')": "load_extension",
            "SELECT * FROM experiments": "experiments is not readable",
            "SELECT params_key FROM experiments": "experiments is not readable",
            "SELECT * FROM schema_migrations": "schema_migrations is not readable",
            "SELECT sql FROM sqlite_master": "sqlite_master is not readable",
            # a CTE named like a view is still not the view: it may not read what the view does not
            "WITH v_runs AS (SELECT detail FROM events) SELECT * FROM v_runs": "events is not readable",
            "WITH v_experiments AS (SELECT owner_pid FROM experiments) SELECT * FROM v_experiments": (
                "experiments is not readable"
            ),
            "SELECT randomblob(1000000)": "randomblob",
            "SELECT 1; DELETE FROM notes": "one statement",
            "BEGIN IMMEDIATE": "TRANSACTION",
        }
        for sql, expected in attempts.items():
            text = await refused(client, sql)
            assert expected in text, (sql, text)
        runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(x) FROM c"
        text = await refused(client, runaway)
        assert "ran longer than 2 s and was stopped" in text
        text = await refused(client, "SELECT * FROM no_such_view")
        assert "no such table: no_such_view" in text and "v_experiments(" in text
        assert dump(settings.db_path) == before
