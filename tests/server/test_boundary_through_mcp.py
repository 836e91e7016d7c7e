"""Three of the four reproductions of the boundary issue, through the MCP tools, each of which went through on
main (the first, a complete Python escape through the guard, is moot: the shipped tasks have no guard, and
their verdict no longer rests on Python; tests/server/test_hpo_task.py and test_codeopt_task.py):

2. after an escape, six forks of 400 MB each (each under the per-process limit): now no fork starts,
   and where the task declares processes the run's cgroup holds them to one at a time;
3. after an escape, the unchanged reference plus processes that load the CPU while the best is timed:
   kept over a real 2x best on main; now those processes are gone before anything else is timed;
4. no escape: two other runs' CPU-loop candidates spin while run A's first benchmark runs; on main that
   timed A's baseline, once, and A's unchanged code then scored about 1.35x on a quiet machine.

2 and 3 run codeopt-records, which has no Python layer (tests/escaped_task.py): what holds
there is the OS layers and the measurement alone."""

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import codeopt_rewrites as rewrites
import pytest
from codeopt_rewrites import REFERENCE_SOURCE, codeopt_folder
from escaped_task import registered
from mcp import Client

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

pytestmark = pytest.mark.asyncio


@pytest.fixture
def escaped_tasks() -> Iterator[None]:
    """codeopt-escaped and codeopt-escaped-forking, for this test only (tool descriptions list tasks)."""
    with registered():
        yield


@pytest.fixture
def small(tmp_path: Path, covtype_csv: Path) -> ServerSettings:
    return ServerSettings(
        db_path=tmp_path / "runs.db",
        covtype_path=str(covtype_csv),
        hpo_threads=2,
        task_dirs=[str(codeopt_folder(tmp_path / "codeopt-records", 3000, 10))],
    )


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def benchmark(client: Client, run_id: str, source: str, description: str) -> dict[str, Any]:
    await call(client, "modify_train_py", {"run_id": run_id, "description": description, "source": source})
    return (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]


def with_body(prelude: str, body: str) -> str:
    """The reference with `body` run first in process_records, after `prelude` at the top."""
    start = "def process_records(records):\n"
    return prelude + REFERENCE_SOURCE.replace(start, start + body)


# -- 2. memory after an escape ------------------------------------------------------------------

SIX_FORKS_OF_400_MB = with_body(
    "import os\nimport time\n\n\n",
    """\
    children = []
    for _ in range(6):
        try:
            ready_r, ready_w = os.pipe()
            pid = os.fork()
        except OSError as exc:
            raise RuntimeError(f"held 0 x 400 MB at once ({exc.strerror})") from None
        if pid == 0:
            os.close(ready_r)
            block = bytearray(400 * 1024 * 1024)
            block[::4096] = b"x" * len(block[::4096])
            os.write(ready_w, b"1")
            time.sleep(60)
            os._exit(0)
        os.close(ready_w)
        os.read(ready_r, 1)
        children.append(pid)
    holding = [pid for pid in children if os.waitpid(pid, os.WNOHANG) == (0, 0)]
    raise RuntimeError(f"held {len(holding)} x 400 MB at once")
""",
)


@pytest.mark.parametrize(("task", "held"), [("codeopt-escaped", 0), ("codeopt-escaped-forking", 1)])
async def test_2_after_an_escape_six_forks_of_400_mb_hold_at_most_one_at_a_time(
    small: ServerSettings, escaped_tasks: None, task: str, held: int
):
    async with Client(build_server(Research(small))) as client:
        run_id = (await call(client, "start_run", {"task": task, "budget": 3}))["run_id"]
        experiment = await benchmark(client, run_id, SIX_FORKS_OF_400_MB, "six forks of 400 MB")
    assert experiment["status"] == "crash"
    # the last "held": the headline quotes the failing line, f-string and all, before the message
    found = int(experiment["error_tail"].split("held ")[-1].split(" ")[0])  # on main: 6
    assert found <= held, experiment["error_tail"]


# -- 3. the keep rule after an escape -----------------------------------------------------------

BURN_WHILE_THE_BEST_IS_TIMED = """\
import os
import sys
import time


def _burn_while_the_best_is_timed(parent):
    # Every timed call is a new fork of the harness, in the run's cgroup. On main the calls after the
    # first came as best, best, candidate, candidate, best, best, ...: burn through the best's calls.
    base, me, procs = "/sys/fs/cgroup/pids", str(os.getpid()), None
    try:
        names = os.listdir(base)
    except OSError:  # the cgroups are closed to it now: it cannot tell the calls apart
        names = []
    for name in names:  # the run's cgroup: the one this process is in
        for group in (f"{base}/{name}", f"{base}/{name}/candidate"):
            if name.startswith("autoresearch-") and os.path.exists(group + "/cgroup.procs"):
                if me in open(group + "/cgroup.procs").read().split():
                    procs = group + "/cgroup.procs"
    while os.getppid() == parent:  # until the call that started it has ended
        time.sleep(0.0005)
    if procs is None:  # then it burns through every call that follows
        started = time.monotonic()
        while time.monotonic() - started < 20:
            pass
        return
    seen, calls, current = set(open(procs).read().split()), 0, None
    started = time.monotonic()
    while time.monotonic() - started < 20:
        now = set(open(procs).read().split())
        if new := now - seen:
            calls += len(new)
            current = max(new, key=int) if (calls - 1) // 2 % 2 == 0 else None
        seen |= now
        if current not in now:
            current = None
            time.sleep(0.002)


"""
BURNERS = with_body(
    BURN_WHILE_THE_BEST_IS_TIMED,
    """\
    frame = sys._getframe()  # the harness's loop, in this fork's copy of its stack: which call is this?
    while frame is not None and "index" not in frame.f_locals:
        frame = frame.f_back
    if frame is not None and frame.f_locals["index"] == 0:
        parent = os.getpid()
        for _ in range(8):
            try:
                if os.fork() == 0:
                    os.setsid()
                    _burn_while_the_best_is_timed(parent)
                    os._exit(0)
            except OSError:
                pass
""",
)


# 3 and 4 load the CPU on purpose for tens of seconds: the slow set, which CI runs as its own step.
@pytest.mark.slow
@pytest.mark.parametrize("task", ["codeopt-escaped", "codeopt-escaped-forking"])
async def test_3_after_an_escape_loading_the_cpu_while_the_best_is_timed_does_not_make_a_new_best(
    small: ServerSettings, escaped_tasks: None, task: str
):
    async with Client(build_server(Research(small))) as client:
        run_id = (await call(client, "start_run", {"task": task, "budget": 4}))["run_id"]
        await call(client, "run_benchmark", {"run_id": run_id})  # the reference: no faster than itself
        best = await benchmark(client, run_id, rewrites.source_after(3), "a real rewrite, about 2x")
        assert best["status"] == "ok" and best["kept"], best
        attack = await benchmark(client, run_id, BURNERS, "the reference, and CPU burners")
    assert attack["status"] == "ok", attack["error_tail"]
    assert not attack["kept"], attack["metrics"]  # on main: kept, vs_best well above 1
    assert attack["metrics"]["vs_best"] < 1.0


# -- 4. no escape: other runs' load while a baseline is timed -----------------------------------

SPINNER = with_body("", "    spin = 0\n    for _ in range(6_000_000):\n        spin += 1\n")


def busy_descendants() -> int:
    """Processes below this one that are running or runnable right now (the spinners' forks)."""
    children: dict[int, list[int]] = {}
    state: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            state[int(entry.name)] = fields[0]
    found, stack = 0, [os.getpid()]
    while stack:
        for child in children.get(stack.pop(), []):
            found += state.get(child) == "R"
            stack.append(child)
    return found


@pytest.mark.slow
async def test_4_other_runs_load_while_a_run_starts_does_not_inflate_its_later_speedups(
    small: ServerSettings,
):
    async with Client(build_server(Research(small))) as client:
        ids = [
            (await call(client, "start_run", {"task": "codeopt-records", "budget": 3}))["run_id"]
            for _ in "abc"
        ]
        a, spinners = ids[0], ids[1:]
        for run_id in spinners:
            await call(
                client, "modify_train_py", {"run_id": run_id, "description": "spin", "source": SPINNER}
            )
        spinning = [asyncio.create_task(call(client, "run_benchmark", {"run_id": r})) for r in spinners]
        for _ in range(400):  # until both spinners' candidates burn the CPU (at most 20 s)
            if busy_descendants() >= 2:
                break
            await asyncio.sleep(0.05)
        loaded = (await call(client, "run_benchmark", {"run_id": a}))["experiment"]
        await asyncio.gather(*spinning)
        comment = REFERENCE_SOURCE.replace(
            "def process_records(records):\n", "def process_records(records):\n    # same code\n"
        )
        quiet = await benchmark(client, a, comment, "a comment, nothing else")
    assert loaded["status"] == quiet["status"] == "ok"
    # On main the baseline was timed once, under the load, and the unchanged code then scored 2.0-3.7x
    # here (1.35x in the issue). Whether its interval contains 1 is a 99% claim: benchmarks/noise_load.py.
    assert 0.8 < quiet["metrics"]["speedup"] < 1.25, quiet["metrics"]
