"""What a model inside a host (Claude Desktop, the Inspector) sees and gets: described arguments, tool
descriptions that say which task they serve, a refusal that explains a flat call, progress during long
calls, and a prompt scoped to its task and run."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from codeopt_rewrites import codeopt_folder
from mcp import Client

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.jobs import service as jobs
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tools import calls

pytestmark = pytest.mark.asyncio


@asynccontextmanager
async def client_for(settings: ServerSettings) -> AsyncIterator[Client]:
    """A client of a fresh server; the research is closed after (its job workers are processes)."""
    research = Research(settings).open()
    try:
        async with Client(build_server(research), raise_exceptions=True) as client:
            yield client
    finally:
        research.close()


async def started(client: Client, task: str = "toy-quadratic", budget: int = 5) -> str:
    result = await client.call_tool("start_run", {"task": task, "budget": budget})
    assert not result.is_error, result.content
    return result.structured_content["run_id"]


# Arguments whose name and type say what they are: words for them would be paid for on every turn. A
# run's seed, name and llm are not among them: a host's model cannot tell what they do to the run.
SELF_EXPLAINING = {
    *("run_id", "task", "text", "kind", "reason", "note", "offset", "status"),
    *("job_id", "wait_seconds", "sql", "max_rows"),
}


async def test_every_argument_that_needs_words_is_described_once_and_run_id_in_start_run(settings):
    async with client_for(settings) as client:
        tools = (await client.list_tools()).tools
        prompts = (await client.list_prompts()).prompts
    described: dict[str, str] = {}
    for tool in tools:
        assert tool.description and "\n " not in tool.description, tool.name
        for name, schema in tool.input_schema.get("properties", {}).items():
            said = schema.get("description")
            if said is None:
                assert name in SELF_EXPLAINING or name in described, f"{tool.name}.{name} has no description"
            else:
                assert described.get(name) != said, f"{tool.name}.{name} is described twice"
                described[name] = said
    start_run = next(tool for tool in tools if tool.name == "start_run")
    assert "run_id" in (start_run.description or "") and "run_id" not in described
    assert {"seed", "name", "llm", "remeasure"} <= set(described)
    [prompt] = prompts
    assert {arg.name: bool(arg.description) for arg in prompt.arguments} == {"task": True, "run_id": True}


async def test_experiment_tools_say_which_tasks_they_are_for(settings):
    async with client_for(settings) as client:
        tools = {tool.name: tool.description or "" for tool in (await client.list_tools()).tools}
    assert tools["run_experiment"].startswith("Params tasks (") and "hpo-covertype" in tools["run_experiment"]
    assert tools["submit_training_job"].startswith("Params tasks (")
    assert tools["run_benchmark"].startswith("Code tasks (codeopt-records)")
    assert "hpo-covertype" not in tools["run_benchmark"]
    for name in ("replace_function", "profile_train_py"):
        assert tools[name].startswith("Code tasks"), name


@pytest.mark.parametrize("tool", ["run_experiment", "submit_training_job"])
async def test_a_flat_call_is_refused_with_how_to_wrap_it_and_costs_nothing(settings, tool: str):
    async with client_for(settings) as client:
        run_id = await started(client)
        result = await client.call_tool(tool, {"x": 0.5, "y": 1.0, "run_id": run_id})
        bare = await client.call_tool(tool, {"run_id": run_id})
        summary = await client.call_tool("get_run_summary", {"run_id": run_id})
    assert result.is_error
    refusal = result.meta["autoresearch/refusal"]
    assert refusal["kind"] == "invalid_params"
    assert (
        "inside one `params` object" in refusal["message"]
        and '{"params": {"x": 0.5, "y": 1.0}}' in refusal["message"]
    )
    assert bare.is_error and "no params were given" in bare.content[0].text
    assert "0/5 used" in summary.structured_content["summary"]


async def test_run_experiment_sends_progress_while_it_trains(settings, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(calls, "PROGRESS_EVERY_S", 0.1)
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async with client_for(settings) as client:
        run_id = await started(client)
        with anyio.fail_after(60):
            result = await client.call_tool(
                "run_experiment",
                {"params": {"x": 0.1, "sleep": 1.0}, "run_id": run_id},
                progress_callback=progress,
            )
    assert not result.is_error and result.structured_content["experiment"]["status"] == "ok"
    assert len(seen) >= 3, seen
    values = [value for value, _, _ in seen]
    assert values == sorted(values) and all("experiment: running for" in (m or "") for _, _, m in seen)


async def ignore(value: float, total: float | None, message: str | None) -> None:
    pass


async def test_a_refusal_inside_a_progress_reporting_tool_is_still_a_refusal(settings):
    async with client_for(settings) as client:
        run_id = await started(client)
        result = await client.call_tool("run_benchmark", {"run_id": run_id}, progress_callback=ignore)
    assert result.is_error and result.meta["autoresearch/refusal"]["kind"] == "wrong_tool"


async def test_run_benchmark_sends_progress_while_it_times(tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(calls, "PROGRESS_EVERY_S", 0.05)
    seen: list[Any] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    settings = ServerSettings(
        db_path=tmp_path / "runs.db", task_dirs=[str(codeopt_folder(tmp_path / "codeopt-records", 500, 3))]
    )
    async with client_for(settings) as client:
        run_id = await started(client, "codeopt-records", 2)
        with anyio.fail_after(120):
            result = await client.call_tool("run_benchmark", {"run_id": run_id}, progress_callback=progress)
    assert not result.is_error, result.content
    assert seen and all("benchmark: running for" in m for m in seen)


async def test_get_job_with_a_wait_sends_progress_until_the_job_ends(
    settings, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(jobs, "PROGRESS_EVERY_S", 0.1)
    seen: list[Any] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async with client_for(settings) as client:
        run_id = await started(client)
        job = await client.call_tool(
            "submit_training_job", {"params": {"x": 0.2, "sleep": 1.0}, "run_id": run_id}
        )
        job_id = job.structured_content["job"]["id"]
        # The longest wait there is: an answer at its deadline would trip fail_after long before, so an
        # answer at all says it came when the job ended.
        with anyio.fail_after(120):
            done = await client.call_tool(
                "get_job", {"job_id": job_id, "wait_seconds": 600}, progress_callback=progress
            )
    assert done.structured_content["job"]["status"] == "done"
    assert len(seen) >= 2 and all(total == 600 for _, total, _ in seen)


async def test_the_prompt_for_a_code_task_has_no_parameter_rules_and_says_to_read_train_py(settings):
    async with client_for(settings) as client:
        code = (await client.get_prompt("autoresearch", {"task": "codeopt-records"})).messages[0].content.text
        params = (await client.get_prompt("autoresearch", {"task": "hpo-covertype"})).messages[0].content.text
    assert "`params`" not in code and "n_estimators" not in code
    assert "get_current_train_py before your first edit" in code and "Keep what the task needs" in code
    assert "The metric is timed and checked by the harness beside the reference" in code
    assert 'start_run(task="codeopt-records")' in code and "run_id on every later call" in code
    assert "inside one `params` object" in params and "n_estimators (int >=10 <=1000, default 100)" in params


async def test_the_prompt_for_a_given_run_names_it_and_takes_its_task(settings):
    async with client_for(settings) as client:
        run_id = await started(client)
        text = (await client.get_prompt("autoresearch", {"run_id": run_id})).messages[0].content.text
    assert f"Your run is {run_id}" in text and f"run_id={run_id!r} on every call" in text
    assert '"toy-quadratic"' in text and "start_run(" not in text


async def test_without_run_id_a_call_never_lands_in_one_of_several_running_runs(settings):
    research = Research(settings).open()
    server = build_server(research)
    try:
        async with Client(server) as first:
            one = await started(first)
        async with Client(server) as second:
            two = await started(second)
        async with Client(server) as host:  # a new connection: it started nothing
            result = await host.call_tool("run_experiment", {"params": {"x": 0.5}})
    finally:
        research.close()
    assert result.is_error
    refusal = result.meta["autoresearch/refusal"]
    assert refusal["kind"] == "ambiguous_run" and set(refusal["detail"]["running"]) == {one, two}
    assert one in refusal["message"] and two in refusal["message"] and "pass run_id" in refusal["message"]


async def test_a_host_reads_that_jobs_measure_several_experiments_at_once(settings):
    async with client_for(settings) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    submit = tools["submit_training_job"].description or ""
    assert "several run at once" in submit and "job_id" in submit and "get_job" in tools
