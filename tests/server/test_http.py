"""The real server over streamable HTTP, as a subprocess on the loopback port it picked: refusals before
it starts, several clients at once on shared runs, background jobs, and resuming after a restart. Who
gets in (the token, the Host and Origin checks) is test_http_auth.py's table."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from autoresearch_mcp.cli import main
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.http import build_http_app
from autoresearch_mcp.server.settings import ServerSettings
from http_servers import http_server, serve_command

TOKEN = "test-token-0123456789abcdef"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@asynccontextmanager
async def connect(port: int, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client,
    ):
        yield client


async def call(client: Client, tool: str, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args, **kwargs)
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_serving_beyond_loopback_without_a_token_is_refused(
    tmp_path: Path, covtype_csv: Path, capsys: pytest.CaptureFixture[str]
):
    # The command in this process: it is refused before anything starts, all a subprocess would run.
    command = serve_command(tmp_path / "runs.db", covtype_csv, "--host", "0.0.0.0")
    assert command[1:4] == ["-m", "autoresearch_mcp.cli", "serve"]
    assert main(command[3:]) == 2
    said = capsys.readouterr().err
    assert "refusing to serve on 0.0.0.0 without a bearer token" in said
    assert "--token or set AUTORESEARCH_TOKEN" in said
    assert not (tmp_path / "runs.db").exists()  # refused before opening anything


def test_weak_tokens_and_public_binds_without_one_are_refused_before_anything_starts(
    settings: ServerSettings,
):
    with pytest.raises(ResearchError, match="the bearer token is too short"):
        build_http_app(settings, host="127.0.0.1", token="short")
    with pytest.raises(ResearchError, match="without a bearer token"):
        build_http_app(settings, host="192.0.2.10")
    assert not settings.db_path.exists()


@pytest.mark.asyncio
async def test_several_http_clients_share_runs_safely_and_runs_resume_after_a_restart(
    tmp_path: Path, covtype_csv: Path
):
    db, data = tmp_path / "runs.db", tmp_path / "data"
    with http_server(db, covtype_csv, data, "--token", TOKEN) as port:
        async with connect(port, TOKEN) as a, connect(port, TOKEN) as b, connect(port, TOKEN) as c:
            shared = (await call(a, "start_run", {"task": "toy-quadratic", "budget": 4}))["run_id"]
            own = (await call(c, "start_run", {"task": "toy-quadratic", "budget": 4}))["run_id"]
            outcomes: dict[str, list[str]] = {"a": [], "b": []}

            async def experiments(client: Client, who: str, xs: tuple[float, ...]) -> None:
                for x in xs:
                    result = await client.call_tool("run_experiment", {"params": {"x": x}, "run_id": shared})
                    outcomes[who].append(result.content[0].text if result.is_error else "ok")

            async def edits(client: Client, who: str) -> None:
                for i in range(4):
                    change = {"search": "import time\n", "replace": f"import time\n# {who} {i}\n"}
                    await call(
                        client,
                        "modify_train_py",
                        {"description": f"{who} {i}", "edits": [change], "run_id": shared},
                    )

            async def other_run() -> None:
                for x in (1.0, 2.0):
                    await call(c, "run_experiment", {"params": {"x": x}, "run_id": own})

            # two agents edit the shared train.py at once while a third works on its own run; then
            # both race for the shared run's last units of budget (an exhausted run's train.py is frozen)
            async with anyio.create_task_group() as tg:
                tg.start_soon(edits, a, "a")
                tg.start_soon(edits, b, "b")
                tg.start_soon(other_run)
            async with anyio.create_task_group() as tg:
                tg.start_soon(experiments, a, "a", (1.0, 2.0, 3.0))
                tg.start_soon(experiments, b, "b", (4.0, 5.0, 6.0))

            results = outcomes["a"] + outcomes["b"]
            assert results.count("ok") == 4  # the budget, exactly: never more
            refusals = [r for r in results if r != "ok"]
            assert all("whole budget (4/4)" in r or f"run {shared} is exhausted" in r for r in refusals)
            history = await call(a, "get_experiment_history", {"run_id": shared})
            assert [e["iteration"] for e in history["experiments"]] == [1, 2, 3, 4]
            current = await b.call_tool("get_current_train_py", {"run_id": shared})
            assert current.structured_content["version"] == 9
            assert all(f"# {who} {i}\n" in current.content[0].text for who in "ab" for i in range(4))

            # a background job over HTTP, with progress while get_job waits
            progress: list[str] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(message or "")

            job = await call(c, "submit_training_job", {"params": {"x": 0.3, "sleep": 1.0}, "run_id": own})
            done = await call(
                c, "get_job", {"job_id": job["job"]["id"], "wait_seconds": 60}, progress_callback=on_progress
            )
            assert done["job"]["status"] == "done" and done["result"]["is_new_best"]
            assert progress and progress[-1].startswith(f"job {job['job']['id']}")

    with http_server(db, covtype_csv, data, "--token", TOKEN) as port:
        async with connect(port, TOKEN) as client:
            runs = {r["id"]: r for r in (await call(client, "list_runs", {}))["runs"]}
            assert runs[shared]["status"] == "exhausted" and runs[shared]["used"] == 4
            assert runs[own]["status"] == "running" and runs[own]["used"] == 3
            assert runs[own]["best"]["iteration"] == 3
            last = await call(client, "run_experiment", {"params": {"x": 0.1}, "run_id": own})
            assert last["experiment"]["iteration"] == 4 and last["run_status"] == "exhausted"
            rows = await call(
                client, "query_results", {"sql": "SELECT status, count(*) FROM v_jobs GROUP BY status"}
            )
            assert rows["rows"] == [["done", 1]]
