"""A task folder in code work is worked on as codeopt-records is: its profile comes from running the user's
own benchmark command, and the turn shows the hot function of the user's file, under that file's name."""

import sqlite3
from pathlib import Path

import pytest

from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.client.task_folder import resolve_task_folder
from conftest import run_args
from fakes import FakeOpenAIServer, chat_completion
from folder_fixture import FASTER_PAIRWISE_CLOSE, small_slow_function

FASTER = FASTER_PAIRWISE_CLOSE  # the same output, about 2x


@pytest.mark.asyncio
async def test_the_stateful_turn_shows_the_profiled_function_of_the_users_file_and_runs_its_new_def(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    slow = small_slow_function(tmp_path)
    before = (slow / "slow.py").read_text()
    with FakeOpenAIServer() as fake:
        fake.enqueue(chat_completion(f"Half the pairs, no sqrt.\n```python\n{FASTER}```"))
        args = run_args(
            tmp_path,
            *("--task", str(slow), "--llm", "openai", "--base-url", fake.base_url),
            *("--model", "qwen2.5-coder", "--iterations", "1", "--code-replies", "text"),
        )
        resolve_task_folder(args)  # as `autoresearch-mcp run --task PATH` does
        result = await run_session(args, mode="stateful", seed=42)
        first = " ".join(str(m["content"]) for m in fake.bodies("/chat/completions")[0]["messages"][1:])
    assert "Time by function: pairwise_close" in first  # bench.py, run under the profiler
    assert "pairwise_close (slow.py lines " in first and "def pairwise_close(" in first
    assert "train.py lines" not in first
    assert result.experiments == 1
    conn = sqlite3.connect(tmp_path / "runs.db")
    try:
        (status,) = conn.execute("SELECT status FROM experiments").fetchone()
        (source,) = conn.execute("SELECT source FROM artifacts ORDER BY version DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    assert status == "ok"
    assert FASTER in source  # slow.py defines nothing else: the block is the whole new file
    assert (slow / "slow.py").read_text() == before  # the user's file was not written
