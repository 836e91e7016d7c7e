"""What the stateful agent reads from the server each turn: its own run (not every run), its summary;
and on an exact repeat, nothing more: the refusal carries the hint's facts."""

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.client.check import AgentConfig
from autoresearch_mcp.client.connect import ResearchClient, ToolOutcome
from autoresearch_mcp.client.llm.base import LLMRequest, LLMResponse, ToolCall, ToolSpec, anthropic_wire_tools
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.stateful import StatefulAgent
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.registry import make_task


class Repeater:
    """An LLM that sends the same experiment twice, then another."""

    name, scripted, cache_min_tokens = "repeater", True, None

    def __init__(self) -> None:
        self.replies = [{"x": 0.1, "y": 0.2}, {"x": 0.1, "y": 0.2}, {"x": 0.3, "y": 0.2}]
        self.requests: list[LLMRequest] = []

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return anthropic_wire_tools(tools)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        call = ToolCall(
            id=f"c{len(self.requests)}", name="run_experiment", arguments={"params": self.replies.pop(0)}
        )
        return LLMResponse(text="", tool_calls=[call], stop_reason="tool_use", usage=None, model="repeater")

    async def aclose(self) -> None:
        return None


class Recording(ResearchClient):
    """The agent's connection, noting every tool it calls and every resource it reads."""

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self.seen: list[str] = []
        read = client.read_resource

        async def read_resource(uri: str) -> Any:
            self.seen.append(str(uri))
            return await read(uri)

        client.read_resource = read_resource  # type: ignore[method-assign]

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        self.seen.append(tool)
        return await super().call(tool, arguments)


@pytest.mark.asyncio
async def test_each_turn_reads_the_run_alone_and_a_repeat_is_answered_without_the_history(tmp_path: Path):
    with Research(ServerSettings(db_path=tmp_path / "runs.db")) as research:
        for _ in range(3):  # other runs on the server, which the agent has no reason to read
            research.runs.start_run("toy-quadratic", 5, None, 1, None)
        run, _ = research.runs.start_run("toy-quadratic", 2, None, 1, None)
        async with Client(build_server(research)) as client:
            rc = Recording(client)
            llm = Repeater()
            config = AgentConfig(
                task=make_task("toy-quadratic", {}).info(), iterations=2, param_replies="tool"
            )
            transcript = Transcript(run.id, "stateful", llm=llm, path=tmp_path / "t.jsonl")
            result = await StatefulAgent(rc, transcript, run.id, config).run()
    assert result.experiments == 2 and result.refusals == {"exact_repeat": 1}
    refusal = llm.requests[2].messages[-1].tool_results[0].content
    assert refusal.endswith("Change at least one value this time, e.g. raise or lower x.")
    assert "get_experiment_history" not in rc.seen and "autoresearch://runs" not in rc.seen
    assert rc.seen.count(f"autoresearch://runs/{run.id}") >= 3  # each turn, its own run
