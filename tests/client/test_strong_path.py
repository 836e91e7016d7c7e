"""A strong model's path through a real server (in this process: what it reads is the point, not the
transport), played by a scripted policy: it reads the turn resource before each step, proposes, and
reads why each result was or was not kept, with the secondary metrics the script printed. Nothing it
reads gives it an order: the default turn is the neutral profile's."""

import re
from pathlib import Path

import pytest

from autoresearch_mcp.client.connect import ResearchClient, connect
from autoresearch_mcp.contract.tools import Uri
from autoresearch_mcp.server.in_process import serve_here
from folder_fixture import make_folder

ORDERS = re.compile(r"Change at least one value|\be\.g\.|\bmake a change\b|\btry\b", re.IGNORECASE)


class StrongPolicy:
    """A model that knows what it wants to try: the defaults' neighbourhood first, then the bottom of
    the bowl, then a bold step away from it. It reads the turn before each proposal."""

    plan = ({"x": 0.1}, {"x": 0.3, "y": -0.2}, {"x": 0.9, "y": 0.9})

    def __init__(self) -> None:
        self.read: list[str] = []

    async def step(self, rc: ResearchClient, run_id: str, number: int) -> str:
        self.read.append(await rc.turn(run_id))
        outcome = await rc.call_tool("run_experiment", {"run_id": run_id, "params": self.plan[number]})
        assert outcome.ok, outcome.text
        return outcome.text


@pytest.mark.asyncio
async def test_a_strong_policy_reads_the_turn_and_sees_reasons_and_secondary_metrics_without_orders(
    tmp_path: Path,
):
    folder = make_folder(tmp_path, "bowl")
    policy = StrongPolicy()
    flags = ["--task-dir", str(folder)]
    async with connect(db=tmp_path / "runs.db", server_args=flags, here=serve_here) as rc:
        started = await rc.call_tool("start_run", {"task": "bowl", "budget": 3})
        run_id = started.data["run_id"]  # type: ignore[index]
        results = [await policy.step(rc, run_id, number) for number in range(3)]
        finished = await rc.call_tool("finish_run", {"run_id": run_id, "reason": "the bowl's bottom found"})
        policy.read.append(await rc.turn(run_id))
        uri = Uri.TURN.of(run_id=run_id)
        default = (await rc.client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
    assert finished.ok and default == policy.read[-1]
    assert "(steps 3)" in results[0] and results[0].endswith("Kept: the run's first result (loss 0.16).")
    assert re.search(r"\. Kept: .+\.$", results[1])
    assert re.search(r"\. Not kept: .+\.$", results[2]) and "best 0 (#2)" in results[2]
    assert "steps 3" in policy.read[1] and "Best loss=" in policy.read[2]  # secondary metrics in the turn
    assert policy.read[-1].startswith("bowl: exhausted") and "the bowl's bottom found" in policy.read[-1]
    for text in policy.read:
        assert ORDERS.search(text) is None, text
