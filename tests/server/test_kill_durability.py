"""kill -9 the real stdio server at random moments: during an experiment, during a train.py edit and
during a background job. On restart nothing the server had confirmed is lost or changed, nothing is
half-written (integrity_check, whole artifact versions 1..n with matching sha256, iterations 1..k), the
work that was in flight is marked (experiments 'interrupted', jobs 'failed'), and the run goes on.

Each round: a server starts (recovering from the previous kill, which it is checked for first), two
lanes of calls run (experiments, edits and notes; background jobs), and the server is killed at a random
moment chosen by a seeded generator once the targeted kind of work is in flight; a last server checks
the last kill. The default run kills once; `-m slow` 20 times.
The sandbox processes of the killed server are found through their temporary directories (TMPDIR) and
the job workers through the jobs table; see also the separate leftover-process test at the end.
"""

import contextlib
import os
import random
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from mcp import Client, StdioServerParameters
from record_checks import assert_store_consistent, connect, parent_of, processes_mentioning

from conftest import TESTS_DIR
from toy_task import SOURCE

pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds processes through /proc"),
]

Target = Literal["experiment", "edit", "job"]
TARGETS: tuple[Target, ...] = ("experiment", "edit", "job")
WAIT_S = 30.0  # for the server to start or the targeted work to begin: far above what it takes


@dataclass
class Cluster:
    """One database, and the server processes that take turns on it."""

    db: Path
    csv: Path
    data_dir: Path
    sandbox_tmp: Path

    def params(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=[
                *("-m", "autoresearch_mcp.cli", "serve", "--workers", "1"),
                *("--db", str(self.db), "--data", str(self.csv)),
            ],
            env={
                "AUTORESEARCH_TASK_PLUGINS": "toy_task",
                "PYTHONPATH": str(TESTS_DIR),
                "AUTORESEARCH_DATA_DIR": str(self.data_dir),
                "AUTORESEARCH_LOG_LEVEL": "WARNING",
                "TMPDIR": str(self.sandbox_tmp),  # the sandboxes (and the job worker's) make their dirs here
            },
        )

    killed: bool = False

    def kill_server(self) -> int:
        """SIGKILL the running server; returns its pid."""
        pid = self.server_pid()
        self.killed = True
        os.kill(pid, signal.SIGKILL)
        return pid

    def server_pid(self) -> int:
        found = {
            pid for pid, cmd in processes_mentioning(str(self.db)) if "autoresearch_mcp.cli serve" in cmd
        }
        # A child the server is forking (a sandbox or a worker, before its exec) still shows the
        # server's command line for a moment: the server is the one whose parent is not among them.
        servers = [pid for pid in found if parent_of(pid) not in found]
        assert len(servers) == 1, (found, servers)
        return servers[0]


@dataclass
class Confirmed:
    """What the server answered without error, i.e. had committed, across every round."""

    experiments: dict[int, tuple[str, float | None, int]] = field(default_factory=dict)
    versions: dict[int, str] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)
    jobs_done: dict[str, int] = field(default_factory=dict)

    def experiment(self, exp: dict[str, Any]) -> None:
        if exp["status"] != "running":
            self.experiments[exp["id"]] = (exp["status"], exp["metric"], exp["iteration"])


@dataclass
class KillReport:
    run_id: str
    target: Target
    in_flight: set[str]
    running_experiments: set[int]
    open_jobs: dict[str, int]
    leftovers: list[tuple[int, str]]


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


class Lanes:
    """The workload: lane A does experiments, edits and notes; lane B does background jobs."""

    def __init__(self, client: Client, run_id: str, rng: random.Random, confirmed: Confirmed) -> None:
        self.client, self.run_id, self.rng, self.confirmed = client, run_id, rng, confirmed
        self.in_flight: set[str] = set()
        self.counter = 0

    def x(self) -> float:
        self.counter += 1
        return round(self.rng.uniform(-10, 10), 6) + self.counter * 1e-9  # never an exact repeat

    async def _tracked(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        self.in_flight.add(tool)
        try:
            return await call(self.client, tool, {**args, "run_id": self.run_id})
        finally:
            self.in_flight.discard(tool)

    async def lane_a(self, target: Target) -> None:
        while True:
            choice = "edit" if target == "edit" else self.rng.choice(["experiment"] * 3 + ["edit", "note"])
            if choice == "experiment":
                sleep = round(self.rng.uniform(0.1, 0.6), 3)
                done = await self._tracked("run_experiment", {"params": {"x": self.x(), "sleep": sleep}})
                self.confirmed.experiment(done["experiment"])
            elif choice == "edit":
                if target == "edit" or self.rng.random() < 0.5:
                    padding = f"# edit {self.x()}\n" * self.rng.randint(1, 2000)  # up to ~60 KB
                    args = {"source": SOURCE + padding}
                else:
                    current = await self.client.call_tool("get_current_train_py", {"run_id": self.run_id})
                    source = current.content[0].text.split("\n", 1)[1]  # a header line, then the source
                    line = source.splitlines()[-1] + "\n"
                    args = {"edits": [{"search": line, "replace": line + f"# edit {self.x()}\n"}]}
                    if source.count(line) != 1:
                        args = {"source": SOURCE + f"# reset {self.x()}\n"}
                version = await self._tracked("modify_train_py", {"description": "edit", **args})
                self.confirmed.versions[version["version"]] = version["sha256"]
            else:
                note = await self._tracked("add_note", {"text": f"note {self.x()}"})
                self.confirmed.notes[note["id"]] = note["text"]

    async def lane_b(self) -> None:
        while True:
            sleep = round(self.rng.uniform(0.2, 1.0), 3)
            job = await self._tracked("submit_training_job", {"params": {"x": self.x(), "sleep": sleep}})
            job_id = job["job"]["id"]
            self.in_flight.add("job")
            ended = await call(self.client, "get_job", {"job_id": job_id, "wait_seconds": 60})
            self.in_flight.discard("job")
            assert ended["job"]["status"] == "done", ended
            self.confirmed.jobs_done[job_id] = ended["job"]["experiment_id"]
            self.confirmed.experiment(ended["result"]["experiment"])


def in_flight_in_db(db: Path) -> tuple[set[int], dict[str, int], dict[str, int | None]]:
    """Experiments running, jobs queued or running (-> experiment id), and those jobs' worker pids."""
    conn = connect(db)
    try:
        running = {row[0] for row in conn.execute("SELECT id FROM experiments WHERE status = 'running'")}
        jobs = conn.execute(
            "SELECT id, experiment_id, worker_pid FROM jobs WHERE status IN ('queued', 'running')"
        ).fetchall()
        return running, {j["id"]: j["experiment_id"] for j in jobs}, {j["id"]: j["worker_pid"] for j in jobs}
    finally:
        conn.close()


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = anyio.current_time() + WAIT_S
    while not condition():
        assert anyio.current_time() < deadline, f"waited {WAIT_S:g} s for: {what}"
        await anyio.sleep(0.02)


def target_in_flight(target: Target, lanes: Lanes, db: Path) -> bool:
    if target == "edit":
        return "modify_train_py" in lanes.in_flight
    running, jobs, workers = in_flight_in_db(db)
    if target == "job":
        return any(workers.values())  # a job a worker has picked up
    return bool(running - set(jobs.values()))  # an experiment of run_experiment itself


def reap_leftovers(cluster: Cluster, worker_pids: set[int], grace_s: float) -> list[tuple[int, str]]:
    """Processes of the killed server still alive after `grace_s`: its sandboxes and job workers. They
    are ours (found by this test's own TMPDIR and the jobs table), so end them, and report them."""
    deadline = time.monotonic() + grace_s
    while True:
        left = processes_mentioning(str(cluster.sandbox_tmp))
        left += [
            (pid, cmd)
            for pid, cmd in processes_mentioning("autoresearch_mcp.server.jobs.worker")
            if pid in worker_pids
        ]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for pid, _ in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


async def kill_round(
    cluster: Cluster,
    rng: random.Random,
    confirmed: Confirmed,
    target: Target,
    grace_s: float,
    previous: KillReport | None,
) -> KillReport:
    """Start a server, check it recovered from the `previous` kill (or, the first, start the run), load
    it, and SIGKILL it at a random moment while `target` work is in flight."""
    report: KillReport | None = None

    async def load_and_kill(client: Client) -> None:
        nonlocal report
        if previous is None:
            run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 10_000}))["run_id"]
            await call(client, "add_note", {"text": "before any kill"})
        else:
            run_id = previous.run_id
            await check_recovered(client, cluster, confirmed, previous)
        lanes = Lanes(client, run_id, rng, confirmed)
        async with anyio.create_task_group() as tg:
            tg.start_soon(until_killed, cluster, lanes.lane_a(target))
            tg.start_soon(until_killed, cluster, lanes.lane_b())
            in_flight_now = lambda: target_in_flight(target, lanes, cluster.db)  # noqa: E731
            await until(in_flight_now, f"{target} in flight")
            await anyio.sleep(rng.uniform(0.0, 0.3))  # a random moment...
            await until(in_flight_now, f"{target} in flight")  # ...at which the target work is in flight
            in_flight = set(lanes.in_flight)  # (no await between this check and the kill)
            pid = cluster.kill_server()
            while _alive(pid):
                await anyio.sleep(0.01)
            running, open_jobs, workers = in_flight_in_db(cluster.db)  # final: nothing writes now
            leftovers = await anyio.to_thread.run_sync(
                reap_leftovers, cluster, {p for p in workers.values() if p}, grace_s
            )
            report = KillReport(run_id, target, in_flight, running, open_jobs, leftovers)
            tg.cancel_scope.cancel()

    await with_dying_server(cluster, load_and_kill)
    assert report is not None
    return report


async def until_killed(cluster: Cluster, lane: Awaitable[None]) -> None:
    """Run a lane of calls; once the server is killed, its broken calls end the lane quietly."""
    try:
        await lane
    except Exception as exc:
        if not cluster.killed or _contains(exc, AssertionError):
            raise


async def with_dying_server(cluster: Cluster, body: Callable[[Client], Awaitable[None]]) -> None:
    """Run `body` against a fresh server that it kills (with `cluster.kill_server`). Errors of the
    broken connection after the kill are expected; any error before it, or an assertion, is a failure."""
    cluster.killed = False
    with anyio.fail_after(WAIT_S * 3):
        try:
            async with Client(cluster.params()) as client:
                await body(client)
        except Exception as exc:  # the transport and the pending calls fail when the server dies
            if not cluster.killed or _contains(exc, AssertionError):
                raise


def _contains(exc: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_contains(inner, kind) for inner in exc.exceptions)
    return isinstance(exc, kind)


def _alive(pid: int) -> bool:
    """Running, i.e. neither gone nor a zombie waiting for its parent (the stdio client) to reap it."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


async def check_recovered(client: Client, cluster: Cluster, confirmed: Confirmed, report: KillReport) -> None:
    """On a server just restarted (idle, its recovery done): the kill lost nothing, half-wrote nothing
    and marked what ran, and the run goes on."""
    run_id = report.run_id
    assert_store_consistent(cluster.db)  # the restart has recovered; this server is idle
    history = await call(client, "get_experiment_history", {"run_id": run_id})
    by_id = {e["id"]: e for e in history["experiments"]}
    for exp_id, (status, metric, iteration) in confirmed.experiments.items():
        assert exp_id in by_id, f"confirmed experiment {exp_id} is gone"
        exp = by_id[exp_id]
        assert (exp["status"], exp["metric"], exp["iteration"]) == (status, metric, iteration)
    for exp_id in report.running_experiments:
        assert by_id[exp_id]["status"] == "interrupted", by_id[exp_id]
        assert "stopped" in (by_id[exp_id]["error_tail"] or "")
    for job_id, exp_id in report.open_jobs.items():
        job = await call(client, "get_job", {"job_id": job_id})
        if exp_id in report.running_experiments:
            assert job["job"]["status"] == "failed" and "server stopped" in job["job"]["error"], job
        else:  # its outcome was recorded just before the kill
            assert job["job"]["status"] == "done", job
    for job_id in confirmed.jobs_done:
        assert (await call(client, "get_job", {"job_id": job_id}))["job"]["status"] == "done"
    conn = connect(cluster.db)
    try:
        stored = dict(conn.execute("SELECT version, sha256 FROM artifacts WHERE run_id = ?", (run_id,)))
        notes = dict(conn.execute("SELECT id, text FROM notes WHERE run_id = ?", (run_id,)))
    finally:
        conn.close()
    assert {v: stored.get(v) for v in confirmed.versions} == confirmed.versions
    assert {n: notes.get(n) for n in confirmed.notes} == confirmed.notes
    # the run resumes where it stood
    before = history["total"]
    done = await call(
        client, "run_experiment", {"params": {"x": 0.3, "y": -0.2 - before * 1e-9}, "run_id": run_id}
    )
    assert done["experiment"]["iteration"] == before + 1 and done["experiment"]["status"] == "ok"
    confirmed.experiment(done["experiment"])


async def kill_repeatedly(
    tmp_path: Path, csv: Path, data_dir: Path, seed: int, targets: list[Target]
) -> list[KillReport]:
    sandbox_tmp = tmp_path / "sandboxes"
    sandbox_tmp.mkdir()
    cluster = Cluster(tmp_path / "runs.db", csv, data_dir, sandbox_tmp)
    rng = random.Random(seed)
    confirmed = Confirmed()
    reports: list[KillReport] = []
    for target in targets:  # one server a round, which checks the round before's kill first
        previous = reports[-1] if reports else None
        reports.append(await kill_round(cluster, rng, confirmed, target, 3.0, previous))
    async with Client(cluster.params()) as client:  # the last kill's restart
        await check_recovered(client, cluster, confirmed, reports[-1])
    return reports


async def test_a_server_killed_at_a_random_moment_loses_nothing_committed_and_marks_what_ran(
    tmp_path: Path, covtype_csv: Path, isolated_data_dir: Path
):
    rng = random.Random(7)
    target = rng.choice(TARGETS)
    [report] = await kill_repeatedly(tmp_path, covtype_csv, isolated_data_dir, seed=7, targets=[target])
    assert report.target == target
    if target == "edit":
        assert "modify_train_py" in report.in_flight
    else:
        assert report.running_experiments  # it was killed with work in flight, now marked interrupted


@pytest.mark.slow
async def test_twenty_kills_at_random_moments_lose_nothing_committed_and_mark_what_ran(
    tmp_path: Path, covtype_csv: Path, isolated_data_dir: Path
):
    targets = [TARGETS[i % 3] for i in range(20)]
    reports = await kill_repeatedly(tmp_path, covtype_csv, isolated_data_dir, seed=2024, targets=targets)
    assert len(reports) == 20
    print(
        "STATS",
        [
            (r.target, sorted(r.in_flight), len(r.running_experiments), len(r.open_jobs), len(r.leftovers))
            for r in reports
        ],
    )
    for report in reports:  # each kill hit its target: an edit, a job on a worker, an experiment
        if report.target == "edit":
            assert "modify_train_py" in report.in_flight
        elif report.target == "job":
            assert report.open_jobs and report.running_experiments & set(report.open_jobs.values())
        else:
            assert report.running_experiments - set(report.open_jobs.values())
    # short experiments (<= 1 s) end by themselves, so no process of theirs may remain after 3 s either
    assert [r.leftovers for r in reports if r.leftovers] == []


async def test_no_sandbox_or_job_worker_of_a_killed_server_keeps_running(
    tmp_path: Path, covtype_csv: Path, isolated_data_dir: Path
):
    """An experiment and a job that would each run 60 s more: 5 s after the server dies, nothing of
    theirs may still run (the sandbox's wall-clock limit is enforced by the server, which is gone)."""
    sandbox_tmp = tmp_path / "sandboxes"
    sandbox_tmp.mkdir()
    cluster = Cluster(tmp_path / "runs.db", covtype_csv, isolated_data_dir, sandbox_tmp)
    seen: dict[str, Any] = {}

    async def hold_and_kill(client: Client) -> None:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 5})
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, client, "run_experiment", {"params": {"x": 1.0, "sleep": 60}})
            await call(client, "submit_training_job", {"params": {"x": 2.0, "sleep": 60}})
            await until(lambda: _both_running(cluster), "an experiment and a job running")
            await until(lambda: len(_sandbox_dirs(sandbox_tmp)) == 2, "both sandboxes started")
            seen["sandboxes"] = processes_mentioning(str(sandbox_tmp))  # the detector sees them
            _, _, workers = in_flight_in_db(cluster.db)
            cluster.kill_server()
            seen["leftovers"] = await anyio.to_thread.run_sync(
                reap_leftovers, cluster, {p for p in workers.values() if p}, 5.0
            )
            tg.cancel_scope.cancel()

    await with_dying_server(cluster, hold_and_kill)
    assert seen["sandboxes"]
    assert seen["leftovers"] == [], (
        "processes of the killed server were still running 5 s after it died (ended by this test):\n"
        + "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in seen["leftovers"])
    )


def _sandbox_dirs(sandbox_tmp: Path) -> set[str]:
    """The sandboxes (one temporary directory each) that have live processes."""
    prefix = str(sandbox_tmp) + "/"
    return {cmd.split(prefix)[1].split("/")[0] for _, cmd in processes_mentioning(prefix)}


def _both_running(cluster: Cluster) -> bool:
    running, _, workers = in_flight_in_db(cluster.db)
    return len(running) == 2 and any(workers.values())
