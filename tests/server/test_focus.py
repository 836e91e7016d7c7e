"""A server focused on one task (`serve --tools-for TASK`): an outside framework's model is offered
what the bundled agent offers its model, and reads what that agent shows it each turn."""

import argparse
from pathlib import Path

import pytest
from mcp import Client

from autoresearch_mcp.client.tools import agent_tools
from autoresearch_mcp.contract.focus import focused_tool
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.main import add_serve_arguments, settings_from_args
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from folder_fixture import make_folder


@pytest.fixture
def bowl(settings: ServerSettings, tmp_path: Path) -> ServerSettings:
    """Settings with a task folder, `bowl`, registered."""
    return settings.model_copy(update={"task_dirs": [str(make_folder(tmp_path / "bowl"))]})


@pytest.mark.asyncio
async def test_a_focused_server_lists_the_tasks_tools_exactly_as_the_bundled_agent_offers_them(
    bowl: ServerSettings,
):
    with Research(bowl) as research:
        async with Client(build_server(research)) as client:
            everything = (await client.list_tools()).tools
        task = research.tasks("bowl").info()
        async with Client(build_server(research, tools_for="bowl")) as client:
            focused = (await client.list_tools()).tools
    ours = agent_tools(everything, task)  # what our agent sends its model
    assert [(t.name, t.description, t.input_schema) for t in focused] == [
        (s.name, s.description, s.input_schema) for s in ours
    ]
    assert [t.name for t in focused] == ["run_experiment"] and "run_id" not in str(focused[0].input_schema)
    # and shaping it again changes nothing: our agent on a focused server offers the same
    again = agent_tools(focused, task)
    assert [(s.name, s.input_schema) for s in again] == [(s.name, s.input_schema) for s in ours]


@pytest.mark.asyncio
async def test_a_focused_call_gets_the_profiles_fixed_arguments_and_reads_like_our_agents_turn(
    bowl: ServerSettings,
):
    with Research(bowl) as research:
        async with Client(build_server(research, tools_for="bowl")) as client:
            started = await client.call_tool("start_run", {"task": "bowl", "budget": 3})  # unlisted, callable
            run_id = started.structured_content["run_id"]
            prompt = (await client.get_prompt("autoresearch", {"task": "bowl", "run_id": run_id})).messages
            first = await client.call_tool("run_experiment", {"params": {"x": 0.5}})
            second = await client.call_tool("run_experiment", {"params": {"y": -0.2}})  # base="best"
    system = research.tasks("bowl").agent_profile().system_prompt
    assert (
        prompt[0].content.text.startswith(system)
        and "\n\n0/3 used, lower loss is better\n" in prompt[0].content.text
    )
    assert second.structured_content["experiment"]["params"] == {"x": 0.5, "y": -0.2, "shape": "bowl"}
    text = first.content[0].text
    assert text.startswith("#1 ok 0.1600 NEW BEST; best 0.1600 (#1); budget left 2\n1/3 used")
    assert text.endswith("\nNext?")  # the profile's request, as our agent ends each turn
    assert first.structured_content["experiment"]["iteration"] == 1  # the record is unchanged


def test_serve_takes_the_task_to_focus_on():
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    assert (
        settings_from_args(parser.parse_args(["--tools-for", "hpo-covertype"])).tools_for == "hpo-covertype"
    )


def test_the_focus_shapes_a_tool_once():
    schema = {"type": "object", "properties": {"run_id": {"type": "string"}, "x": {"type": "number"}}}
    profile = Research().tasks("toy-quadratic").agent_profile()
    description, shaped = focused_tool(ToolName.ADD_NOTE, schema, "Adds. A note.", profile, {})
    assert description == "Adds." and shaped == {
        "type": "object",
        "properties": {"x": {"type": "number"}},
        "required": [],
    }
    assert focused_tool(ToolName.ADD_NOTE, shaped, description, profile, {}) == (description, shaped)


@pytest.mark.asyncio
async def test_a_focused_hpo_server_offers_the_params_flat_and_nests_a_flat_call_for_the_run(
    settings: ServerSettings,
):
    with Research(settings) as research:
        async with Client(build_server(research, tools_for="hpo-covertype")) as client:
            (tool,) = (await client.list_tools()).tools
            await client.call_tool("start_run", {"task": "hpo-covertype", "budget": 1})
            done = await client.call_tool("run_experiment", {"max_depth": 4})  # as offered: flat
    assert "params" not in tool.input_schema["properties"] and "max_depth" in tool.input_schema["properties"]
    assert done.structured_content is not None
    assert done.structured_content["experiment"]["params"]["max_depth"] == 4
