"""Class 8 of issue 13: what the model reads is short, clear and free of server internals. A failed job
says what failed without a traceback or an absolute path; list_runs does not show where the data lives; an
unknown task in the prompt is named; a non-finite target is refused; control characters are refused in
names and notes."""

import json
import math
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from conftest import plugged_in

pytestmark = pytest.mark.asyncio
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refused(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result
    return result.content[0].text


async def test_a_failed_job_tells_the_model_what_failed_without_a_traceback_or_paths(settings):
    research = Research(settings.model_copy(update={"workers": 1})).open()
    server = build_server(research)
    try:
        with plugged_in("failing_task"):  # toy-failing-worker, for this test only
            async with Client(server) as client:
                await call(client, "start_run", {"task": "toy-failing-worker", "budget": 3})
                job = (await call(client, "submit_training_job", {"params": {"x": 1.0}}))["job"]
                info = await call(client, "get_job", {"job_id": job["id"], "wait_seconds": 60})
    finally:
        research.close()
    text = json.dumps(info)
    assert info["job"]["status"] == "failed" and "RuntimeError" in info["job"]["error"], info
    assert "Traceback" not in text and 'File "' not in text
    assert PACKAGE_ROOT not in text and "/tests/" not in text, text


async def test_list_runs_and_the_views_do_not_show_the_absolute_data_path(settings, covtype_csv):
    async with Client(build_server(Research(settings))) as client:
        await call(client, "start_run", {"task": "hpo-covertype", "budget": 3})
        listed = json.dumps(await call(client, "list_runs"))
        resource = (await client.read_resource("autoresearch://runs")).contents[0].text
        viewed = json.dumps(await call(client, "query_results", {"sql": "SELECT config FROM v_runs"}))
    folder = str(covtype_csv.resolve().parent)
    for text in (listed, resource, viewed):
        assert folder not in text and covtype_csv.name in text


async def test_the_prompt_with_an_unknown_task_names_it_and_lists_the_tasks(settings):
    async with Client(build_server(Research(settings))) as client:
        with pytest.raises(Exception) as caught:
            await client.get_prompt("autoresearch", {"task": "no-such-task"})
    message = str(caught.value)
    assert "no-such-task" in message and "codeopt-records" in message, message
    assert "Internal server error" not in message


@pytest.mark.parametrize("target", [math.nan, math.inf, -math.inf])
async def test_a_non_finite_target_is_refused(settings, target):
    service = Research(settings).open()
    with pytest.raises(ResearchError, match="finite"):
        service.runs.start_run("toy-quadratic", 5, target, 42, None)


@pytest.mark.parametrize("text", ["a\x00b", "bell\x07", "esc\x1b[31mred", "rtl\u202eoverride", "cr\rlf"])
async def test_control_characters_are_refused_in_run_names_and_notes(settings, text):
    async with Client(build_server(Research(settings))) as client:
        message = await refused(client, "start_run", {"task": "toy-quadratic", "name": text})
        assert "control character" in message, message
        await call(client, "start_run", {"task": "toy-quadratic", "name": "plain name"})
        message = await refused(client, "add_note", {"text": text})
        assert "control character" in message, message
        note = await call(client, "add_note", {"text": "two lines\n\tindented"})
        assert note["text"] == "two lines\n\tindented"  # newlines and tabs stay: notes are multi-line
