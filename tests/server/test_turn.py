"""The turn resource: what a model reads before its next step, rendered once by the server
(server/turn.py) in a named profile. Neutral (the default) states facts; small adds the order that
names a value to change."""

from pathlib import Path

import pytest
from mcp import Client, MCPError

from autoresearch_mcp.contract.tools import Uri
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

ORDER = "Change at least one value"


async def read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]


@pytest.mark.asyncio
async def test_the_turn_is_the_summary_and_the_request_and_only_the_small_profile_gives_an_order(
    tmp_path: Path,
):
    with Research(ServerSettings(db_path=tmp_path / "runs.db")) as research:
        run, _ = research.runs.start_run("toy-quadratic", 5, None, 1, None)
        research.experiments.run_experiment(run.id, {"x": 0.1, "y": 0.2})
        async with Client(build_server(research)) as client:
            neutral = await read(client, Uri.TURN.of(run_id=run.id))
            small = await read(client, Uri.TURN.of(run_id=run.id, profile="small"))
            listed = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            with pytest.raises(MCPError, match="profile is one of neutral, small, not 'loud'"):
                await read(client, Uri.TURN.of(run_id=run.id, profile="loud"))
    assert Uri.TURN in listed
    assert neutral == f"{research.runs.get_run_summary(run.id)}\nNext?"
    assert ORDER not in neutral and "e.g." not in neutral
    assert f"{ORDER}, e.g. " in small and small.endswith("\nNext?")


@pytest.mark.asyncio
async def test_a_finished_runs_turn_says_how_it_ended_and_asks_for_nothing(tmp_path: Path):
    with Research(ServerSettings(db_path=tmp_path / "runs.db")) as research:
        run, _ = research.runs.start_run("toy-quadratic", 1, None, 1, None)
        research.experiments.run_experiment(run.id, {"x": 0.1})
        async with Client(build_server(research)) as client:
            for profile in ("neutral", "small"):
                turn = await read(client, Uri.TURN.of(run_id=run.id, profile=profile))
                assert turn == research.runs.get_run_summary(run.id, profile)  # type: ignore[arg-type]
                assert "exhausted" in turn and "Next" not in turn and ORDER not in turn


def test_a_turn_uri_carries_only_the_query_values_given():
    assert Uri.TURN.of(run_id="r-1") == "autoresearch://runs/r-1/turn"
    uri = Uri.TURN.of(run_id="r-1", profile="small", reply="text", shown=["b", "a"], skip=frozenset())
    assert uri == "autoresearch://runs/r-1/turn?profile=small&reply=text&shown=a,b"


@pytest.mark.asyncio
async def test_a_turn_lists_the_last_3_experiments_or_as_many_as_asked_up_to_16(tmp_path: Path):
    with Research(ServerSettings(db_path=tmp_path / "runs.db")) as research:
        run, _ = research.runs.start_run("toy-quadratic", 6, None, 1, None)
        for x in (0.1, 0.2, 0.3, 0.4, 0.5):
            research.experiments.run_experiment(run.id, {"x": x})
        async with Client(build_server(research)) as client:
            few = await read(client, Uri.TURN.of(run_id=run.id))
            batch = await read(client, Uri.TURN.of(run_id=run.id, last=5))
            for bad in ("0", "17", "four"):
                with pytest.raises(
                    MCPError, match=f"last is a number of experiments from 1 to 16, not '?{bad}"
                ):
                    await read(client, f"{Uri.TURN.of(run_id=run.id)}?last={bad}")
    rows = [line.split()[0] for line in few.splitlines() if line.startswith("#")]
    assert rows == ["#3", "#4", "#5"]
    rows = [line.split()[0] for line in batch.splitlines() if line.startswith("#")]
    assert rows == ["#1", "#2", "#3", "#4", "#5"]
