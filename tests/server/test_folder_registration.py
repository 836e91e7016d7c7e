"""Registering a task folder as an operator does: `serve --task-dir PATH` and AUTORESEARCH_TASK_DIRS on a
real stdio server, and what the folder's `python` and `reads` keys give the script it runs."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from autoresearch_mcp.contract.env import ENV_TASK_DIRS
from autoresearch_mcp.contract.errors import REFUSAL_META, ResearchError
from autoresearch_mcp.sandbox.child import landlock_abi
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.folder.spec import load_folder
from folder_fixture import make_folder


def console_script(name: str) -> str:
    script = shutil.which(name, path=str(Path(sys.executable).parent))
    assert script is not None, f"the console script {name} is installed next to the interpreter"
    return script


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def listed_tasks(client: Client) -> list[str]:
    tasks = json.loads((await client.read_resource("autoresearch://tasks")).contents[0].text)
    return [task["name"] for task in tasks["tasks"]]


async def experiment(client: Client, name: str) -> dict[str, Any]:
    """One experiment of a new run of task `name`, with the folder's default params."""
    run_id = (await call(client, "start_run", {"task": name, "budget": 2}))["run_id"]
    return (await call(client, "run_experiment", {"run_id": run_id, "params": {}}))["experiment"]


async def first_experiment(settings: ServerSettings, folder: Path) -> dict[str, Any]:
    """The same, on an in-memory server that registers only `folder`."""
    with Research(settings.model_copy(update={"task_dirs": [str(folder)]})) as research:
        async with Client(build_server(research), raise_exceptions=True) as client:
            return await experiment(client, folder.name)


@pytest.mark.asyncio
async def test_serve_with_task_dir_runs_the_folders_task_by_name_and_refuses_a_path_or_unknown_name(
    tmp_path: Path, isolated_data_dir: Path
):
    folder = make_folder(tmp_path / "outside-the-repository")
    params = StdioServerParameters(
        command=console_script("autoresearch-mcp"),
        args=["serve", "--db", str(tmp_path / "runs.db"), "--task-dir", str(folder)],
        env={"AUTORESEARCH_DATA_DIR": str(isolated_data_dir), "AUTORESEARCH_LOG_LEVEL": "WARNING"},
        cwd=str(tmp_path),
    )
    async with Client(params) as client:
        names = await listed_tasks(client)
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 2}))["run_id"]
        exp = (await call(client, "run_experiment", {"run_id": run_id, "params": {"x": 0.3}}))["experiment"]
        refused = [await client.call_tool("start_run", {"task": task}) for task in (str(folder), "no-such")]
    assert "bowl" in names
    assert exp["status"] == "ok" and exp["metric"] == pytest.approx(2 * 0.2**2)  # data/weight.txt is 2
    for result, task in zip(refused, (str(folder), "no-such"), strict=True):
        assert result.is_error and (result.meta or {})[REFUSAL_META]["kind"] == "unknown_task"
        assert f"unknown task {task!r}; available tasks: " in result.content[0].text
        assert set(names) <= set(result.content[0].text.split("available tasks: ")[1].split(", "))


@pytest.mark.asyncio
async def test_task_dirs_in_the_environment_register_folders_for_a_host_that_passes_no_arguments(
    tmp_path: Path, isolated_data_dir: Path
):
    first, second = make_folder(tmp_path, "bowl"), make_folder(tmp_path, "basin")
    (second / "data" / "weight.txt").write_text("3\n")  # this folder's own data, not the first's
    env = {
        ENV_TASK_DIRS: f"{first}{os.pathsep}{second}",  # separated as in PATH
        "AUTORESEARCH_DB": str(tmp_path / "runs.db"),
        "AUTORESEARCH_DATA_DIR": str(isolated_data_dir),
        "AUTORESEARCH_LOG_LEVEL": "WARNING",
    }
    params = StdioServerParameters(
        command=console_script("autoresearch-mcp-server"), env=env, cwd=str(tmp_path)
    )
    async with Client(params) as client:
        names = await listed_tasks(client)
        exp = await experiment(client, "basin")
    assert {"bowl", "basin"} <= set(names)
    assert exp["status"] == "ok" and exp["metric"] == pytest.approx(3 * (0.3**2 + 0.2**2))


# Prints the number in marker.txt in its interpreter's prefix: only the venv made below has one.
WHICH_PYTHON = textwrap.dedent(
    """\
    import os
    import sys

    with open(os.path.join(sys.prefix, "marker.txt")) as marker:
        print(f"loss: {marker.read().strip()}")
    """
)


@pytest.mark.asyncio
async def test_python_in_autoresearch_toml_is_the_interpreter_that_runs_the_command(
    settings: ServerSettings, tmp_path: Path
):
    venv = tmp_path / "venv"  # of the server's own Python, without pip: fast
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    (venv / "marker.txt").write_text("7\n")
    folder = make_folder(tmp_path, script=WHICH_PYTHON, extra=f'python = "{venv / "bin" / "python"}"')
    exp = await first_experiment(settings, folder)
    assert exp["status"] == "ok", exp["error_tail"]
    assert exp["metric"] == 7.0


# Prints the declared file's number, and whether the undeclared file beside it could be read.
READER = textwrap.dedent(
    """\
    with open({declared!r}) as declared:
        print(f"loss: {{declared.read().strip()}}")
    try:
        with open({undeclared!r}) as undeclared:
            undeclared.read()
        print("undeclared_readable: 1")
    except (PermissionError, FileNotFoundError):  # Landlock, or out of the sandbox's view (identity.py)
        print("undeclared_readable: 0")
    """
)


@pytest.mark.skipif(landlock_abi() < 1, reason="no Landlock here: files are not confined")
@pytest.mark.asyncio
async def test_a_declared_absolute_read_is_readable_and_an_undeclared_file_beside_it_is_not(
    settings: ServerSettings, tmp_path: Path
):
    elsewhere = tmp_path / "elsewhere"  # outside the folder
    elsewhere.mkdir()
    declared, undeclared = elsewhere / "declared.txt", elsewhere / "undeclared.txt"
    declared.write_text("5\n")
    undeclared.write_text("9\n")
    script = READER.format(declared=str(declared), undeclared=str(undeclared))
    folder = make_folder(tmp_path, script=script, extra=f'reads = ["{declared}"]')
    exp = await first_experiment(settings, folder)
    assert exp["status"] == "ok", exp["error_tail"]
    assert exp["metrics"] == {"loss": 5.0, "undeclared_readable": 0.0}


def test_a_python_that_is_not_an_interpreter_is_refused_with_the_key_and_the_path(tmp_path: Path):
    missing = tmp_path / "no-venv" / "bin" / "python"
    folder = make_folder(tmp_path, extra=f'python = "{missing}"')
    with pytest.raises(ResearchError, match=r"autoresearch\.toml: .*python") as refused:
        load_folder(folder)
    assert str(missing) in str(refused.value)
