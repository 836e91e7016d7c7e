"""The bundled agent's profiles: `small` (what helps a small local model) and `neutral` (facts, no
orders), how `--profile auto` picks one, and what each does with an early DONE and with reverts. The
agent reads its turn from the server's turn resource, in its profile's words."""

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.client.check import AgentConfig, AgentProfileName
from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.llm.base import LLMRequest, LLMResponse, ToolSpec, anthropic_wire_tools
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.profiles import model_size_b, pick_profile
from autoresearch_mcp.client.stateful import StatefulAgent
from autoresearch_mcp.contract.tools import Uri
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from folder_fixture import make_folder


class Says:
    """An LLM that answers with the texts it is given, in order."""

    name, scripted, cache_min_tokens = "says", True, None

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.requests: list[LLMRequest] = []

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return anthropic_wire_tools(tools)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return LLMResponse(
            text=self.replies.pop(0), tool_calls=[], stop_reason="end_turn", usage=None, model="says"
        )

    async def aclose(self) -> None:
        return None


class Reading(ResearchClient):
    """The agent's connection, keeping what each resource read returned."""

    def __init__(self, client: Client) -> None:
        super().__init__(client)
        self.read: list[tuple[str, str]] = []
        read = client.read_resource

        async def read_resource(uri: str) -> Any:
            result = await read(uri)
            self.read.append((str(uri), result.contents[0].text))
            return result

        client.read_resource = read_resource  # type: ignore[method-assign]


def test_auto_picks_small_for_the_double_a_local_endpoint_and_a_small_model_and_neutral_otherwise(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert pick_profile("auto", "scripted") == pick_profile("auto", "scripted-sloppy") == "small"
    assert pick_profile("auto", "openai", "http://127.0.0.1:8080/v1") == "small"
    assert pick_profile("auto", "openai", "http://localhost:11434/v1", "llama3.1:70b") == "small"
    assert pick_profile("auto", "openai", "https://api.example.com/v1", "qwen2.5-coder-1.5b") == "small"
    assert pick_profile("auto", "openai", "https://api.example.com/v1", "Llama-3.2-3B-Instruct") == "small"
    assert pick_profile("auto", "openai", "https://api.example.com/v1", "llama-3.1-8b") == "neutral"
    assert pick_profile("auto", "openai", None, "gpt-4o") == "neutral"
    assert pick_profile("auto", "anthropic", None, "claude-haiku-4-5") == "neutral"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://[::1]:8080/v1")
    assert pick_profile("auto", "openai") == "small"
    assert pick_profile("neutral", "scripted") == "neutral" and pick_profile("small", "anthropic") == "small"
    assert model_size_b("qwen2.5-coder-1.5b-instruct-q4_k_m") == 1.5 and model_size_b("gpt-4o") is None


@pytest.mark.asyncio
@pytest.mark.parametrize("profile", ["small", "neutral"])
async def test_the_agent_reads_the_servers_turn_in_its_profiles_words(
    profile: AgentProfileName, tmp_path: Path
):
    with Research(ServerSettings(db_path=tmp_path / "runs.db")) as research:
        run, _ = research.runs.start_run("toy-quadratic", 4, None, 1, None)
        research.experiments.run_experiment(run.id, {})
        async with Client(build_server(research)) as client:
            rc = Reading(client)
            llm = Says('{"x": 0.2}', "DONE: enough.")
            config = AgentConfig(task=research.tasks("toy-quadratic").info(), iterations=3, profile=profile)
            transcript = Transcript(run.id, "stateful", llm=llm, path=tmp_path / "t.jsonl")
            await StatefulAgent(rc, transcript, run.id, config).run()
    turns = [text for uri, text in rc.read if uri.startswith(Uri.TURN.of(run_id=run.id))]
    assert next(uri for uri, _ in rc.read if "/turn" in uri) == Uri.TURN.of(
        run_id=run.id, profile=profile, reply="json"
    )
    assert llm.requests[0].messages[-1].text == turns[0]
    said = "\n".join(message.text for request in llm.requests for message in request.messages)
    assert ("Change at least one value" in said) == (profile == "small")


def code_folder(root: Path) -> Path:
    return make_folder(root, "bowl", extra='work = "code"\nprofile = false')


@pytest.mark.asyncio
@pytest.mark.parametrize("profile", ["small", "neutral"])
async def test_only_the_small_profile_questions_an_early_done_and_counts_reverts_as_failures(
    profile: AgentProfileName, tmp_path: Path
):
    folder = code_folder(tmp_path)
    line = next(line for line in (folder / "train.py").read_text().splitlines() if "loss:" in line)
    halved = line.replace("float(weight) *", "0.5 * float(weight) *")
    llm = Says(
        f"Halve the loss.\n<<<<<<< SEARCH\n{line}\n=======\n{halved}\n>>>>>>> REPLACE",
        "REVERT v1",
        "REVERT v2",
        "REVERT v1",
        "DONE: nothing left.",
    )
    with Research(ServerSettings(db_path=tmp_path / "runs.db", task_dirs=[str(folder)])) as research:
        run, _ = research.runs.start_run("bowl", 6, None, 1, None)
        async with Client(build_server(research)) as client:
            config = AgentConfig(
                task=research.tasks("bowl").info(),
                iterations=6,
                max_failures=3,
                code_replies="text",
                profile=profile,
            )
            transcript = Transcript(run.id, "stateful", llm=llm, path=tmp_path / "t.jsonl")
            result = await StatefulAgent(ResearchClient(client), transcript, run.id, config).run()
    assert result.experiments == 1
    if profile == "small":  # a second revert before anything ran again is refused; the streak ends it
        assert (result.stop_reason, result.refusals) == ("failures", {"second_revert": 2})
    else:  # three reverts, then a DONE with 5 of 6 experiments left: the model's decision
        assert (result.stop_reason, result.refusals) == ("llm-done", {})
        assert result.detail == "DONE: nothing left."
