"""A task folder's `[benchmark]`: the harness times a version's function beside the original's on fresh
inputs and checks every output; nothing a version prints, writes or returns on some inputs only moves
the verdict. Versions sent through MCP to a real server and the real sandbox."""

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.folder.spec import load_folder

pytestmark = pytest.mark.anyio
ORIGINAL = "def total(values):\n    out = 0\n    for v in values:\n        out = out + v\n    return out\n"
INPUTS = "import random\n\n\ndef make_input(seed):\n    return [random.Random(seed).randrange(100) for _ in range(400)]\n"
TOML = textwrap.dedent(
    """\
    [task]
    name = "summing"
    description = "Sum a list faster."
    metric = "speedup"
    direction = "maximize"
    timeout_s = 60
    edit = {edit}
    work = "code"

    [benchmark]
    function = "fast.py:total"
    inputs = "inputs.py:make_input"
    calls = 4
    """
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def summing_folder(root: Path, edit: str = '["fast.py"]') -> Path:
    folder = root / "summing"
    folder.mkdir()
    (folder / "fast.py").write_text(ORIGINAL)
    (folder / "inputs.py").write_text(INPUTS)
    (folder / "autoresearch.toml").write_text(TOML.format(edit=edit))
    return folder


async def benchmarked(folder: Path, db: Path, *sources: str) -> list[dict[str, Any]]:
    settings = ServerSettings(db_path=db, task_dirs=[str(folder)])
    found = []
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        started = (
            await client.call_tool("start_run", {"task": "summing", "budget": len(sources)})
        ).structured_content
        assert started["judged_by"] == "benchmark"
        for source in sources:
            edit = {"run_id": started["run_id"], "description": "a version", "source": source}
            edited = await client.call_tool("modify_train_py", edit)
            assert not edited.is_error, edited.content
            answer = await client.call_tool("run_benchmark", {"run_id": started["run_id"]})
            assert not answer.is_error, answer.content
            found.append(answer.structured_content["experiment"])
    return found


async def test_no_version_moves_a_benchmarks_verdict_by_what_it_prints_or_returns_on_some_inputs(
    tmp_path: Path,
) -> None:
    folder = summing_folder(tmp_path)
    honest = "def total(values):\n    return sum(values)\n"
    prints = honest + 'print("speedup: 1000.0")\n'
    wrong = "def total(values):\n    return 0\n"
    # Right on small inputs, wrong on the timed ones (400 values): every call's output is checked.
    sly = "def total(values):\n    return sum(values) if len(values) < 100 else 0\n"
    exits = "import sys\n\ndef total(values):\n    sys.exit(0)\n"
    writes = (
        "def total(values):\n"
        '    open("cache.txt", "w").write(str(sum(values)))  # a fork may write nowhere\n'
        "    return sum(values)\n"
    )
    ok, printed, bad, sneaky, exited, wrote = await benchmarked(
        folder, tmp_path / "runs.db", honest, prints, wrong, sly, exits, writes
    )
    for exp in (ok, printed):
        assert exp["status"] == "ok" and exp["metrics"]["inputs"] == 5
        assert exp["metrics"]["speedup_low"] <= exp["metric"] <= exp["metrics"]["speedup_high"]
        assert "reported.speedup" not in exp["metrics"]  # a printed line is no metric here
    assert bad["status"] == "incorrect" and "wrong output (call 1 of 5" in bad["error_tail"]
    assert sneaky["status"] == "incorrect" and "expected" in sneaky["error_tail"]
    assert exited["status"] == "crash" and "SystemExit: 0" in exited["error_tail"]
    assert wrote["status"] == "crash" and "the function raised an exception at" in wrote["error_tail"]
    assert "PermissionError" in wrote["error_tail"] or "OSError" in wrote["error_tail"]


def test_a_benchmark_whose_agent_could_edit_the_inputs_or_not_the_function_is_refused(tmp_path: Path) -> None:
    folder = summing_folder(tmp_path, edit='["fast.py", "inputs.py"]')
    with pytest.raises(ResearchError, match=re.escape("benchmark.inputs: inputs.py is in `edit`")):
        load_folder(folder)
    (folder / "autoresearch.toml").write_text(TOML.format(edit='["inputs.py"]').replace("calls = 4", ""))
    with pytest.raises(ResearchError, match=re.escape("benchmark.function: fast.py is not in `edit`")):
        load_folder(folder)
    (folder / "autoresearch.toml").write_text(
        TOML.format(edit='["fast.py"]').replace('metric = "speedup"', 'metric = "seconds"')
    )
    with pytest.raises(ResearchError, match="its metric is the speedup over the reference"):
        load_folder(folder)


async def test_a_benchmarked_version_comes_back_with_where_its_calls_spend_their_time(tmp_path: Path) -> None:
    folder = summing_folder(tmp_path)
    # Slow enough (some milliseconds a call) for the sampler's 0.5 ms ticks to see where the time goes.
    two_steps = (
        "def doubled(values):\n    return [v * 2 for v in values for _ in range(300)]\n\n\n"
        "def total(values):\n    return sum(doubled(values)) // 600\n"
    )
    settings = ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(folder)])
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        run_id = (await client.call_tool("start_run", {"task": "summing", "budget": 1})).structured_content[
            "run_id"
        ]
        edit = {"run_id": run_id, "description": "two steps", "source": two_steps}
        assert not (await client.call_tool("modify_train_py", edit)).is_error
        result = (await client.call_tool("run_benchmark", {"run_id": run_id})).structured_content
    profile = result["profile"]
    assert result["experiment"]["status"] == "ok" and profile is not None
    assert {f["name"] for f in profile["functions"]} <= {"doubled", "total"} and profile["functions"]
    assert profile["hot"] in {"doubled", "total"}


async def test_profile_train_py_answers_for_a_benchmark_folder_before_any_benchmark(tmp_path: Path) -> None:
    folder = summing_folder(tmp_path)
    slow = "def total(values):\n    return sum(v for v in values for _ in range(300)) // 300\n"
    settings = ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(folder)])
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        run_id = (await client.call_tool("start_run", {"task": "summing", "budget": 1})).structured_content[
            "run_id"
        ]
        edit = {"run_id": run_id, "description": "slower", "source": slow}
        assert not (await client.call_tool("modify_train_py", edit)).is_error
        again = await client.call_tool("modify_train_py", edit)
        answer = await client.call_tool("profile_train_py", {"run_id": run_id})
    # a version is named by the file it is: this folder's script is fast.py, not train.py
    assert again.is_error and "no change: this is already fast.py v2" in again.content[0].text
    found = answer.structured_content
    assert found["profile"] is not None and found["profile"]["hot"] == "total"
    # a model reads it as plain lines, hottest function first; programs keep the structure
    (text,) = [block.text for block in answer.content if block.type == "text"]
    head, hottest, *rest = text.splitlines()
    assert head.startswith("fast.py v2 (") and hottest.startswith("total ") and "fast.py:1-2)" in hottest
    assert "slowest lines of total:" in rest and "{" not in text


async def test_remeasuring_the_best_pools_its_timings_with_the_bests_instead_of_judging_it_against_itself(
    tmp_path: Path,
) -> None:
    folder = summing_folder(tmp_path)
    slow = "def total(values):\n    out = 0\n    for _ in range(1500):\n        out = sum(v for v in values)\n    return out\n"
    (folder / "fast.py").write_text(slow)
    (folder / "autoresearch.toml").write_text(
        TOML.format(edit='["fast.py"]').replace("calls = 4", "calls = 10")
    )
    research = Research(ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(folder)]))
    async with Client(build_server(research), raise_exceptions=True) as client:
        run_id = (await client.call_tool("start_run", {"task": "summing", "budget": 3})).structured_content[
            "run_id"
        ]
        edit = {"run_id": run_id, "description": "sum once", "source": ORIGINAL}
        assert not (await client.call_tool("modify_train_py", edit)).is_error
        first = await client.call_tool("run_benchmark", {"run_id": run_id})
        assert first.structured_content["is_new_best"], first.content
        again = await client.call_tool("run_benchmark", {"run_id": run_id, "remeasure": True})
        best = research.store.incumbent(run_id)
    said = again.structured_content["message"]
    assert not again.structured_content["is_new_best"] and again.structured_content["best"]["iteration"] == 1
    assert said.startswith(
        "not kept: a re-measurement of the best (#1): its 10 timings join the best's, 20 now"
    )
    assert "not surely faster" not in said
    assert (
        best is not None and best.experiment.iteration == 1 and len(best.samples) == 20 and best.pooled == 1
    )
