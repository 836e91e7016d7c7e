"""benchmarks/memory_chain.py keeps what a long real-model run finished: results after every seed, and
--resume runs only the seeds it lacks (never mixing settings)."""

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "memory_chain.py"


@pytest.fixture
def memory_chain() -> Any:
    spec = importlib.util.spec_from_file_location("memory_chain_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seed_result(seed: int, chained: float) -> dict[str, Any]:
    run = {"label": "first", "context_tokens": 100, "llm": "openai:qwen.gguf"}
    return {
        "seed": seed,
        "second_seed": seed + 1,
        "runs": [{**run, "label": label} for label in ("first", "chained", "single", "cold")],
        "first_best": 0.70,
        "remeasured": 0.70,
        "chained_best": chained,
        "pair_best": chained,
        "single_best": 0.72,
        "cold_best": 0.69,
    }


def argv(out: Path, *extra: str) -> list[str]:
    return ["--llm", "openai", "--base-url", "http://127.0.0.1:9/v1", "--out", str(out), *extra]


def test_results_are_written_after_every_seed_so_a_stopped_run_keeps_the_seeds_it_finished(
    memory_chain: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "chain"

    async def chain(args: Any, work: Path, seed: int) -> dict[str, Any]:
        if seed == 123:
            raise KeyboardInterrupt  # the user stops the run during the second seed
        return seed_result(seed, 0.71)

    monkeypatch.setattr(memory_chain, "chain", chain)
    monkeypatch.setattr(sys, "argv", ["memory_chain.py", *argv(out, "--seeds", "42,123")])
    with pytest.raises(KeyboardInterrupt):
        memory_chain.main(argv(out, "--seeds", "42,123"))
    kept = json.loads(out.with_suffix(".json").read_text())
    assert kept["seeds"] == [42] and kept["per_seed"][0]["chained_best"] == 0.71
    assert "| 42 |" in out.with_suffix(".md").read_text()


def test_resume_runs_only_the_seeds_the_results_lack_and_keeps_both_commands(
    memory_chain: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "chain"
    ran: list[int] = []

    async def chain(args: Any, work: Path, seed: int) -> dict[str, Any]:
        ran.append(seed)
        return seed_result(seed, 0.71 if seed == 42 else 0.73)

    monkeypatch.setattr(memory_chain, "chain", chain)
    for seeds in ("42", "42,123"):
        monkeypatch.setattr(sys, "argv", ["memory_chain.py", *argv(out, "--seeds", seeds, "--resume")])
        memory_chain.main(argv(out, "--seeds", seeds, "--resume"))
    assert ran == [42, 123]
    results = json.loads(out.with_suffix(".json").read_text())
    assert results["seeds"] == [42, 123]
    assert results["summary"]["means"]["chained_best"] == 0.72
    assert len(results["commands"]) == 2
    text = out.with_suffix(".md").read_text()
    assert "openai:qwen.gguf via openai at http://127.0.0.1:9/v1" in text


def test_resume_refuses_results_measured_with_other_settings(
    memory_chain: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "chain"

    async def chain(args: Any, work: Path, seed: int) -> dict[str, Any]:
        return seed_result(seed, 0.71)

    monkeypatch.setattr(memory_chain, "chain", chain)
    memory_chain.main(argv(out, "--seeds", "42", "--budget", "15"))
    before = out.with_suffix(".json").read_text()
    with pytest.raises(SystemExit, match="other settings \\(iterations\\)"):
        memory_chain.main(argv(out, "--seeds", "123", "--budget", "10", "--resume"))
    assert out.with_suffix(".json").read_text() == before
