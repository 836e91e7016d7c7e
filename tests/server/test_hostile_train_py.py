"""Hostile train.py versions through the MCP tools (modify_train_py + run_experiment): whatever the code
does, the server answers the next call normally, the run's earlier records stay as they were, and the
sandbox leaves no process behind. (How the sandbox contains each attack is tests/sandbox/test_hostile.py;
this is the server's side of it.)

Two tasks: the real toy-quadratic, whose guard refuses most of these at modify time (a refusal is a
pass: nothing is stored, nothing runs), and "toy-hostile", the same task with a guard that also admits
`os` and small limits (2 s wall and CPU, 256 MB), so the attacks really run in the sandbox.
"""

import os
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from record_checks import (
    assert_earlier_records_intact,
    assert_store_consistent,
    processes_mentioning,
    snapshot,
)

from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import Limits
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.registry import register, unregister
from toy_task import ToyTask

pytestmark = pytest.mark.asyncio

SECRET = "sk-ant-hostile-test-0123456789"
PERMISSIVE = GuardPolicy(
    allowed_imports=frozenset({"time", "math", "os"}), required_functions={"score": ("params",)}
)


class HostileToyTask(ToyTask):
    """toy-quadratic with small limits and a guard that lets `os` through, so attacks reach the sandbox.
    It declares that it starts processes (no seccomp filter): what must then hold is the cleanup."""

    name = "toy-hostile"

    def options(self) -> dict[str, Any]:
        return {"limits": Limits(wall_s=2, cpu_s=2, memory_mb=256, new_processes=True).model_dump()}

    def check_artifact(self, source: str) -> list[str]:
        return check_source(source, PERMISSIVE)


def attack(body: str, imports: str = "import os\nimport time\n") -> str:
    return imports + "\n\ndef score(params):\n" + textwrap.indent(textwrap.dedent(body), "    ")


# name -> (train.py, the experiment statuses it may end with when it runs)
ATTACKS: dict[str, tuple[str, set[str]]] = {
    "infinite loop": (attack("while True:\n    pass\n", imports="import time\n"), {"timeout", "crash"}),
    "memory bomb": (attack("hog = bytearray(8 * 1024**3)\nreturn float(len(hog))\n"), {"crash"}),
    "fork and linger": (
        attack("if os.fork() == 0:\n    time.sleep(300)\nreturn 1.0\n"),
        {"ok"},  # the parent returns; the forked child must not outlive the experiment
    ),
    "read secrets from the environment": (
        attack(
            "found = [k for k, v in os.environ.items()"
            " if 'KEY' in k or 'TOKEN' in k or 'AUTORESEARCH' in k or 'sk-ant' in v]\n"
            "return float(len(found))\n"
        ),
        {"ok"},  # it runs, and finds nothing
    ),
    "flood the output": (attack("print('x' * 5_000_000)\nraise RuntimeError('flooded')\n"), {"crash"}),
}


@pytest.fixture
def hostile_task() -> Iterator[None]:
    register(HostileToyTask.name, HostileToyTask)
    yield
    unregister(HostileToyTask.name)


@pytest.fixture
def sandbox_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Sandboxes of this test get their temporary directories here, so their processes can be told apart."""
    path = tmp_path / "sandboxes"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


@pytest.fixture
def secrets_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("AUTORESEARCH_TOKEN", SECRET)


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def answers_normally(client: Client, run_id: str) -> None:
    """The very next calls are served at once, with the run as it should be."""
    started = time.monotonic()
    summary = await call(client, "get_run_summary", {"run_id": run_id})
    assert summary["run_id"] == run_id and "used" in summary["summary"]
    assert (await call(client, "list_runs", {}))["runs"]
    assert time.monotonic() - started < 5.0


async def test_hostile_train_py_is_refused_by_the_real_guard_and_nothing_is_stored(
    settings: ServerSettings, sandbox_dir: Path, secrets_in_env: None
):
    async with Client(build_server(Research(settings))) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 5}))["run_id"]
        await call(client, "run_experiment", {"params": {"x": 1.0}})
        await call(client, "add_note", {"text": "baseline done"})
        before = snapshot(settings.db_path)
        refused = []
        for name in ("fork and linger", "read secrets from the environment"):
            result = await client.call_tool(
                "modify_train_py", {"description": name, "source": ATTACKS[name][0]}
            )
            assert result.is_error, f"the guard let {name!r} through"
            text = result.content[0].text
            assert "edit rejected, train.py v1 unchanged" in text and "import of 'os' is not allowed" in text
            refused.append(name)
            await answers_normally(client, run_id)
        after = snapshot(settings.db_path)
        assert_earlier_records_intact(before, after)
        assert after["artifacts"] == before["artifacts"] and after["experiments"] == before["experiments"]
        assert len(after["events"]) == len(before["events"]) + len(refused)  # each refusal is logged
        assert (await call(client, "get_current_train_py", {}))["version"] == 1
    assert_store_consistent(settings.db_path)


async def test_hostile_train_py_that_runs_is_a_recorded_result_and_the_server_carries_on(
    settings: ServerSettings, hostile_task: None, sandbox_dir: Path, secrets_in_env: None
):
    async with Client(build_server(Research(settings))) as client:
        run_id = (await call(client, "start_run", {"task": "toy-hostile", "budget": 20}))["run_id"]
        await call(client, "run_experiment", {"params": {"x": 1.0}, "note": "baseline"})
        await call(client, "add_note", {"text": "before the attacks"})

        for number, (name, (source, statuses)) in enumerate(ATTACKS.items(), start=2):
            before = snapshot(settings.db_path)
            version = await call(client, "modify_train_py", {"description": name, "source": source})
            started = time.monotonic()
            result = await call(client, "run_experiment", {"params": {"x": float(number)}})
            elapsed = time.monotonic() - started
            exp = result["experiment"]
            assert exp["status"] in statuses, (name, exp)
            assert exp["artifact_version"] == version["version"] and exp["iteration"] == number
            assert elapsed < 15, f"{name} held the server for {elapsed:.1f} s"
            if exp["status"] != "ok":
                assert exp["error_tail"] and len(exp["error_tail"]) <= 2000, name
                assert SECRET not in exp["error_tail"]
            if name == "read secrets from the environment":
                assert exp["metric"] == 0.0, "the sandbox saw secrets from the server's environment"
            if name == "memory bomb":
                assert "out of memory" in exp["error_tail"]

            await answers_normally(client, run_id)
            assert_earlier_records_intact(before, snapshot(settings.db_path))
            assert not _stray_sandbox_processes(sandbox_dir), f"{name} left processes behind"

            # and the run goes on normally on the original train.py
            await call(client, "revert_train_py", {"version": 1})

        last = await call(client, "run_experiment", {"params": {"x": 0.3, "y": -0.2}})
        assert last["experiment"]["status"] == "ok"
        history = await call(client, "get_experiment_history", {"run_id": run_id})
        assert history["experiments"][0]["note"] == "baseline"
        assert history["total"] == len(ATTACKS) + 2
    assert_store_consistent(settings.db_path)
    assert list(sandbox_dir.iterdir()) == []  # every sandbox directory was removed


def _stray_sandbox_processes(sandbox_dir: Path, grace_s: float = 3.0) -> list[tuple[int, str]]:
    deadline = time.monotonic() + grace_s
    while (found := processes_mentioning(str(sandbox_dir))) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [(pid, cmd) for pid, cmd in found if pid != os.getpid()]
