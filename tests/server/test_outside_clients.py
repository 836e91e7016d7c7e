"""Outside MCP hosts: the Claude Desktop config in examples/ launches a working server, as a host would."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from conftest import ROOT


@pytest.mark.asyncio
async def test_the_claude_desktop_config_starts_a_server_from_another_directory_with_no_data_path(
    tmp_path: Path,
):
    config = json.loads((ROOT / "examples" / "claude_desktop_config.json").read_text())
    entry = config["mcpServers"]["autoresearch"]
    # The one placeholder a user replaces: the venv's console script. The database goes to the user's
    # data directory (here the test's) and the data is the sample shipped in the package.
    script = shutil.which("autoresearch-mcp-server", path=str(Path(sys.executable).parent))
    assert script is not None, "the console script is installed next to the interpreter"
    assert entry["command"] == "/ABSOLUTE/PATH/TO/.venv/bin/autoresearch-mcp-server"
    assert "/ABSOLUTE/PATH/TO" not in " ".join(entry["args"]) and "--data" not in entry["args"]
    command, args = script, entry["args"]
    data_dir = Path(os.environ["AUTORESEARCH_DATA_DIR"])
    env = {**entry["env"], "AUTORESEARCH_DATA_DIR": str(data_dir)}
    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(tmp_path))
    async with Client(params) as client:
        assert client.server_info.name == "autoresearch"
        names = {tool.name for tool in (await client.list_tools()).tools}
        started = await client.call_tool("start_run", {"task": "hpo-covertype", "budget": 2})
        prompt = await client.get_prompt("autoresearch", {"task": "hpo-covertype"})
    assert {"start_run", "run_experiment", "get_run_summary"} <= names
    assert not started.is_error and started.structured_content["run_id"].startswith("r-")
    assert "finish_run" in prompt.messages[0].content.text
    assert (data_dir / "runs.db").exists()
