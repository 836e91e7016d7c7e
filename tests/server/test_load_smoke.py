"""A short run of benchmarks/load_test.py: the real HTTP server on loopback, readers while an experiment
runs, and not one error. (The full run and its figures: benchmarks/load_test.md.)"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import ROOT


def load_test_module() -> ModuleType:
    path = ROOT / "benchmarks" / "load_test.py"
    spec = importlib.util.spec_from_file_location("load_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("load_test", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.asyncio
async def test_two_http_clients_reading_while_an_experiment_runs_see_no_errors(tmp_path: Path):
    load = load_test_module()
    config = load.LoadConfig(
        clients=2, calls=20, max_seconds=60, experiment_sleep=0.2, transport="http", trace=True
    )
    result = await load.run_load(config, workdir=tmp_path)
    assert result.errors == []
    assert result.calls == 20
    assert [len(result.latencies[tool]) for tool in load.READ_TOOLS] == [4, 4, 4, 4, 4]  # the floors too
    assert result.summaries_while_running >= 1  # the readers read while an experiment was running
    text = load.report(result, "smoke")
    assert "Errors: **0**" in text and "| `get_run_summary` | 4 |" in text
    # --trace: the server timed each request, and every client call found its own request there
    assert len(result.calls_traced) == 20  # the untimed warm-up calls are not among them
    assert "The clients' event loop stalled" in text  # both sides' loops were watched
    for tool in load.READ_TOOLS:
        assert f"| `{tool}` | median | 1 | 1 |" in text and f"| `{tool}` | slowest 4 | 4 | 4 |" in text
    assert list(tmp_path.iterdir()) == []  # the temporary database and server log are gone
