"""Experiments measured at once: `--workers N` local workers share the cores' training threads, bad
values are refused in one line, and the budget, a keep rule that depends on the best, and re-evaluation
hold when K jobs finish together (a real server over MCP, a real SQLite file, real worker processes)."""

import argparse
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from starlette.testclient import TestClient

import race_task  # noqa: F401  (registers race-luck, here and in each worker it is sent to)
from autoresearch_mcp.cli import build_parser, main
from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.inspect_cmd import list_runs, show_run
from autoresearch_mcp.client.run_cmd import spawn_args
from autoresearch_mcp.contract.workers import cores, threads_per_worker
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.dashboard import dashboard_app
from autoresearch_mcp.server.main import settings_from_args
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from folder_fixture import make_folder
from race_task import MARGIN


@asynccontextmanager
async def serving(settings: ServerSettings) -> AsyncIterator[Client]:
    research = Research(settings).open()
    try:
        async with Client(build_server(research), raise_exceptions=True) as client:
            yield client
    finally:
        research.close()


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def submit_at_once(client: Client, run_id: str, params: list[dict[str, Any]]) -> list[Any]:
    """Every submission sent at the same moment: each one's job, or the refusal's text."""
    answers: list[Any] = [None] * len(params)

    async def submit(i: int) -> None:
        result = await client.call_tool("submit_training_job", {"params": params[i], "run_id": run_id})
        answers[i] = result.content[0].text if result.is_error else result.structured_content["job"]

    async with anyio.create_task_group() as group:
        for i in range(len(params)):
            group.start_soon(submit, i)
    return answers


async def all_done(client: Client, jobs: list[dict[str, Any]], timeout: float = 60) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    ends = []
    for job in jobs:
        while (info := await call(client, "get_job", {"job_id": job["id"], "wait_seconds": 1}))["job"][
            "status"
        ] in ("queued", "running"):
            assert time.monotonic() < deadline, f"job {job['id']} never ended"
        ends.append(info)
    return ends


def stored(db: Path, run_id: str) -> list[tuple]:
    """(iteration, status, metric, kept, note), in the order the results were recorded."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT iteration, status, metric, kept, note FROM experiments WHERE run_id = ? "
            "ORDER BY finished_at, id",
            (run_id,),
        ).fetchall()
    finally:
        conn.close()


# -- the flag ------------------------------------------------------------------------------------


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The command's error as the user sees it: exactly one line, exit status 2 (in this process: these
    are refused before any server starts)."""
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_workers_below_one_or_beyond_the_cores_are_refused_in_one_line(capsys, tmp_path: Path):
    db = str(tmp_path / "runs.db")
    for command in ("serve", "run"):
        line = one_line_error(capsys, command, "--db", db, "--workers", "0")
        assert "expected a whole number of workers from 1 to 1024, not '0'" in line
        line = one_line_error(capsys, command, "--db", db, "--workers", str(cores() + 1))
        assert f"--workers {cores() + 1} is more than this machine's {cores()} cores" in line
        assert "add --force" in line
    assert not (tmp_path / "runs.db").exists()  # refused before a server or a run started


def test_forced_workers_beyond_the_cores_are_taken_and_passed_to_the_spawned_server(tmp_path: Path):
    many = str(cores() + 3)
    serve = build_parser().parse_args(["serve", "--db", str(tmp_path / "r.db"), "--workers", many, "--force"])
    assert settings_from_args(serve).workers == cores() + 3
    run = build_parser().parse_args(["run", "--workers", many, "--force", "--llm", "scripted"])
    assert spawn_args(run) == ["--workers", many, "--force"]
    assert spawn_args(argparse.Namespace(workers=None)) == []


# -- each worker's share of the cores --------------------------------------------------------------


@pytest.mark.asyncio
async def test_each_local_worker_trains_on_its_share_of_the_cores_and_a_direct_experiment_on_the_runs(
    settings: ServerSettings,
):
    settings = settings.model_copy(update={"workers": 2})
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "race-luck", "budget": 3}))["run_id"]
        job = (await call(client, "submit_training_job", {"params": {"x": 1.0}}))["job"]
        (end,) = await all_done(client, [job])
        direct = await call(client, "run_experiment", {"params": {"x": 2.0}, "run_id": run_id})
    assert end["result"]["experiment"]["metrics"]["threads"] == threads_per_worker(2)
    assert direct["experiment"]["metrics"]["threads"] == 64  # the run's own limit


@pytest.mark.asyncio
async def test_a_task_folders_script_sees_its_workers_share_as_omp_num_threads_and_openmp_spins_briefly(
    settings: ServerSettings, tmp_path: Path
):
    script = (
        "import json, os\n"
        "x = json.loads(os.environ['AUTORESEARCH_PARAMS'])['x']\n"
        "print(f\"omp_threads: {os.environ['OMP_NUM_THREADS']}\")\n"
        "print(f\"omp_spin: {os.environ['GOMP_SPINCOUNT']}\")\n"
        'print(f"loss: {x * x}")\n'
    )
    folder = make_folder(tmp_path, "threaded", script=script, extra="threads = 8")
    settings = settings.model_copy(update={"workers": 2, "task_dirs": [str(folder)]})
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "threaded", "budget": 2}))["run_id"]
        job = (await call(client, "submit_training_job", {"params": {"x": 0.5}}))["job"]
        (end,) = await all_done(client, [job])
        direct = await call(client, "run_experiment", {"params": {"x": 0.25}, "run_id": run_id})
    assert end["result"]["experiment"]["metrics"]["omp_threads"] == min(8, threads_per_worker(2))
    assert direct["experiment"]["metrics"]["omp_threads"] == 8
    # idle OpenMP threads spin briefly, then sleep: spinning long took the cores workers share
    assert end["result"]["experiment"]["metrics"]["omp_spin"] == 10_000


# -- what is running, where people look --------------------------------------------------------------


@pytest.mark.asyncio
async def test_runs_show_and_the_dashboard_show_the_experiments_that_are_running(
    settings: ServerSettings, capsys, tmp_path: Path
):
    settings = settings.model_copy(update={"workers": 2})
    research = Research(settings).open()
    try:
        async with Client(build_server(research), raise_exceptions=True) as client:
            run_id = (await call(client, "start_run", {"task": "race-luck", "budget": 4}))["run_id"]
            jobs = [
                (await call(client, "submit_training_job", {"params": {"x": x, "sleep": 4}}))["job"]
                for x in (1.0, 2.0)
            ]
            deadline = time.monotonic() + 30
            while (run := (await call(client, "list_runs", {}))["runs"][0])["running"] < 2:
                assert time.monotonic() < deadline, run
                await anyio.sleep(0.2)
            capsys.readouterr()
            rc = ResearchClient(client)
            await list_runs(rc, build_parser().parse_args(["runs"]))
            await show_run(rc, build_parser().parse_args(["show", run_id]))
            out = capsys.readouterr().out
            dashboard = TestClient(dashboard_app(research.store, None, transcripts=tmp_path))
            row = dashboard.get("/api/runs").json()["runs"][0]
            page = dashboard.get(f"/fragments/runs/{run_id}").text
            await all_done(client, jobs)
    finally:
        research.close()
    assert "2/4 (2 running)" in out and "2/4 used (2 running now)" in out
    assert [line.split()[1] for line in out.splitlines() if line.split()[:1] in (["1"], ["2"])] == [
        "running",
        "running",
    ]  # show's table: both experiments, status running
    assert (row["used"], row["running"]) == (2, 2) and "2 running now" in page
    assert page.count('<td><span class="status status-running">running</span>') == 2  # the table's rows


@pytest.mark.asyncio
async def test_the_summary_lists_what_is_still_running_and_a_repeat_of_it_is_refused_saying_which(
    settings: ServerSettings,
):
    settings = settings.model_copy(update={"workers": 2})
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "race-luck", "budget": 5}))["run_id"]
        first = (await call(client, "submit_training_job", {"params": {"x": 0.3}}))["job"]
        await all_done(client, [first])
        jobs = [
            (await call(client, "submit_training_job", {"params": {"x": x, "sleep": 3}}))["job"]
            for x in (1.0, 2.0)
        ]
        summary = (await call(client, "get_run_summary", {"run_id": run_id}))["summary"]
        repeat = await client.call_tool("submit_training_job", {"params": {"x": 2.0, "sleep": 3}})
        await all_done(client, jobs)
        after = (await call(client, "get_run_summary", {"run_id": run_id}))["summary"]
    assert "Running: #2 x=1 sleep=3, #3 x=2 sleep=3" in summary.splitlines()
    assert "#2" not in summary.replace("Running: #2", "")  # listed once, not among the last results too
    assert repeat.is_error and repeat.content[0].text.startswith(
        "exact repeat of experiment #3 (same params on train.py v1), which has not finished yet (queued or"
        " running): its result comes with a later summary."
    )
    assert "Running:" not in after and "#3 " in after


# -- K completions at once ---------------------------------------------------------------------------

K = 4


@pytest.mark.asyncio
async def test_k_submissions_at_once_take_exactly_the_budget_and_the_rest_are_refused_free(
    settings: ServerSettings,
):
    settings = settings.model_copy(update={"workers": K})
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "race-luck", "budget": K}))["run_id"]
        params = [{"x": i / 10, "sleep": 1.0} for i in range(2 * K)]
        answers = await submit_at_once(client, run_id, params)
        jobs = [a for a in answers if isinstance(a, dict)]
        refusals = [a for a in answers if isinstance(a, str)]
        assert len(jobs) == K and len(refusals) == K
        assert all(f"used its whole budget ({K}/{K})" in text for text in refusals)
        assert sorted(j["iteration"] for j in jobs) == list(range(1, K + 1))
        ends = await all_done(client, jobs)
        run = (await call(client, "list_runs", {}))["runs"][0]
    assert [e["job"]["status"] for e in ends] == ["done"] * K
    assert run["used"] == K and run["status"] == "exhausted"
    rows = stored(settings.db_path, run_id)
    assert len(rows) == K and {r[1] for r in rows} == {"ok"}  # none left running, none beyond the budget


@pytest.mark.asyncio
async def test_results_finishing_together_are_each_judged_against_the_best_of_their_moment(
    settings: ServerSettings,
):
    settings = settings.model_copy(update={"workers": K})
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "race-luck", "budget": 3 * K}))["run_id"]
        # Three rounds of K results that land together: the rule's margin makes each verdict depend on
        # which of them was recorded first.
        for round_ in range(3):
            xs = [0.3 - 0.02 * (3 * K - (round_ * K + i)) for i in range(K)]
            answers = await submit_at_once(client, run_id, [{"x": x, "sleep": 0.5} for x in xs])
            assert all(isinstance(a, dict) for a in answers), answers
            await all_done(client, answers)
        run = (await call(client, "list_runs", {}))["runs"][0]
    rows = stored(settings.db_path, run_id)
    assert len(rows) == 3 * K and run["used"] == 3 * K
    best: float | None = None
    for _, status, metric, kept, _ in rows:  # replayed in the order they were recorded
        assert status == "ok"
        assert bool(kept) == (best is None or metric > best + MARGIN), rows
        if kept:
            best = metric
    assert run["best"]["metric"] == best


@pytest.mark.asyncio
async def test_would_be_bests_finishing_together_are_each_re_evaluated_within_the_budget(
    settings: ServerSettings,
):
    settings = settings.model_copy(update={"workers": K})
    budget = 2 * K + 1
    async with serving(settings) as client:
        start = {"task": "race-luck", "budget": budget, "reeval_seeds": 1}
        run_id = (await call(client, "start_run", start))["run_id"]
        # Each is a would-be best on the run's seed (luck), and no better than x=0.3 on any other.
        params = [{"x": 0.3 - 0.1 * i, "luck": 1.0, "sleep": 0.5} for i in range(K)]
        answers = await submit_at_once(client, run_id, params)
        jobs = [a for a in answers if isinstance(a, dict)]
        assert len(jobs) == K
        await all_done(client, jobs)
        run = (await call(client, "list_runs", {}))["runs"][0]
        history = await call(client, "get_experiment_history", {"run_id": run_id, "last": 50})
    rows = stored(settings.db_path, run_id)
    assert len(rows) <= budget and run["used"] == len(rows)
    assert {r[1] for r in rows} == {"ok"}
    re_evaluations = [r for r in rows if (r[4] or "").startswith("re-evaluation")]
    assert re_evaluations and all(not r[3] for r in re_evaluations)  # a re-evaluation is never the best
    # The best is kept on its mean over seeds: the luck of seed 42 is halved, never taken whole.
    best = next(e for e in history["experiments"] if e["iteration"] == run["best"]["iteration"])
    assert best["metrics"]["evaluations"] == 2
    assert best["metrics"]["score_mean"] == pytest.approx(best["metric"] - 0.5)
