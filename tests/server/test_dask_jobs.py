"""Background jobs on a real Dask cluster (LocalCluster with worker processes) through the MCP tools."""

import itertools
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import dask
import pytest
from distributed import LocalCluster
from mcp import Client

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from conftest import unused_port
from folder_fixture import make_folder

# Each test starts a cluster of worker processes (seconds of start-up): the slow set, which CI runs.
pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    # Spawned Dask workers must import the test-only task; the job payload names its module.
    monkeypatch.setenv("PYTHONPATH", os.path.dirname(os.path.dirname(__file__)))
    # A task whose worker dies fails at once (the default retries it on other workers 3 times).
    # The scheduler opens its HTTP server even without a dashboard, on 8787 unless told otherwise: a
    # second cluster on another xdist worker would find it taken (a warning, so an error here).
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": ":0"},
        ) as local,
    ):
        yield local


@asynccontextmanager
async def serving(settings: ServerSettings) -> AsyncIterator[Client]:
    research = Research(settings).open()
    server = build_server(research)
    try:
        async with Client(server, raise_exceptions=True) as client:
            yield client
    finally:
        research.close()


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def wait_for(client: Client, job_id: str, status: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        info = await call(client, "get_job", {"job_id": job_id, "wait_seconds": 0.5})
        if info["job"]["status"] == status:
            return info
        assert time.monotonic() < deadline, f"job {job_id} never became {status}: {info['job']}"


async def test_dask_workers_run_several_experiments_at_once_and_the_server_records_them(
    settings: ServerSettings, cluster: LocalCluster
):
    settings = settings.model_copy(update={"dask_scheduler": cluster.scheduler_address})
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 3}))["run_id"]
        jobs = [
            (await call(client, "submit_training_job", {"params": {"x": x, "sleep": 1.0}, "run_id": run_id}))
            for x in (0.0, 0.5, 1.0)
        ]
        assert all(j["job"]["executor"] == f"dask {cluster.scheduler_address}" for j in jobs)
        ends = [await wait_for(client, j["job"]["id"], "done") for j in jobs]

    assert [e["result"]["experiment"]["status"] for e in ends] == ["ok"] * 3
    assert [e["result"]["experiment"]["iteration"] for e in ends] == [1, 2, 3]
    workers = {e["job"]["worker"].split(",")[0] for e in ends}
    assert workers == {f"dask worker {address}" for address in cluster.scheduler_info["workers"]}
    spans = sorted(
        (e["result"]["experiment"]["started_at"], e["result"]["experiment"]["finished_at"]) for e in ends
    )
    assert any(a[0] < b[1] and b[0] < a[1] for a, b in itertools.pairwise(spans))  # overlap
    assert ends[-1]["result"]["run_status"] == "exhausted"


async def recorded_run(settings: ServerSettings, params: list[dict[str, Any]]) -> tuple[list, Any]:
    """A run fed these jobs, two at a time as an agent with two workers feeds it: its experiments
    (iteration, params, status, metric) and its best's iteration."""
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": len(params)}))["run_id"]
        for pair in (params[i : i + 2] for i in range(0, len(params), 2)):
            jobs = [await call(client, "submit_training_job", {"params": p, "run_id": run_id}) for p in pair]
            for job in jobs:
                await wait_for(client, job["job"]["id"], "done")
        history = await call(client, "get_experiment_history", {"run_id": run_id})
        run = (await call(client, "list_runs", {}))["runs"][0]
    experiments = [(e["iteration"], e["params"], e["status"], e["metric"]) for e in history["experiments"]]
    return experiments, (run["status"], run["used"], run["best"]["iteration"])


async def test_a_dask_run_records_the_same_experiments_as_the_local_executor(
    settings: ServerSettings, cluster: LocalCluster, tmp_path
):
    # The same run, the agent's calls unchanged: only where the experiments are measured differs.
    params = [{"x": x, "y": 0.1} for x in (0.0, 0.5, 9.0, 0.25, 0.3, -1.0)]  # x=9 crashes
    local = settings.model_copy(update={"workers": 2, "db_path": tmp_path / "local.db"})
    dask_fed = settings.model_copy(
        update={"dask_scheduler": cluster.scheduler_address, "db_path": tmp_path / "dask.db"}
    )
    on_local = await recorded_run(local, params)
    on_dask = await recorded_run(dask_fed, params)
    assert on_dask == on_local
    assert [status for _, _, status, _ in on_local[0]] == ["ok", "ok", "crash", "ok", "ok", "ok"]
    assert on_local[1] == ("exhausted", 6, 5)


async def test_a_task_folder_outside_the_repository_runs_its_jobs_on_dask_workers(
    settings: ServerSettings, cluster: LocalCluster, tmp_path
):
    folder = make_folder(tmp_path / "elsewhere")
    settings = settings.model_copy(
        update={"dask_scheduler": cluster.scheduler_address, "task_dirs": [str(folder)]}
    )
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 2}))["run_id"]
        job = await call(client, "submit_training_job", {"params": {"x": 0.3}, "run_id": run_id})
        end = await wait_for(client, job["job"]["id"], "done")
    assert end["job"]["worker"].startswith("dask worker")
    assert end["result"]["experiment"]["status"] == "ok" and end["result"]["experiment"]["metric"] == 0.08


async def test_a_job_whose_dask_worker_dies_fails_with_the_reason(
    settings: ServerSettings, cluster: LocalCluster
):
    settings = settings.model_copy(update={"dask_scheduler": cluster.scheduler_address})
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 3}))["run_id"]
        job = await call(client, "submit_training_job", {"params": {"x": 1.0, "sleep": 10}, "run_id": run_id})
        running = (await wait_for(client, job["job"]["id"], "running"))["job"]
        os.kill(running["worker_pid"], signal.SIGKILL)
        ended = await wait_for(client, job["job"]["id"], "failed")

    assert ended["job"]["error"].startswith("the Dask worker running it died: Attempted to run task")
    assert ended["result"]["experiment"]["status"] == "interrupted"
    assert "the Dask worker running it died" in ended["result"]["experiment"]["error_tail"]


async def test_an_unreachable_scheduler_is_a_clear_error_that_costs_no_budget(settings: ServerSettings):
    with unused_port() as port:
        address = f"tcp://127.0.0.1:{port}"
        settings = settings.model_copy(update={"dask_scheduler": address})
        async with serving(settings) as client:
            run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 3}))["run_id"]
            result = await client.call_tool("submit_training_job", {"params": {"x": 1.0}, "run_id": run_id})
            assert (
                result.is_error and f"cannot reach the Dask scheduler at {address}" in result.content[0].text
            )
            summary = (await call(client, "get_run_summary", {"run_id": run_id}))["summary"]
    assert "0/3 used" in summary
