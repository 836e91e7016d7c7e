"""The bundled agent against a server someone else runs: `run --server-url` over streamable HTTP."""

import json
from pathlib import Path

import pytest
from test_http import http_server

from autoresearch_mcp.cli import build_parser, main
from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.transcript import load_transcript
from conftest import TESTS_DIR

TOKEN = "a-long-enough-team-token-1234"


@pytest.mark.asyncio
async def test_the_agent_drives_a_run_on_an_http_server_that_requires_a_token(
    tmp_path: Path, covtype_csv: Path, isolated_data_dir: Path
):
    with http_server(tmp_path / "team.db", covtype_csv, isolated_data_dir, "--token", TOKEN) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        # The toy task: the transport and the token are the point here, and it runs in milliseconds.
        base = ["run", "--server-url", url, "--task", "toy-quadratic", "--llm", "scripted", "--quiet"]
        args = build_parser().parse_args([*base, "--token", TOKEN, "--iterations", "1"])
        result = await run_session(args, mode="stateful", seed=3, transcript=tmp_path / "t.jsonl")
        assert result.stop_reason == "budget" and result.experiments == 1
        assert load_transcript(tmp_path / "t.jsonl")[0]["iteration"] == 1

        wrong = build_parser().parse_args([*base, "--token", "not-the-token-at-all-0000"])
        with pytest.raises(ResearchError, match="--token / AUTORESEARCH_TOKEN"):
            await run_session(wrong, mode="stateful", seed=3, transcript=tmp_path / "x.jsonl")
    assert (tmp_path / "team.db").exists() and not (tmp_path / "x.jsonl").exists()


def _shape(value: object) -> object:
    """The fields of a results.json, all the way down (values differ between runs; fields must not)."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__ if value is not None else None


@pytest.mark.slow  # three compares; the agent over HTTP is in the default suite above
def test_compare_against_an_http_server_writes_the_same_results_fields_as_against_a_spawned_one(
    tmp_path: Path, covtype_csv: Path, isolated_data_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    # The toy task: the fields do not depend on the task, and it runs in milliseconds (XGBoost does not).
    monkeypatch.setenv("AUTORESEARCH_TASK_PLUGINS", "toy_task")
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    args = ["compare", "--task", "toy-quadratic", "--llm", "scripted", "--iterations", "2", "--seeds", "42"]
    assert main([*args, "--out", str(tmp_path / "spawned")]) == 0
    with http_server(tmp_path / "team.db", covtype_csv, isolated_data_dir, "--token", TOKEN) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        remote = [*args, "--server-url", url, "--token", TOKEN, "--out", str(tmp_path / "remote")]
        assert main(remote) == 0
    spawned = json.loads((tmp_path / "spawned" / "results.json").read_text())
    served = json.loads((tmp_path / "remote" / "results.json").read_text())
    assert _shape(served) == _shape(spawned)
    assert [r["totals"]["experiments"] for r in served["runs"]] == [2, 2, 2]  # three modes
    # Nothing was read from a database file beside the results: the HTTP server's own file holds the runs.
    assert not (tmp_path / "remote" / "runs.db").exists()
