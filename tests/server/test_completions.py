"""Completions (server/completions.py): task names for the prompt, run ids for the resource templates."""

from typing import Any

import pytest
from mcp import Client
from mcp import types as t

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.registry import task_names

pytestmark = pytest.mark.asyncio

PROMPT = t.PromptReference(name="autoresearch")
SUMMARY = t.ResourceTemplateReference(uri="autoresearch://runs/{run_id}/summary")
TRAIN_PY = t.ResourceTemplateReference(uri="autoresearch://runs/{run_id}/train.py")


async def complete(client: Client, ref: Any, name: str, value: str) -> t.Completion:
    return (await client.complete(ref, {"name": name, "value": value})).completion


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_prompts_task_completes_to_the_registered_tasks_with_that_prefix(
    settings: ServerSettings, mode: str
):
    async with Client(build_server(Research(settings)), mode=mode) as client:
        assert client.server_capabilities.completions is not None
        assert (await complete(client, PROMPT, "task", "hpo")).values == ["hpo-covertype"]
        assert (await complete(client, PROMPT, "task", "toy-")).values == ["toy-quadratic"]
        everything = await complete(client, PROMPT, "task", "")
        assert everything.values == task_names() and everything.total == len(task_names())
        assert (await complete(client, PROMPT, "task", "nothing-like-it")).values == []


async def test_a_run_id_completes_to_known_runs_most_recent_first_with_that_prefix(settings: ServerSettings):
    research = Research(settings)
    async with Client(build_server(research)) as client:
        ids = [research.runs.start_run("toy-quadratic", 3, None, 0, None)[0].id for _ in range(3)]
        newest_first = ids[::-1]
        assert (await complete(client, SUMMARY, "run_id", "")).values == newest_first
        assert (await complete(client, TRAIN_PY, "run_id", "r-")).values == newest_first
        assert (await complete(client, SUMMARY, "run_id", ids[1][:12])).values == [ids[1]]
        assert (await complete(client, SUMMARY, "run_id", "x")).values == []
        assert (await complete(client, PROMPT, "run_id", "")).values == newest_first  # the prompt's too


async def test_run_id_completions_stop_at_the_protocols_hundred_and_say_there_are_more(
    settings: ServerSettings,
):
    research = Research(settings)
    async with Client(build_server(research), mode="legacy") as client:
        ids = [research.runs.start_run("toy-quadratic", 1, None, 0, None)[0].id for _ in range(101)]
        completion = await complete(client, SUMMARY, "run_id", "r-")
    assert completion.values == ids[::-1][:100]
    assert completion.total == 101 and completion.has_more is True


async def test_arguments_without_completions_complete_to_nothing_rather_than_fail(settings: ServerSettings):
    async with Client(build_server(Research(settings))) as client:
        assert (await complete(client, t.PromptReference(name="made-up"), "task", "h")).values == []
        assert (await complete(client, PROMPT, "other", "h")).values == []
        made_up = t.ResourceTemplateReference(uri="test://{run_id}")
        assert (await complete(client, made_up, "run_id", "r")).values == []
