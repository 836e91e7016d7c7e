"""The MCP tools as a client sees them, in memory, on the test-only toy task (real sandbox, real SQLite)."""

import json
import sqlite3
import threading
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from pydantic import BaseModel

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.tasks import registry
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome
from toy_task import ToyTask

pytestmark = pytest.mark.asyncio


@asynccontextmanager
async def connected(settings: ServerSettings):
    async with Client(build_server(Research(settings)), raise_exceptions=True) as client:
        yield client


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.call_tool(tool, args or {})
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refused(client: Client, tool: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error
    return result.content[0].text


async def current_source(client: Client, run_id: str | None = None) -> str:
    """train.py as get_current_train_py's text gives it, once: a header line, then the plain source."""
    result = await client.call_tool("get_current_train_py", {"run_id": run_id} if run_id else {})
    assert result.structured_content["source"] is None
    return result.content[0].text.split("\n", 1)[1]


def table_dump(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        rows = []
        for table in ("runs", "experiments", "notes", "artifacts"):
            rows += [(table, *row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1")]
        return rows
    finally:
        conn.close()


async def test_tools_have_the_contract_names_and_true_annotations(settings):
    async with connected(settings) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name in (
        "start_run",
        "list_runs",
        "run_experiment",
        "get_experiment_history",
        "get_run_summary",
        "add_note",
        "finish_run",
        "get_current_train_py",
        "modify_train_py",
        "revert_train_py",
        "run_benchmark",
    ):
        assert name in tools
        assert tools[name].annotations is not None
        assert tools[name].output_schema is not None
    for name in ("list_runs", "get_experiment_history", "get_run_summary", "get_current_train_py"):
        assert tools[name].annotations.read_only_hint is True
    for name in ("start_run", "run_experiment", "add_note", "modify_train_py"):
        assert tools[name].annotations.read_only_hint is False
        assert tools[name].annotations.destructive_hint is False
    # params are one object in the catalogue (each task's keys and ranges come with start_run's answer);
    # the server still refuses unknown keys and values out of range, per task
    assert tools["run_experiment"].input_schema["properties"]["params"]["type"] == "object"


async def test_a_run_records_experiments_tracks_the_best_and_ends_exhausted(settings):
    async with connected(settings) as client:
        started = await call(client, "start_run", {"task": "toy-quadratic", "budget": 3})
        assert "0/3 used" in started["summary"]
        first = await call(client, "run_experiment", {"params": {"x": 0.0}, "note": "baseline"})
        assert first["experiment"]["status"] == "ok" and first["is_new_best"]
        worse = await call(client, "run_experiment", {"params": {"x": 2.0}})
        assert not worse["is_new_best"] and worse["best"]["iteration"] == 1
        better = await call(client, "run_experiment", {"params": {"x": 0.3, "y": -0.2}})
        assert better["is_new_best"] and better["experiment"]["metric"] == pytest.approx(0.0)
        assert better["run_status"] == "exhausted" and better["budget_left"] == 0
        runs = (await call(client, "list_runs"))["runs"]
        assert runs[0]["status"] == "exhausted" and runs[0]["used"] == 3
        assert runs[0]["best"]["iteration"] == 3


async def test_refusals_explain_themselves_cost_no_budget_and_change_nothing_recorded(settings):
    async with connected(settings) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 2}))["run_id"]
        await call(client, "run_experiment", {"params": {"x": 1.0}})
        before = table_dump(settings.db_path)

        text = await refused(client, "run_experiment", {"params": {"x": 1.0, "bogus": 3}})
        assert "unknown parameter 'bogus'" in text and "x (float >=-10 <=10" in text
        text = await refused(client, "run_experiment", {"params": {"x": 99}})
        assert "x: Input should be less than or equal to 10" in text and "no budget used" in text
        text = await refused(client, "run_experiment", {"params": {"x": "left"}})
        assert "x:" in text
        text = await refused(client, "run_experiment", {"params": {"x": 1.0}})
        assert "exact repeat of experiment #1" in text
        text = await refused(client, "run_experiment", {"params": {"x": 1.0}, "run_id": "r-nope"})
        assert "unknown run 'r-nope'" in text
        text = await refused(client, "start_run", {"task": "no-such-task"})
        assert "toy-quadratic" in text

        assert table_dump(settings.db_path) == before
        summary = (await call(client, "get_run_summary", {"run_id": run_id}))["summary"]
        assert (
            "1/2 used" in summary and "refused 4" in summary and "4 refusals or failures in a row" in summary
        )
        # the small profile's agent counts refusals among its failures, in the words its prompts know
        small = (await client.read_resource(f"autoresearch://runs/{run_id}/summary/small")).contents[0]
        assert "4 failures in a row" in small.text and "refusals or failures" not in small.text


async def test_an_empty_source_or_edit_list_counts_as_not_given_as_grammar_bound_models_send_them(settings):
    """A grammar-constrained local model fills every property: `"source": ""` beside real edits."""
    async with connected(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 2})
        edit = {"search": "+ 0.2)", "replace": "+ 0.25)"}
        version = await call(
            client, "modify_train_py", {"description": "scale y", "source": "", "edits": [edit]}
        )
        assert version["version"] == 2
        text = await refused(client, "modify_train_py", {"description": "x", "source": " \n", "edits": []})
        assert "both were empty" in text
        text = await refused(
            client,
            "modify_train_py",
            {"description": "x", "source": "def score(params):\n    return 0\n", "edits": [edit]},
        )
        assert "not both" in text
        assert (await call(client, "get_current_train_py"))["version"] == 2


async def test_resending_a_version_that_crashed_says_how_it_ended_and_what_would_help(settings):
    """Qwen2.5-Coder-1.5B resent its crashed version unchanged, read "no change", and gave up."""
    async with connected(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 3})
        source = await current_source(client)
        broken = source.replace("+ 0.2)", "+ 0.2 + undefined_name)")
        await call(client, "modify_train_py", {"description": "break it", "source": broken})
        assert (await call(client, "run_experiment", {"params": {}}))["experiment"]["status"] == "crash"
        text = await refused(client, "modify_train_py", {"description": "again", "source": broken})
        assert "no change: this is already train.py v2, which ended crash in #1 (exited with code 1" in text
        assert text.endswith("): fix that, or go back to a version that ran")
        await call(client, "revert_train_py", {"version": 1})
        await call(client, "run_experiment", {"params": {}})
        text = await refused(client, "modify_train_py", {"description": "same", "source": source})
        assert text.endswith("no change: this is already train.py v3")  # it ran: nothing more to say


async def test_finished_and_exhausted_runs_refuse_experiments(settings):
    async with connected(settings) as client:
        first = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 1}))["run_id"]
        await call(client, "run_experiment", {"params": {}})
        text = await refused(client, "run_experiment", {"params": {"x": 2.0}, "run_id": first})
        assert f"run {first} is exhausted" in text
        text = await refused(client, "run_experiment", {"params": {"x": 2.0}})
        assert f"no run is running (the latest, {first}, is exhausted)" in text
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 5}))["run_id"]
        final = await call(client, "finish_run", {"reason": "enough"})
        assert final["run_id"] == run_id and ": stopped," in final["summary"]
        text = await refused(client, "run_experiment", {"params": {"x": 2.0}})
        assert "stopped" in text and "start_run" in text


async def test_a_crashing_experiment_is_recorded_with_its_error_and_costs_budget(settings):
    async with connected(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 4})
        crashed = await call(client, "run_experiment", {"params": {"x": 9.0}})
        assert crashed["experiment"]["status"] == "crash"
        assert "x=9 always crashes" in crashed["experiment"]["error_tail"]
        assert crashed["budget_left"] == 3
        ok = await call(client, "run_experiment", {"params": {"x": 0.0}})
        assert ok["experiment"]["status"] == "ok"


async def test_reaching_the_target_converges_the_run(settings):
    async with connected(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 10, "target": -0.5})
        miss = await call(client, "run_experiment", {"params": {"x": 3.0}})
        assert miss["run_status"] == "running"
        hit = await call(client, "run_experiment", {"params": {"x": 0.5}})
        assert hit["run_status"] == "converged"


async def test_history_pages_orders_and_filters(settings):
    async with connected(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 6})
        for x in (2.0, 0.0, 9.0, 1.0, 0.5):
            await call(client, "run_experiment", {"params": {"x": x}})
        page = await call(client, "get_experiment_history", {"offset": 0, "last": 2})
        assert [e["iteration"] for e in page["experiments"]] == [4, 5] and page["total"] == 5
        by_metric = await call(client, "get_experiment_history", {"order": "metric", "status": "ok"})
        assert [e["params"]["x"] for e in by_metric["experiments"]] == [0.5, 0.0, 1.0, 2.0]
        crashes = await call(client, "get_experiment_history", {"status": "crash"})
        assert crashes["total"] == 1 and crashes["experiments"][0]["params"]["x"] == 9.0
        second = await call(client, "get_experiment_history", {"offset": 3})
        assert [e["iteration"] for e in second["experiments"]] == [4, 5] and second["next_offset"] is None


async def test_notes_appear_in_the_summary_and_the_resources_serve_the_run(settings):
    async with connected(settings) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic"}))["run_id"]
        await call(client, "add_note", {"text": "walk x towards 0.3"})
        await call(client, "add_note", {"text": "large y is hopeless", "kind": "failed"})
        await call(client, "run_experiment", {"params": {"x": 0.1}})
        summary = (await client.read_resource(f"autoresearch://runs/{run_id}/summary")).contents[0].text
        assert "Strategy: walk x towards 0.3" in summary
        assert "Failed: large y is hopeless" in summary
        history = json.loads(
            (await client.read_resource(f"autoresearch://runs/{run_id}/history")).contents[0].text
        )
        assert history["total"] == 1
        runs = json.loads((await client.read_resource("autoresearch://runs")).contents[0].text)
        assert runs["runs"][0]["id"] == run_id
        source = (await client.read_resource(f"autoresearch://runs/{run_id}/train.py")).contents[0].text
        assert "def score(params)" in source


async def test_the_autoresearch_prompt_gives_goal_tools_rules_and_stop_conditions(settings):
    async with connected(settings) as client:
        prompt = await client.get_prompt("autoresearch", {"task": "hpo-covertype"})
    text = prompt.messages[0].content.text
    assert "hpo-covertype" in text and "run_experiment" in text and "finish_run" in text
    assert "n_estimators (int >=10 <=1000, default 100)" in text


class HeldToyTask(ToyTask):
    """The toy task, whose experiments wait until the test lets them finish."""

    name = "toy-held"
    release = threading.Event()

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        assert self.release.wait(timeout=120), "the test never let the experiment finish"
        return super().execute(params, source, ctx)


async def test_summary_and_history_are_answered_while_an_experiment_runs(settings, monkeypatch):
    monkeypatch.setitem(registry._REGISTRY, HeldToyTask.name, HeldToyTask)
    monkeypatch.setattr(HeldToyTask, "release", threading.Event())
    async with connected(settings) as client:
        await call(client, "start_run", {"task": HeldToyTask.name, "budget": 3})
        HeldToyTask.release.set()
        await call(client, "run_experiment", {"params": {"x": 1.0}})
        HeldToyTask.release.clear()
        done = anyio.Event()

        async def held_experiment() -> None:
            await call(client, "run_experiment", {"params": {"x": 0.0}})
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(held_experiment)
            with anyio.fail_after(60):
                while "Running: #2" not in (summary := (await call(client, "get_run_summary"))["summary"]):
                    await anyio.sleep(0.02)
            history = await call(client, "get_experiment_history")
            # Answered while the experiment is held: nothing waited for it.
            assert not done.is_set()
            HeldToyTask.release.set()
        assert done.is_set()
    assert "Running: #2 x=0" in summary and history["total"] == 2
    assert [e["status"] for e in history["experiments"]] == ["ok", "running"]


async def test_a_legacy_session_keeps_using_the_run_it_started(settings):
    research = Research(settings).open()
    server = build_server(research)
    async with Client(server, mode="legacy") as mine, Client(server, mode="legacy") as other:
        my_run = (await call(mine, "start_run", {"task": "toy-quadratic"}))["run_id"]
        other_run = (await call(other, "start_run", {"task": "toy-quadratic"}))["run_id"]
        assert (await call(mine, "get_run_summary"))["run_id"] == my_run
        assert (await call(other, "get_run_summary"))["run_id"] == other_run


async def test_an_empty_run_id_is_refused_rather_than_taken_as_the_default(settings):
    async with connected(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic"})
        text = await refused(client, "get_run_summary", {"run_id": ""})
        assert "run_id" in text and "at least 1 character" in text


async def refusal_of(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert result.is_error and result.structured_content is None  # nothing a schema check could reject
    refusal = result.meta["autoresearch/refusal"]
    assert refusal["message"] == result.content[0].text
    return refusal


async def test_refusals_carry_their_kind_for_programs_and_their_message_for_the_model(
    settings: ServerSettings,
):
    async with connected(settings) as client:
        assert (await refusal_of(client, "get_run_summary", {"run_id": "r-nope"}))["kind"] == "unknown_run"
        assert (await refusal_of(client, "get_run_summary", {}))["kind"] == "no_running_run"
        first = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 3}))["run_id"]
        await call(client, "run_experiment", {"params": {"x": 1.0}, "run_id": first})
        repeat = await refusal_of(client, "run_experiment", {"params": {"x": 1.0}, "run_id": first})
        assert repeat["kind"] == "exact_repeat"
        # what an agent needs to name a change, so it never reads the history to find out
        assert repeat["detail"] == {
            "iteration": 1,
            "params": {"sleep": 0.0, "x": 1.0, "y": 0.0},
            "distinct": {"sleep": 1, "x": 1, "y": 1},
        }
        invalid = await refusal_of(client, "run_experiment", {"params": {"x": 99.0}, "run_id": first})
        assert invalid["kind"] == "invalid_params"
        wrong = await refusal_of(client, "run_benchmark", {"run_id": first})
        assert wrong["kind"] == "wrong_tool"
        edit = {"description": "d", "edits": [{"search": "not in the file", "replace": "x"}], "run_id": first}
        assert (await refusal_of(client, "modify_train_py", edit))["kind"] == "rejected_edit"
        # an edit or a revert that would leave train.py as it is: a change to ask for, not a broken edit
        source = await current_source(client, first)
        same = {"description": "d", "source": source, "run_id": first}
        assert (await refusal_of(client, "modify_train_py", same))["kind"] == "no_change"
        to_current = {"version": 1, "run_id": first}
        assert (await refusal_of(client, "revert_train_py", to_current))["kind"] == "no_change"


async def test_with_several_runs_running_a_call_without_run_id_is_refused_with_the_list(tmp_path: Path):
    settings = ServerSettings(db_path=tmp_path / "runs.db")
    async with connected(settings) as starter:
        a = (await call(starter, "start_run", {"task": "toy-quadratic", "name": "first"}))["run_id"]
        b = (await call(starter, "start_run", {"task": "toy-quadratic", "name": "second"}))["run_id"]
    # A client without a session of its own must not land in either run by a guess.
    research = Research(settings)
    async with Client(build_server(research)) as other:
        refusal = await refusal_of(other, "run_experiment", {"params": {"x": 1.0}})
        assert refusal["kind"] == "ambiguous_run" and set(refusal["detail"]["running"]) == {a, b}
        assert a in refusal["message"] and b in refusal["message"] and "pass run_id" in refusal["message"]
    research.close()


async def test_start_run_with_an_unknown_task_is_an_unknown_task_refusal_naming_the_tasks(settings):
    async with connected(settings) as client:
        schema = next(t for t in (await client.list_tools()).tools if t.name == "start_run").input_schema
        result = await client.call_tool("start_run", {"task": "nope", "budget": 2})
        runs = (await call(client, "list_runs"))["runs"]
    assert {"hpo-covertype", "codeopt-records", "toy-quadratic"} <= set(schema["properties"]["task"]["enum"])
    refusal = result.meta["autoresearch/refusal"]
    assert result.is_error and refusal["kind"] == "unknown_task"
    text = result.content[0].text
    assert text.startswith("unknown task 'nope'; available tasks: ") and "hpo-covertype" in text
    assert "pydantic" not in text and "validation error" not in text and runs == []


async def test_missing_data_is_unavailable_without_a_path_and_tells_the_model_whom_to_tell(
    settings, tmp_path: Path
):
    missing = tmp_path / "nowhere.csv"
    async with connected(settings.with_options(covtype_path=str(missing))) as client:
        result = await client.call_tool("start_run", {"task": "hpo-covertype", "budget": 2})
        runs = (await call(client, "list_runs"))["runs"]
    refusal = result.meta["autoresearch/refusal"]
    text = result.content[0].text
    assert result.is_error and refusal["kind"] == "unavailable" and runs == []
    assert "no Covertype data" in text and "tell the server's operator" in text
    assert str(tmp_path) not in text and "nowhere" not in text and "--data" not in text
    assert "no file 'nowhere.csv'" in refusal["detail"]["operator"]
    assert str(tmp_path) not in refusal["detail"]["operator"]


async def test_start_run_keeps_who_proposes_the_experiments_with_the_run(settings):
    async with connected(settings) as client:
        await call(client, "start_run", {"task": "toy-quadratic", "budget": 2, "llm": "scripted"})
        [run] = (await call(client, "list_runs"))["runs"]
    assert run["llm"] == "scripted" and run["config"]["llm"] == "scripted" and run["tags"] == []


async def test_an_interrupted_experiment_keeps_its_number_and_costs_no_budget(settings):
    async with connected(settings) as client:
        run_id = (await call(client, "start_run", {"task": "toy-quadratic", "budget": 2}))["run_id"]
        store = Store(settings.db_path)  # as a server that died with it in flight would leave it
        cut = store.reserve_experiment(run_id, {"x": 0.5, "y": 0.0, "sleep": 0.0}, 1, None)
        store.complete_experiment(
            cut.id, status="interrupted", metrics={}, metric=None, error_tail="stopped", duration_s=1.0
        )
        first = await call(client, "run_experiment", {"params": {"x": 0.5}, "run_id": run_id})
        second = await call(client, "run_experiment", {"params": {"x": 0.1}, "run_id": run_id})
        used = await call(
            client, "query_results", {"sql": f"SELECT used FROM v_runs WHERE run_id = '{run_id}'"}
        )
    store.close()
    assert [first["experiment"]["iteration"], second["experiment"]["iteration"]] == [2, 3]
    assert first["budget_left"] == 1 and second["run_status"] == "exhausted" and used["rows"] == [[2]]
