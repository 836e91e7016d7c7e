"""The floor plan holds: the client speaks only MCP and the contract, and a task plugs in from outside."""

import argparse
import ast
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.main import add_serve_arguments, settings_from_args
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from conftest import plugged_in

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIR = Path(__file__).resolve().parent / "plugin"


def imported_modules(folder: Path) -> dict[str, set[str]]:
    """Every module each file under `folder` imports, at any depth (lazy imports included)."""
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path}: relative import"
                names.add(node.module or "")
        found[str(path.relative_to(ROOT))] = names
    return found


def reaching(folder: Path, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    return {
        path: sorted(n for n in names if n.startswith(forbidden))
        for path, names in imported_modules(folder).items()
        if any(n.startswith(forbidden) for n in names)
    }


def test_the_client_imports_nothing_from_the_server_or_the_sandbox():
    assert reaching(ROOT / "client", ("autoresearch_mcp.server", "autoresearch_mcp.sandbox")) == {}


def test_the_contract_imports_neither_side():
    sides = ("autoresearch_mcp.server", "autoresearch_mcp.sandbox", "autoresearch_mcp.client")
    assert reaching(ROOT / "autoresearch_mcp" / "contract", sides) == {}


def test_the_dashboard_and_the_sandbox_import_nothing_from_the_client():
    assert reaching(ROOT / "server", ("autoresearch_mcp.client",)) == {}
    assert reaching(ROOT / "sandbox", ("autoresearch_mcp.client", "autoresearch_mcp.server")) == {}


@pytest.fixture
def plugin_task(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    with plugged_in("cube_task"):  # registers plugin-cube, and with it its harness entry point
        yield


def test_the_sandbox_refuses_an_entry_point_no_registered_task_declares():
    with pytest.raises(ValueError, match="not declared by a registered task"):
        run_sandboxed("os:system", {}, Limits())


@pytest.mark.asyncio
async def test_a_plugin_task_outside_the_package_runs_its_own_harness_in_the_sandbox(
    tmp_path: Path, plugin_task: None
):
    assert "cube_harness" not in sys.modules  # only the sandbox child imports the harness
    research = Research(ServerSettings(db_path=tmp_path / "runs.db"))
    async with Client(build_server(research)) as client:
        started = await client.call_tool("start_run", {"task": "plugin-cube", "budget": 2})
        run_id = started.structured_content["run_id"]
        result = await client.call_tool("run_experiment", {"params": {"x": 2.0}, "run_id": run_id})
        assert not result.is_error, result.content
        experiment = result.structured_content["experiment"]
        assert experiment["status"] == "ok" and experiment["metric"] == 0.0
        info = await client.read_resource("autoresearch://tasks/plugin-cube")
        assert '"kind":"params"' in info.contents[0].text
    research.close()
    assert "cube_harness" not in sys.modules


def serve_settings(*argv: str) -> ServerSettings:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return settings_from_args(parser.parse_args(list(argv)))


def test_a_plugin_task_declares_its_own_setting_given_by_flag_or_by_its_variable(
    tmp_path: Path, plugin_task: None, monkeypatch: pytest.MonkeyPatch
):
    db = str(tmp_path / "runs.db")
    monkeypatch.setenv("AUTORESEARCH_CUBE_WALL_S", "7")
    with Research(serve_settings("--db", db)) as research:
        assert research.tasks("plugin-cube").options() == {"wall_s": 7}
    with Research(serve_settings("--db", db, "--task-setting", "cube_wall_s=9")) as research:
        assert research.tasks("plugin-cube").options() == {"wall_s": 9}  # the flag over the variable
    assert "cube_wall_s" not in ServerSettings.model_fields


def test_a_bad_plugin_setting_is_refused_at_start_naming_the_flag_or_the_variable_it_came_from(
    tmp_path: Path, plugin_task: None, monkeypatch: pytest.MonkeyPatch
):
    db = str(tmp_path / "runs.db")
    with pytest.raises(ResearchError) as error:
        serve_settings("--db", db, "--task-setting", "cube_wall_s=0")
    assert (
        str(error.value) == "--task-setting cube_wall_s: Input should be greater than or equal to 1, not '0'"
    )
    monkeypatch.setenv("AUTORESEARCH_CUBE_WALL_S", "soon")
    with pytest.raises(ResearchError, match=r"^\$AUTORESEARCH_CUBE_WALL_S: Input should be a valid integer"):
        serve_settings("--db", db)
    monkeypatch.delenv("AUTORESEARCH_CUBE_WALL_S")
    with pytest.raises(ResearchError, match="--task-setting cube_wal_s: no registered task declares"):
        serve_settings("--db", db, "--task-setting", "cube_wal_s=9")


def test_every_package_in_the_source_tree_is_one_the_install_ships():
    """A package missing from pyproject's list reaches a `pip install .` only by setuptools' deprecated
    "would be ignored" fallback, with a warning on every install (the folder tasks did, until this test)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: Path(folder) for name, folder in setuptools["package-dir"].items()}

    def folder_of(package: str) -> Path:
        base = max((n for n in folders if package == n or package.startswith(n + ".")), key=len)
        return folders[base].joinpath(*package[len(base) :].split(".")[1:])

    shipped = {folder_of(p) for p in setuptools["packages"]}
    in_tree = {
        init.parent.relative_to(ROOT)
        for top in set(folders.values())
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert in_tree - shipped == set()
