"""Opt-in: the agents against a real model behind an OpenAI-compatible endpoint.

Start an OpenAI-compatible server with a tool-calling model on 127.0.0.1:8088 (the benchmarks used
Qwen2.5-Coder-1.5B-Instruct on llama.cpp; docs/benchmarks.md), then:

    python -m pytest -m llm        # AUTORESEARCH_TEST_LLM_URL overrides the endpoint
"""

import os
import urllib.request
from pathlib import Path

import pytest

from autoresearch_mcp.cli import build_parser
from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.contract.transcript import load_transcript

URL = os.environ.get("AUTORESEARCH_TEST_LLM_URL", "http://127.0.0.1:8088/v1")
pytestmark = pytest.mark.llm


def endpoint_up() -> bool:
    try:
        with urllib.request.urlopen(f"{URL}/models", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


@pytest.mark.asyncio
@pytest.mark.timeout(1800)  # a 1.5B model on 2 CPU cores takes tens of seconds per call
@pytest.mark.parametrize("mode", ["stateful", "stateless"])
async def test_a_real_model_proposes_configurations_the_server_runs(
    tmp_path: Path, covtype_csv: Path, mode: str
):
    if not endpoint_up():
        pytest.skip(
            f"no model at {URL}: start an OpenAI-compatible server there, or set AUTORESEARCH_TEST_LLM_URL"
        )
    args = build_parser().parse_args(
        ["run", "--task", "hpo-covertype", "--llm", "openai", "--base-url", URL, "--tool-choice", "run_experiment",
         "--iterations", "2", "--max-tokens", "300", "--llm-timeout", "600", "--quiet",
         "--db", str(tmp_path / "runs.db"), "--data", str(covtype_csv)]
    )  # fmt: skip
    result = await run_session(args, mode=mode, seed=42, transcript=tmp_path / "t.jsonl")
    records = load_transcript(tmp_path / "t.jsonl")
    assert not result.scripted and result.experiments >= 1 and result.best_metric is not None
    assert records and all(r["provider_usage"]["input_tokens"] > 0 for r in records)
