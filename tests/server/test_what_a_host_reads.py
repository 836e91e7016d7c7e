"""What a model inside a host pays to read, through a real stdio server started with the README's Claude
Desktop config: the tool catalogue it is sent on every turn, and the answers of the tools it calls."""

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import ToolListChangedNotification

from autoresearch_mcp.client.meter import count
from autoresearch_mcp.contract.env import ENV_COVTYPE, ENV_DATA_DIR, ENV_HPO_THREADS

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "covtype_2k.csv.gz"
CATALOGUE_TOKENS = 1500
EXPERIMENT_CHARS = 400
HISTORY_CHARS = 1200  # for 3 experiments
ROW_CHARS = 120  # each experiment after that

pytestmark = pytest.mark.asyncio


def readme_config(data_dir: Path) -> StdioServerParameters:
    """The server as Claude Desktop starts it from examples/claude_desktop_config.json (the one the
    README gives), the data found where this test keeps it."""
    entry = json.loads((ROOT / "examples" / "claude_desktop_config.json").read_text())["mcpServers"]
    server = entry["autoresearch"]
    # one XGBoost thread, as every server the suite starts has: spare threads spin on a busy machine
    env = {**server["env"], ENV_DATA_DIR: str(data_dir), ENV_COVTYPE: str(FIXTURE), ENV_HPO_THREADS: "1"}
    # The config's command is the venv's console script, which is `python -m autoresearch_mcp.server`.
    args = ["-P", "-m", "autoresearch_mcp.server", *server["args"]]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(data_dir))


def catalogue(tools: list[Any]) -> str:
    """What a host sends its model of each tool: name, description, input schema."""
    keep = ("name", "description", "inputSchema")
    return json.dumps(
        [
            {
                k: v
                for k, v in tool.model_dump(by_alias=True, exclude_none=True, mode="json").items()
                if k in keep
            }
            for tool in tools
        ]
    )


def text_of(result: Any) -> str:
    assert not result.is_error, result.content
    return "".join(block.text for block in result.content if block.type == "text")


async def test_the_readme_config_costs_a_model_at_most_1500_tokens_of_catalogue_and_short_answers(tmp_path):
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    # Claude Desktop opens its connection with initialize: the handshake ("legacy") protocol.
    async with Client(readme_config(tmp_path), mode="legacy", message_handler=on_message) as client:
        listed = (await client.list_tools()).tools
        started = await client.call_tool("start_run", {"task": "hpo-covertype", "budget": 6})
        run_id = started.structured_content["run_id"]
        with anyio.fail_after(10):
            await changed.wait()
        relisted = (await client.list_tools()).tools
        answers = []
        for params in ({}, {"max_depth": 4}, {"max_depth": 4, "learning_rate": 0.9}, {"n_estimators": 20}):
            answers.append(await client.call_tool("run_experiment", {"run_id": run_id, "params": params}))
        three = await client.call_tool("get_experiment_history", {"run_id": run_id, "last": 3})
        four = await client.call_tool("get_experiment_history", {"run_id": run_id})
        train_py = await client.call_tool("get_current_train_py", {"run_id": run_id})
        source = (await client.read_resource(f"autoresearch://runs/{run_id}/train.py")).contents[0].text
        task = json.loads((await client.read_resource("autoresearch://tasks/hpo-covertype")).contents[0].text)

    # Every tool, each argument described once, in at most 1,500 tokens.
    assert len(listed) == 16 and count(catalogue(listed)) <= CATALOGUE_TOKENS, count(catalogue(listed))
    # Once the run started, the connection lists only the tools of its kind of task (a host that lists
    # again pays less); the params, their ranges included, were in start_run's answer, once.
    assert {tool.name for tool in listed} - {tool.name for tool in relisted} == {
        "run_benchmark",
        "replace_function",
        "profile_train_py",
    }
    assert "max_depth (int >=1 <=15, default 6)" in text_of(started)

    texts = [text_of(answer) for answer in answers]
    for text, answer in zip(texts, answers, strict=True):
        assert len(text) <= EXPERIMENT_CHARS, text
        assert text.endswith(".") and text.rsplit(". ", 1)[-1].startswith(("Kept", "Not kept")), text
        # programs still read the whole record
        assert set(answer.structured_content) >= {"experiment", "best", "is_new_best", "budget_left"}
    assert "precision" in texts[0] and "(others default)" not in texts[0]  # secondary metrics
    assert "max_depth=4" in texts[1]
    assert any(text.rsplit(". ", 1)[-1].startswith("Not kept") for text in texts)

    rows_of_three, rows_of_four = text_of(three), text_of(four)
    assert len(rows_of_three) <= HISTORY_CHARS, rows_of_three
    assert len(rows_of_four) <= HISTORY_CHARS + ROW_CHARS, rows_of_four
    assert rows_of_four.splitlines()[0].startswith("# | status | macro_f1")
    assert len(rows_of_four.splitlines()) == 1 + 4 + 1

    # train.py once, as plain text after one header line; the structured answer keeps the rest.
    header, plain = text_of(train_py).split("\n", 1)
    assert header.startswith("train.py v1") and plain == source
    assert train_py.structured_content["source"] is None and train_py.structured_content["version"] == 1

    # the task as anyone reads it, without the bundled agent's own profile
    assert "agent" not in task and task["params_schema"]["properties"]["max_depth"]["maximum"] == 15
