"""The openai backend: the real SDK against a local fake OpenAI-compatible endpoint."""

from typing import Any

import pytest

from autoresearch_mcp.client.llm import (
    LLMError,
    LLMRequest,
    Message,
    RetryPolicy,
    ToolCall,
    ToolResult,
    ToolSpec,
    make_llm,
    openai_backend,
)
from autoresearch_mcp.client.llm.openai_backend import OpenAILLM
from fakes import FakeOpenAIServer, FakeReply, Reply, chat_completion, error_reply

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01)
TOOL = ToolSpec(
    name="run_experiment",
    description="Run one experiment.",
    input_schema={"type": "object", "properties": {"params": {"type": "object"}}},
)


def _llm(fake: FakeOpenAIServer, model: str | None = "qwen2.5-coder") -> OpenAILLM:
    llm = make_llm("openai", model=model, base_url=fake.base_url, api_key=None, seed=7, retry=FAST)
    assert isinstance(llm, OpenAILLM)
    return llm


@pytest.mark.asyncio
async def test_tool_calls_are_parsed_and_history_goes_out_as_chat_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    reply = chat_completion(
        "Deeper trees.",
        [("run_experiment", {"params": {"max_depth": 8}})],
        prompt_tokens=300,
        completion_tokens=25,
        cached_tokens=128,
    )
    history = [
        Message(role="user", text="Summary: best 0.71."),
        Message(
            role="assistant", tool_calls=[ToolCall(id="c1", name="run_experiment", arguments={"params": {}})]
        ),
        Message(
            role="user",
            text="Summary: best 0.72.",
            tool_results=[ToolResult(tool_call_id="c1", content="invalid max_depth", is_error=True)],
        ),
    ]
    with FakeOpenAIServer([reply]) as fake:
        llm = _llm(fake)
        try:
            response = await llm.complete(LLMRequest(system="You tune.", tools=[TOOL], messages=history))
        finally:
            await llm.aclose()

    assert response.text == "Deeper trees." and response.stop_reason == "tool_use"
    assert [(c.name, c.arguments, c.parse_error) for c in response.tool_calls] == [
        ("run_experiment", {"params": {"max_depth": 8}}, None)
    ]
    assert response.usage is not None and response.usage.model_dump() == {
        "input_tokens": 300,
        "output_tokens": 25,
        "cache_creation_input_tokens": None,
        "cache_read_input_tokens": 128,
        "cached_in_input": True,  # prompt_tokens counts the cached tokens too
    }
    assert llm.name == "openai:qwen2.5-coder" and not llm.scripted

    req = fake.requests[0]
    assert req.path == "/v1/chat/completions" and req.headers["authorization"] == "Bearer not-needed"
    body = req.body
    assert body is not None
    assert body["model"] == "qwen2.5-coder" and body["max_tokens"] == 1024 and body["seed"] == 7_000_021
    assert body["tools"] == [
        {"type": "function", "function": {"name": "run_experiment", "description": "Run one experiment.",
                                          "parameters": TOOL.input_schema}}
    ]  # fmt: skip
    assert body["messages"] == [
        {"role": "system", "content": "You tune."},
        {"role": "user", "content": "Summary: best 0.71."},
        {
            "role": "assistant",
            "content": "",  # a string: llama.cpp rejects null
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "run_experiment", "arguments": '{"params": {}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ERROR: invalid max_depth"},
        {"role": "user", "content": "Summary: best 0.72."},
    ]


def test_tool_results_can_travel_as_user_text_for_servers_that_drop_tool_messages() -> None:
    from autoresearch_mcp.client.llm.openai_backend import to_api_messages

    history = [
        Message(role="user", text="Summary: best 0.71."),
        Message(
            role="assistant", tool_calls=[ToolCall(id="c1", name="run_experiment", arguments={"params": {}})]
        ),
        Message(
            role="user",
            tool_results=[ToolResult(tool_call_id="c1", content="invalid max_depth", is_error=True)],
        ),
    ]
    sent = to_api_messages("You tune.", history, results_as_text=True)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[-1] == {"role": "user", "content": "Result of run_experiment: ERROR: invalid max_depth"}
    assert all(m["role"] != "tool" for m in sent)


@pytest.mark.asyncio
async def test_invalid_json_arguments_from_a_small_model_become_a_reportable_parse_error() -> None:
    reply = chat_completion(None, [("run_experiment", '{"params": {"max_depth": 8,'), ("add_note", "[1, 2]")])
    with FakeOpenAIServer([reply]) as fake:
        llm = _llm(fake)
        try:
            response = await llm.complete(
                LLMRequest(system="s", tools=[TOOL], messages=[Message(role="user", text="go")])
            )
        finally:
            await llm.aclose()
    broken, not_object = response.tool_calls
    assert broken.arguments == {} and broken.parse_error is not None
    assert "not valid JSON" in broken.parse_error and '{"params": {"max_depth": 8,' in broken.parse_error
    assert (
        not_object.arguments == {}
        and not_object.parse_error is not None
        and "JSON object" in not_object.parse_error
    )
    assert response.text == "" and response.stop_reason == "tool_use"


@pytest.mark.asyncio
async def test_plain_text_answers_map_finish_reasons_to_the_neutral_vocabulary() -> None:
    with FakeOpenAIServer([chat_completion("{}"), chat_completion("cut", finish_reason="length")]) as fake:
        llm = _llm(fake)
        try:
            done = await llm.complete(LLMRequest(system="", messages=[Message(role="user", text="go")]))
            cut = await llm.complete(LLMRequest(system="", messages=[Message(role="user", text="go")]))
        finally:
            await llm.aclose()
    assert (done.stop_reason, done.tool_calls) == ("end_turn", [])
    assert cut.stop_reason == "max_tokens"
    first = fake.bodies()[0]
    assert "tools" not in first and first["messages"] == [{"role": "user", "content": "go"}]


@pytest.mark.asyncio
async def test_without_a_model_name_the_first_served_model_is_used() -> None:
    with FakeOpenAIServer([chat_completion("hi", model="local.gguf")], models=("local.gguf",)) as fake:
        llm = _llm(fake, model=None)
        try:
            assert llm.name == "openai:auto"
            await llm.complete(LLMRequest(system="", messages=[Message(role="user", text="go")]))
        finally:
            await llm.aclose()
    assert llm.name == "openai:local.gguf" and fake.bodies("/chat/completions")[0]["model"] == "local.gguf"


@pytest.mark.asyncio
async def test_a_server_error_is_retried_and_an_auth_error_is_not() -> None:
    replies: list[Reply] = [
        error_reply(503, "server_error", "loading model"),
        chat_completion("up"),
        error_reply(401, "auth", "bad key"),
    ]
    with FakeOpenAIServer(replies) as fake:
        llm = _llm(fake)
        try:
            ok = await llm.complete(LLMRequest(system="", messages=[Message(role="user", text="go")]))
            with pytest.raises(LLMError, match="refused the key"):
                await llm.complete(LLMRequest(system="", messages=[Message(role="user", text="go")]))
        finally:
            await llm.aclose()
    assert ok.text == "up" and len(fake.requests) == 3


@pytest.mark.asyncio
async def test_an_unreachable_endpoint_gives_up_with_a_clear_error() -> None:
    with FakeOpenAIServer() as fake:
        url = fake.base_url
    llm = make_llm(
        "openai", model="m", base_url=url, api_key="k", retry=RetryPolicy(attempts=2, base_delay=0.001)
    )
    try:
        with pytest.raises(LLMError, match=r"after 2 attempts.*APIConnectionError"):
            await llm.complete(LLMRequest(system="", messages=[Message(role="user", text="go")]))
    finally:
        await llm.aclose()


@pytest.mark.asyncio
async def test_each_call_draws_with_its_own_seed_derived_from_the_runs_and_the_temperature_is_sent() -> None:
    # A fixed seed made a sampling model answer a repeated prompt identically, so a refused exact
    # repeat came back again and again; a per-call seed keeps runs reproducible without that.
    with FakeOpenAIServer([chat_completion("a"), chat_completion("b")]) as fake:
        llm = make_llm("openai", model="m", base_url=fake.base_url, seed=7, retry=FAST, temperature=0.7)
        try:
            for _ in range(2):
                await llm.complete(LLMRequest(system="", messages=[Message(role="user", text="go")]))
        finally:
            await llm.aclose()
    bodies = fake.bodies("/chat/completions")
    assert [b["seed"] for b in bodies] == [7_000_021, 7_000_022]
    assert [b["temperature"] for b in bodies] == [0.7, 0.7]


@pytest.mark.asyncio
async def test_without_a_temperature_the_providers_default_applies() -> None:
    with FakeOpenAIServer([chat_completion("a")]) as fake:
        llm = _llm(fake)
        try:
            await llm.complete(LLMRequest(system="", messages=[Message(role="user", text="go")]))
        finally:
            await llm.aclose()
    assert "temperature" not in fake.bodies("/chat/completions")[0]


def test_a_temperature_for_a_backend_that_does_not_sample_is_refused_by_name() -> None:
    with pytest.raises(LLMError, match="openai backend only, not to scripted"):
        make_llm("scripted", temperature=0.5)


class _BusyServer(FakeOpenAIServer):
    """A one-request-at-a-time local server still generating for another client: its model list waits."""

    def route(self, method: str, path: str, body: dict[str, Any] | None) -> FakeReply:
        reply = super().route(method, path, body)
        return (
            FakeReply(reply.status, reply.body, reply.headers, delay_s=1.0) if path == "/v1/models" else reply
        )


@pytest.mark.asyncio
async def test_a_busy_endpoint_passes_the_preflight_and_names_its_model_when_it_answers(monkeypatch) -> None:
    monkeypatch.setattr(openai_backend, "PREFLIGHT_TIMEOUT_S", 0.2)
    with _BusyServer() as fake:
        named = make_llm("openai", model="m", base_url=fake.base_url, api_key="k")
        unnamed = make_llm("openai", base_url=fake.base_url, api_key="k", timeout=5.0)
        hasty = make_llm("openai", base_url=fake.base_url, api_key="k", timeout=0.5)
        try:
            await named.preflight()  # it answers, later: the run's calls wait for it
            await unnamed.preflight()  # the model list, waited for as long as a call may take
            assert unnamed.name == "openai:qwen2.5-coder"
            with pytest.raises(LLMError, match=r"cannot reach .*APITimeoutError"):
                await hasty.preflight()  # slower than --llm-timeout: nothing to go on
        finally:
            for llm in (named, unnamed, hasty):
                await llm.aclose()
