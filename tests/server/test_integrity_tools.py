"""Issue 13 through the MCP tools, as an attacker-controlled model would try it: escapes through allowed
modules, patching what the harness judges with, forging the report or the baseline, hostile values coming
back from the sandbox, and oversized work directories. Whatever train.py does, the records stay honest,
nothing is left `running`, and every read tool keeps working."""

import json
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from codeopt_rewrites import REFERENCE_SOURCE, codeopt_folder
from mcp import Client

from autoresearch_mcp.sandbox import runner
from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import Limits
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.registry import register, unregister
from toy_task import ToyTask

pytestmark = pytest.mark.asyncio


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def every_read_tool_works(client: Client, run_id: str) -> dict[str, Any]:
    """The stored records satisfy every read tool's output schema."""
    history = await call(client, "get_experiment_history", {"run_id": run_id})
    await call(client, "get_experiment_history", {"run_id": run_id, "order": "metric"})
    await call(client, "get_run_summary", {"run_id": run_id})
    await call(client, "list_runs")
    await call(client, "get_current_train_py", {"run_id": run_id})
    await call(client, "query_results", {"sql": "SELECT * FROM v_experiments"})
    await client.read_resource(f"autoresearch://runs/{run_id}/history")
    assert not any(e["status"] == "running" for e in history["experiments"])
    return history


@pytest.fixture
def codeopt_settings(settings: ServerSettings) -> ServerSettings:
    return settings.model_copy(
        update={"task_dirs": [str(codeopt_folder(settings.db_path.parent / "codeopt-records", 1000, 4))]}
    )


async def benchmark_with(client: Client, source: str, description: str) -> dict[str, Any]:
    await call(client, "modify_train_py", {"description": description, "source": source})
    return (await call(client, "run_benchmark"))["experiment"]


# -- classes 1-3: codeopt-records ----------------------------------------------------------------


async def test_a_path_to_sys_through_statistics_cannot_patch_the_harness(codeopt_settings):
    source = "import statistics\nstatistics.sys.modules['statistics'].median = lambda t: 1e-9\n\n"
    async with Client(build_server(Research(codeopt_settings))) as client:
        run_id = (await call(client, "start_run", {"task": "codeopt-records", "budget": 5}))["run_id"]
        exp = await benchmark_with(client, source + REFERENCE_SOURCE, "reach sys")
        # It reaches the real sys (no Python layer holds it back) and patches what it finds there; the
        # harness that times it runs in another process: the reference itself, about 1x.
        assert exp["status"] == "ok" and exp["metric"] < 20, exp
        await every_read_tool_works(client, run_id)


async def test_patching_a_function_of_an_allowed_module_the_harness_also_uses_changes_nothing(
    codeopt_settings,
):
    source = "import statistics\nstatistics.median = lambda times: 1e-9\n\n" + REFERENCE_SOURCE
    async with Client(build_server(Research(codeopt_settings))) as client:
        run_id = (await call(client, "start_run", {"task": "codeopt-records", "budget": 5}))["run_id"]
        exp = await benchmark_with(client, source, "patch median")
        assert exp["status"] == "ok" and exp["metric"] < 20, exp  # the reference itself: about 1x
        await every_read_tool_works(client, run_id)


async def test_a_report_forged_by_train_py_stores_no_baseline_for_the_run(codeopt_settings):
    forged = json.dumps({"baseline_ms": 1e9, "error": "load", "detail": "forged"})
    source = textwrap.dedent(
        f"""\
        import statistics
        os = statistics.sys.modules["os"]
        for fd in range(3, 256):
            try:
                os.write(fd, {forged!r}.encode())
            except OSError:
                pass
        os._exit(0)

        """
    )
    async with Client(build_server(Research(codeopt_settings))) as client:
        run_id = (await call(client, "start_run", {"task": "codeopt-records", "budget": 5}))["run_id"]
        first = await benchmark_with(client, source + REFERENCE_SOURCE, "forge the first report")
        assert first["status"] == "crash", first
        await call(client, "revert_train_py", {"version": 1})
        honest = (await call(client, "run_benchmark"))["experiment"]
        assert honest["status"] == "ok" and honest["metric"] < 20, honest  # the reference: about 1x
        assert honest["metrics"]["baseline_ms"] < 1000
        await every_read_tool_works(client, run_id)


# -- class 4: hostile values, through the toy task with a permissive guard -------------------------

PERMISSIVE = GuardPolicy(allowed_imports=frozenset({"math", "io"}), required_functions={"score": ("params",)})


class ValuesToyTask(ToyTask):
    name = "toy-values"

    def options(self) -> dict[str, Any]:
        return {"limits": Limits(wall_s=20, cpu_s=20, memory_mb=512, file_mb=8, disk_mb=24).model_dump()}

    def check_artifact(self, source: str) -> list[str]:
        return check_source(source, PERMISSIVE)


@pytest.fixture
def values_task() -> Iterator[None]:
    register(ValuesToyTask.name, ValuesToyTask)
    yield
    unregister(ValuesToyTask.name)


HOSTILE_VALUES = {
    "nan": "return float('nan')",
    "infinity as text": "return '1e999'",
    "nan as text": "return 'nan'",
    "an integer too big for a float": "return 10 ** 400",
    "deeply nested": "x = []\nfor _ in range(500):\n    x = [x]\nreturn x",
    "a huge string": "return 'x' * 40_000_000",
}


async def test_hostile_values_from_train_py_are_crashes_and_every_tool_still_works(settings, values_task):
    async with Client(build_server(Research(settings))) as client:
        run_id = (await call(client, "start_run", {"task": "toy-values", "budget": 20}))["run_id"]
        for number, (name, body) in enumerate(HOSTILE_VALUES.items(), start=1):
            source = "def score(params):\n" + textwrap.indent(body, "    ") + "\n"
            await call(client, "modify_train_py", {"description": name, "source": source})
            params = {"x": float(number)}
            exp = (await call(client, "run_experiment", {"params": params}))["experiment"]
            assert exp["status"] == "crash" and exp["metric"] is None, (name, exp)
            assert exp["error_tail"] and len(exp["error_tail"]) <= 2000, name
            await every_read_tool_works(client, run_id)
        # nothing was left running: the same params run again on the original train.py
        await call(client, "revert_train_py", {"version": 1})
        again = (await call(client, "run_experiment", {"params": {"x": 1.0}}))["experiment"]
        assert again["status"] == "ok"


async def test_writing_past_the_disk_quota_through_the_tools_is_a_crash(settings, values_task):
    source = textwrap.dedent(
        """\
        import io


        def score(params):
            for i in range(20):
                with io.FileIO(f"blob-{i}.bin", "w") as blob:
                    blob.write(b"x" * 4 * 1024 * 1024)
            return 1.0
        """
    )
    async with Client(build_server(Research(settings))) as client:
        run_id = (await call(client, "start_run", {"task": "toy-values", "budget": 3}))["run_id"]
        await call(client, "modify_train_py", {"description": "fill the disk", "source": source})
        exp = (await call(client, "run_experiment", {"params": {}}))["experiment"]
        assert exp["status"] == "crash" and "wrote more than 24 MB" in exp["error_tail"], exp
        await every_read_tool_works(client, run_id)


async def test_a_sandbox_directory_left_by_a_killed_server_is_removed_when_the_server_starts(settings):
    done = subprocess.Popen(["true"])
    dead_pid = done.pid
    done.wait()  # reaped: no process has this pid now
    stale = Path(tempfile.mkdtemp(prefix=f"{runner.DIR_PREFIX}{dead_pid}-"))
    (stale / "work").mkdir()
    (stale / "work" / "train-cache.bin").write_bytes(b"x" * 4096)
    async with Client(build_server(Research(settings))) as client:
        await call(client, "list_runs")
    assert not stale.exists()


# -- class 4 in hpo-covertype: the harness's own log and evaluate ---------------------------------

HPO_ATTACKS = {
    "log a NaN": "harness.log(loss=float('nan'))",
    "log an integer too big for a float": "harness.log(rounds=10 ** 400)",
    "labels far outside the classes": "predictions = [10 ** 30] * len(data.X_test)",
}


async def test_hostile_values_through_the_hpo_harness_are_crashes_and_every_tool_still_works(settings):
    base = textwrap.dedent(
        """\
        import harness


        def main(params):
            data = harness.load_data()
            predictions = [0] * len(data.X_test)
            ATTACK
            harness.evaluate(predictions)
            harness.log(n=1)
        """
    )
    async with Client(build_server(Research(settings))) as client:
        run_id = (await call(client, "start_run", {"task": "hpo-covertype", "budget": 10}))["run_id"]
        for number, (name, line) in enumerate(HPO_ATTACKS.items(), start=1):
            await call(
                client, "modify_train_py", {"description": name, "source": base.replace("ATTACK", line)}
            )
            exp = (await call(client, "run_experiment", {"params": {"n_estimators": 10 + number}}))[
                "experiment"
            ]
            assert exp["status"] == "crash" and exp["metric"] is None, (name, exp)
            await every_read_tool_works(client, run_id)
