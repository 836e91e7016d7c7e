"""The anthropic backend: the real SDK against a local fake of POST /v1/messages."""

from pathlib import Path

import pytest

from autoresearch_mcp.client.llm import (
    LLMError,
    LLMRequest,
    Message,
    RetryPolicy,
    ToolCall,
    ToolResult,
    ToolSpec,
    anthropic_backend,
    make_llm,
)
from autoresearch_mcp.client.llm.anthropic_backend import AnthropicLLM, to_api_messages
from fakes import FakeAnthropicServer, FakeReply, Reply, anthropic_message, error_reply

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01)
TOOLS = [
    ToolSpec(
        name="run_experiment",
        description="Run one experiment.",
        input_schema={"type": "object", "properties": {"params": {"type": "object"}}, "required": ["params"]},
    ),
    ToolSpec(name="add_note", description="Keep a note.", input_schema={"type": "object", "properties": {}}),
]


def _llm(
    fake: FakeAnthropicServer,
    *,
    caching: bool = False,
    retry: RetryPolicy = FAST,
    max_tokens: int | None = None,
    timeout: float = 10.0,
) -> AnthropicLLM:
    llm = make_llm(
        "anthropic",
        model=None,
        max_tokens=max_tokens,
        base_url=fake.base_url,
        api_key="sk-test",
        prompt_caching=caching,
        retry=retry,
        timeout=timeout,
    )
    assert isinstance(llm, AnthropicLLM)
    return llm


def _history() -> list[Message]:
    calls = [
        ToolCall(id="toolu_a", name="run_experiment", arguments={"params": {"max_depth": 4}}),
        ToolCall(id="toolu_b", name="add_note", arguments={"text": "depth 4"}),
    ]
    return [
        Message(role="user", text="Summary: nothing run yet."),
        Message(role="assistant", text="Trying depth 4.", tool_calls=calls),
        Message(
            role="user",
            tool_results=[
                ToolResult(tool_call_id="toolu_a", content="macro_f1=0.71"),
                ToolResult(tool_call_id="toolu_b", content="refused", is_error=True),
            ],
        ),
    ]


@pytest.mark.asyncio
async def test_a_tool_use_turn_then_end_turn_round_trips_with_cache_breakpoints_and_grouped_results() -> None:
    first = anthropic_message(
        "Trying depth 4.",
        [("run_experiment", {"params": {"max_depth": 4}})],
        input_tokens=120,
        output_tokens=30,
        cache_creation_input_tokens=90,
    )
    second = anthropic_message("Done.", input_tokens=20, output_tokens=5, cache_read_input_tokens=90)
    with FakeAnthropicServer([first, second]) as fake:
        llm = _llm(fake, caching=True)
        try:
            r1 = await llm.complete(
                LLMRequest(system="You tune XGBoost.", tools=TOOLS, messages=_history()[:1])
            )
            r2 = await llm.complete(LLMRequest(system="You tune XGBoost.", tools=TOOLS, messages=_history()))
        finally:
            await llm.aclose()

    assert r1.stop_reason == "tool_use" and r1.text == "Trying depth 4."
    assert [(c.name, c.arguments) for c in r1.tool_calls] == [
        ("run_experiment", {"params": {"max_depth": 4}})
    ]
    assert r1.tool_calls[0].id.startswith("toolu_")
    assert r1.usage is not None and r1.usage.model_dump() == {
        "input_tokens": 120,
        "output_tokens": 30,
        "cache_creation_input_tokens": 90,
        "cache_read_input_tokens": None,
        "cached_in_input": False,  # Anthropic's input_tokens leaves the cache reads and writes out
    }
    assert r2.stop_reason == "end_turn" and r2.tool_calls == [] and r2.text == "Done."
    assert r2.usage is not None and r2.usage.cache_read_input_tokens == 90
    assert llm.name == "anthropic:claude-haiku-4-5" and r2.model == "claude-haiku-4-5" and not llm.scripted

    req = fake.requests[1]
    assert req.path == "/v1/messages" and req.headers["authorization"] == "Bearer sk-test"
    body = req.body
    assert body is not None
    assert body["model"] == "claude-haiku-4-5" and body["max_tokens"] == 1024
    assert body["system"] == [
        {"type": "text", "text": "You tune XGBoost.", "cache_control": {"type": "ephemeral"}}
    ]
    assert [t["name"] for t in body["tools"]] == ["run_experiment", "add_note"]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][0]["input_schema"] == TOOLS[0].input_schema
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "Trying depth 4."},
        {
            "type": "tool_use",
            "id": "toolu_a",
            "name": "run_experiment",
            "input": {"params": {"max_depth": 4}},
        },
        {"type": "tool_use", "id": "toolu_b", "name": "add_note", "input": {"text": "depth 4"}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "macro_f1=0.71", "is_error": False},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "refused", "is_error": True},
    ]


@pytest.mark.asyncio
async def test_without_caching_the_request_carries_no_cache_control_and_max_tokens_can_be_overridden() -> (
    None
):
    with FakeAnthropicServer([anthropic_message("ok")]) as fake:
        llm = _llm(fake, max_tokens=77)
        try:
            await llm.complete(LLMRequest(system="sys", tools=TOOLS, messages=_history()[:1], max_tokens=500))
        finally:
            await llm.aclose()
    body = fake.bodies()[0]
    assert body["system"] == "sys" and body["max_tokens"] == 77
    assert "cache_control" not in str(body)


def test_results_split_across_user_messages_are_merged_into_one_turn_ahead_of_text() -> None:
    msgs = [
        Message(role="assistant", tool_calls=[ToolCall(id="t1", name="a", arguments={})]),
        Message(role="user", tool_results=[ToolResult(tool_call_id="t1", content="one")]),
        Message(
            role="user", text="Summary now.", tool_results=[ToolResult(tool_call_id="t2", content="two")]
        ),
        Message(role="user", text=""),
    ]
    turns = to_api_messages(msgs)
    assert [t["role"] for t in turns] == ["assistant", "user"]
    assert [b["type"] for b in turns[1]["content"]] == ["tool_result", "tool_result", "text"]


@pytest.mark.asyncio
async def test_a_rate_limit_is_retried_and_then_succeeds() -> None:
    replies: list[Reply] = [
        error_reply(429, "rate_limit_error", "slow down"),
        anthropic_message("after the wait"),
    ]
    with FakeAnthropicServer(replies) as fake:
        llm = _llm(fake)
        try:
            response = await llm.complete(LLMRequest(system="s", messages=[Message(role="user", text="hi")]))
        finally:
            await llm.aclose()
    assert response.text == "after the wait"
    assert len(fake.requests) == 2


@pytest.mark.asyncio
async def test_a_timeout_is_retried() -> None:
    replies: list[Reply] = [
        FakeReply(body=anthropic_message("late"), delay_s=1.0),
        anthropic_message("on time"),
    ]
    with FakeAnthropicServer(replies) as fake:
        llm = _llm(fake, timeout=0.3)
        try:
            response = await llm.complete(LLMRequest(system="s", messages=[Message(role="user", text="hi")]))
        finally:
            await llm.aclose()
    assert response.text == "on time"


@pytest.mark.asyncio
async def test_a_rejected_key_ends_with_llm_error_and_no_retry() -> None:
    with FakeAnthropicServer([error_reply(401, "authentication_error", "invalid x-api-key")]) as fake:
        llm = _llm(fake)
        try:
            with pytest.raises(LLMError, match="ANTHROPIC_API_KEY") as info:
                await llm.complete(LLMRequest(system="s", messages=[Message(role="user", text="hi")]))
        finally:
            await llm.aclose()
    assert "--llm scripted" in str(info.value) and "invalid x-api-key" in str(info.value)
    assert len(fake.requests) == 1


@pytest.mark.asyncio
async def test_a_bad_request_is_not_retried() -> None:
    with FakeAnthropicServer([error_reply(400, "invalid_request_error", "messages: empty")]) as fake:
        llm = _llm(fake)
        try:
            with pytest.raises(LLMError, match="messages: empty"):
                await llm.complete(LLMRequest(system="s", messages=[Message(role="user", text="hi")]))
        finally:
            await llm.aclose()
    assert len(fake.requests) == 1


@pytest.mark.asyncio
async def test_overload_is_retried_then_gives_up_with_llm_error_after_the_attempts() -> None:
    overloaded = error_reply(529, "overloaded_error", "Overloaded")
    with FakeAnthropicServer([overloaded] * 4) as fake:
        llm = _llm(fake, retry=RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.01))
        try:
            with pytest.raises(LLMError, match="after 4 attempts") as info:
                await llm.complete(LLMRequest(system="s", messages=[Message(role="user", text="hi")]))
        finally:
            await llm.aclose()
    assert "529" in str(info.value)
    assert len(fake.requests) == 4


def test_without_any_key_the_error_names_the_variable_and_the_alternatives(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("API_KEY", "AUTH_TOKEN", "PROFILE", "CONFIG_DIR", "IDENTITY_TOKEN", "IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(f"ANTHROPIC_{var}", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile on disk either
    with pytest.raises(LLMError) as info:
        make_llm("anthropic", model=None, base_url="http://127.0.0.1:9", api_key=None)
    message = str(info.value)
    assert "ANTHROPIC_API_KEY" in message and "--llm scripted" in message and "--llm openai" in message


@pytest.mark.asyncio
async def test_the_preflight_asks_for_one_model_and_lets_a_run_start() -> None:
    with FakeAnthropicServer() as fake:
        llm = _llm(fake)
        try:
            await llm.preflight()
        finally:
            await llm.aclose()
    assert [(r.method, r.path) for r in fake.requests] == [("GET", "/v1/models?limit=1")]


@pytest.mark.asyncio
async def test_the_preflight_takes_an_api_without_a_model_list_as_there() -> None:
    with FakeAnthropicServer([anthropic_message("served")]) as fake:  # a proxy serving only /v1/messages
        fake.models_reply = error_reply(404, "not_found_error", "no such route")
        llm = _llm(fake)
        try:
            await llm.preflight()  # no LLMError: the run goes on to its first message
            response = await llm.complete(LLMRequest(system="s", messages=[Message(role="user", text="hi")]))
        finally:
            await llm.aclose()
    assert response.text == "served"
    # The 404 was the answer, asked once and not retried: only a refused key or no answer stops a run.
    assert [(r.method, r.path) for r in fake.requests] == [
        ("GET", "/v1/models?limit=1"),
        ("POST", "/v1/messages"),
    ]


@pytest.mark.asyncio
async def test_the_preflight_refuses_a_rejected_key_before_any_run() -> None:
    with FakeAnthropicServer() as fake:
        fake.models_reply = error_reply(401, "authentication_error", "invalid x-api-key")
        llm = _llm(fake)
        try:
            with pytest.raises(LLMError, match="refused the key") as info:
                await llm.preflight()
        finally:
            await llm.aclose()
    assert "ANTHROPIC_API_KEY" in str(info.value) and len(fake.requests) == 1


@pytest.mark.asyncio
async def test_the_preflight_gives_up_at_once_on_an_api_it_cannot_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(anthropic_backend, "PREFLIGHT_TIMEOUT_S", 0.2)
    with FakeAnthropicServer() as fake:
        fake.models_reply = FakeReply(body={}, delay_s=2.0)  # answers too late: a timeout
        llm = _llm(fake)
        try:
            with pytest.raises(LLMError, match="cannot reach the Anthropic API") as info:
                await llm.preflight()
        finally:
            await llm.aclose()
    assert "APITimeoutError" in str(info.value) and "--llm scripted" in str(info.value)
    assert len(fake.requests) == 1  # one try, no retries
