"""Kill the real stdio server in the middle of an experiment, start it again: nothing recorded is lost."""

import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import TESTS_DIR

pytestmark = pytest.mark.asyncio


def server_params(db: Path, csv: Path, data_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "autoresearch_mcp.server", "--db", str(db), "--data", str(csv)],
        env={
            "AUTORESEARCH_TASK_PLUGINS": "toy_task",
            "PYTHONPATH": str(TESTS_DIR),
            "AUTORESEARCH_DATA_DIR": str(data_dir),
            "AUTORESEARCH_LOG_LEVEL": "WARNING",
        },
    )


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def running_experiment_owner(db: Path) -> int | None:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT owner_pid FROM experiments WHERE status = 'running'").fetchone()
    finally:
        conn.close()
    return None if row is None else row[0]


async def test_a_killed_server_leaves_the_interrupted_experiment_marked_and_the_run_resumes(
    tmp_path: Path, covtype_csv: Path, isolated_data_dir: Path
):
    db = tmp_path / "runs.db"
    params = server_params(db, covtype_csv, isolated_data_dir)

    async with Client(params) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 5}))["run_id"]
        await call(client, "run_experiment", {"params": {"x": 1.0}})
        await call(client, "run_experiment", {"params": {"x": 0.2}, "note": "closer"})
        await call(client, "add_note", {"text": "x near 0.3 looks best"})

        with pytest.raises(BaseException):  # noqa: B017 (the connection dies with the server)
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, client, "run_experiment", {"params": {"x": 0.4, "sleep": 60}})
                deadline = time.monotonic() + 20
                while (pid := running_experiment_owner(db)) is None:
                    assert time.monotonic() < deadline, "the experiment never started"
                    await anyio.sleep(0.05)
                os.kill(pid, signal.SIGKILL)
                await anyio.sleep(30)  # the call above fails first when the server dies

    async with Client(params) as client:
        history = await call(client, "get_experiment_history", {"run_id": run_id})
        assert [e["status"] for e in history["experiments"]] == ["ok", "ok", "interrupted"]
        assert history["experiments"][1]["note"] == "closer"
        summary = (await call(client, "get_run_summary", {"run_id": run_id}))["summary"]
        # the interrupted experiment measured nothing: it keeps its number (#3) and costs no budget
        assert "2/5 used" in summary and "x near 0.3 looks best" in summary
        resumed = await call(client, "run_experiment", {"params": {"x": 0.3}, "run_id": run_id})
        assert resumed["experiment"]["iteration"] == 4 and resumed["is_new_best"]
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
