"""Background jobs on local worker processes, through the MCP tools (real store, workers, sandbox)."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store

pytestmark = pytest.mark.asyncio


@asynccontextmanager
async def serving(settings: ServerSettings) -> AsyncIterator[Client]:
    research = Research(settings).open()
    server = build_server(research)
    try:
        async with Client(server, raise_exceptions=True) as client:
            yield client
    finally:
        research.close()


async def call(client: Client, tool: str, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args, **kwargs)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refused(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error
    return result.content[0].text


async def wait_for(client: Client, job_id: str, status: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = await call(client, "get_job", {"job_id": job_id, "wait_seconds": 0.5})
        if info["job"]["status"] == status:
            return info
        assert time.monotonic() < deadline, f"job {job_id} never became {status}: {info['job']}"


def counts(db: Path) -> tuple[int, int, int]:
    conn = sqlite3.connect(db)
    try:
        return tuple(
            conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("experiments", "jobs", "events")
        )  # type: ignore[return-value]
    finally:
        conn.close()


async def test_jobs_return_at_once_run_in_parallel_and_land_in_the_run(settings: ServerSettings):
    settings = settings.model_copy(update={"workers": 2})
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 3}))["run_id"]
        jobs = [
            (await call(client, "submit_training_job", {"params": {"x": x, "sleep": 1.5}}))["job"]
            for x in (0.0, 1.0, 0.25)
        ]
        assert [j["iteration"] for j in jobs] == [1, 2, 3]
        # Submitting does not wait for the experiments: none is done when its id comes back.
        assert {j["status"] for j in jobs[:2]} <= {"queued", "running"} and jobs[2]["status"] == "queued"

        progress: list[tuple[float, str]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message or ""))

        ends = [
            await call(
                client, "get_job", {"job_id": j["id"], "wait_seconds": 60}, progress_callback=on_progress
            )
            for j in jobs
        ]
        assert [e["job"]["status"] for e in ends] == ["done"] * 3
        assert [e["result"]["experiment"]["status"] for e in ends] == ["ok"] * 3
        assert ends[2]["result"]["experiment"]["metric"] == pytest.approx(-0.0425)
        assert ends[2]["result"]["run_status"] == "exhausted" and ends[2]["result"]["budget_left"] == 0
        assert any("running on local worker" in message for _, message in progress)

        first, second, third = (e["job"] for e in ends)
        # What the executor decided, not when the clocks say it ran: the second job found the first's
        # worker busy and started another (two at once); the third waited for one of them to be free.
        assert first["worker_pid"] != second["worker_pid"]
        assert third["worker_pid"] in (first["worker_pid"], second["worker_pid"])

        history = await call(client, "get_experiment_history", {"run_id": run_id})
        assert [e["status"] for e in history["experiments"]] == ["ok"] * 3
        runs = (await call(client, "list_runs", {}))["runs"]
        assert runs[0]["used"] == 3 and runs[0]["best"]["iteration"] == 3


async def test_submission_refuses_like_run_experiment_and_queued_jobs_hold_the_budget(
    settings: ServerSettings,
):
    settings = settings.model_copy(update={"workers": 1})
    async with serving(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 2})
        first = (await call(client, "submit_training_job", {"params": {"x": 1.0, "sleep": 1.0}}))["job"]
        before = counts(settings.db_path)
        text = await refused(client, "submit_training_job", {"params": {"x": 1.0, "sleep": 1.0}})
        assert "exact repeat of experiment #1" in text  # refused while #1 is still queued
        text = await refused(client, "submit_training_job", {"params": {"x": 11}})
        assert "x: Input should be less than or equal to 10" in text and "no budget used" in text
        text = await refused(client, "submit_training_job", {"params": {"bogus": 1}})
        assert "unknown parameter 'bogus'" in text
        experiments, jobs, events = counts(settings.db_path)
        assert (experiments, jobs) == before[:2] and events == before[2] + 3  # logged refusals only

        await call(client, "submit_training_job", {"params": {"x": 2.0}})
        text = await refused(client, "submit_training_job", {"params": {"x": 3.0}})
        assert "used its whole budget (2/2)" in text
        await wait_for(client, first["id"], "done")
        text = await refused(client, "get_job", {"job_id": "j-nope"})
        assert "unknown job 'j-nope'" in text


async def test_a_job_whose_worker_dies_fails_with_the_reason_and_its_experiment_is_interrupted(
    settings: ServerSettings,
):
    settings = settings.model_copy(update={"workers": 1})
    async with serving(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 5})
        job = (await call(client, "submit_training_job", {"params": {"x": 1.0, "sleep": 5}}))["job"]
        running = (await wait_for(client, job["id"], "running"))["job"]
        os.kill(running["worker_pid"], signal.SIGKILL)

        ended = await wait_for(client, job["id"], "failed")
        reason = f"the worker process (pid {running['worker_pid']}) died: killed by signal SIGKILL"
        assert ended["job"]["error"] == reason
        assert ended["result"]["experiment"]["status"] == "interrupted"
        assert ended["result"]["experiment"]["error_tail"] == f"job failed: {reason}"

        # the pool replaces the dead worker; the same params may run again (interrupted is no result)
        again = (await call(client, "submit_training_job", {"params": {"x": 1.0}}))["job"]
        done = await wait_for(client, again["id"], "done")
        assert done["result"]["experiment"]["status"] == "ok"
        assert done["job"]["worker_pid"] != running["worker_pid"]


async def test_jobs_a_dead_server_left_queued_or_running_are_failed_on_restart(settings: ServerSettings):
    store = Store(settings.db_path)
    run = store.create_run(
        task="toy-quadratic",
        budget=5,
        target=None,
        seed=1,
        name=None,
        config={"options": {}},
        initial_source="x",
    )
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(dead.stdout)
    conn = store.db.reader()
    for x, status in ((1.0, "queued"), (2.0, "running")):
        exp = store.reserve_experiment(run.id, {"x": x}, 1, None)
        conn.execute("UPDATE experiments SET owner_pid = ? WHERE id = ?", (dead_pid, exp.id))
        conn.execute(
            "INSERT INTO jobs (id, run_id, experiment_id, status, executor, submitted_at, owner_pid, owner_host)"
            " SELECT ?, run_id, id, ?, 'local', started_at, ?, owner_host FROM experiments WHERE id = ?",
            (f"j-{status}", status, dead_pid, exp.id),
        )
    store.close()

    async with serving(settings) as client:
        for status in ("queued", "running"):
            info = await call(client, "get_job", {"job_id": f"j-{status}"})
            assert info["job"]["status"] == "failed"
            assert info["job"]["error"] == f"the server stopped while this job was {status}"
            assert info["result"]["experiment"]["status"] == "interrupted"


async def test_the_job_and_sql_tools_are_typed_and_annotated_truly(settings: ServerSettings):
    async with serving(settings) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    submit, get_job, query = tools["submit_training_job"], tools["get_job"], tools["query_results"]
    assert submit.annotations.read_only_hint is False and submit.annotations.destructive_hint is False
    assert get_job.annotations.read_only_hint is True and query.annotations.read_only_hint is True
    assert all(t.output_schema is not None for t in (submit, get_job, query))
    assert submit.input_schema["properties"]["params"]["type"] == "object"
    assert set(get_job.input_schema["properties"]) == {"job_id", "wait_seconds"}
    assert query.input_schema["required"] == ["sql"]
    assert "v_experiments" in (query.description or "")


async def test_a_finished_job_says_why_its_experiment_was_or_was_not_kept_as_run_experiment_does(
    settings: ServerSettings,
):
    settings = settings.model_copy(update={"workers": 1})
    async with serving(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 5})
        direct = await call(client, "run_experiment", {"params": {"x": 0.25}})
        job = (await call(client, "submit_training_job", {"params": {"x": 1.0}}))["job"]
        await wait_for(client, job["id"], "done")
        ended = await client.call_tool("get_job", {"job_id": job["id"]})
    assert direct["message"].startswith("kept: the run's first result")
    message = ended.structured_content["result"]["message"]
    assert message.startswith("not kept: ") and "does not beat the best's" in message and "(#1)" in message
    assert ended.content[0].text.endswith(message[:1].upper() + message[1:] + ".")
