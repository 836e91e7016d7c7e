"""The bundled agent against a server someone else runs: `run --server-url` over streamable HTTP."""

from pathlib import Path

import pytest
from test_http import http_server

from autoresearch_mcp.cli import build_parser
from autoresearch_mcp.client.meter import load_transcript
from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.contract.errors import ResearchError

TOKEN = "a-long-enough-team-token-1234"


@pytest.mark.asyncio
async def test_the_agent_drives_a_run_on_an_http_server_that_requires_a_token(
    tmp_path: Path, covtype_csv: Path, isolated_data_dir: Path
):
    with http_server(tmp_path / "team.db", covtype_csv, isolated_data_dir, "--token", TOKEN) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        base = ["run", "--server-url", url, "--task", "hpo-covertype", "--llm", "scripted", "--quiet"]
        args = build_parser().parse_args([*base, "--token", TOKEN, "--iterations", "1"])
        result = await run_session(args, mode="stateful", seed=3, transcript=tmp_path / "t.jsonl")
        assert result.stop_reason == "budget" and result.experiments == 1
        assert load_transcript(tmp_path / "t.jsonl")[0]["iteration"] == 1

        wrong = build_parser().parse_args([*base, "--token", "not-the-token-at-all-0000"])
        with pytest.raises(ResearchError, match="--token / AUTORESEARCH_TOKEN"):
            await run_session(wrong, mode="stateful", seed=3, transcript=tmp_path / "x.jsonl")
    assert (tmp_path / "team.db").exists() and not (tmp_path / "x.jsonl").exists()
