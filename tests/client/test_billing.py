"""What a provider would bill: each provider's published cache rules applied alike to both modes."""

from typing import Any

import pytest

from autoresearch_mcp.client.billing import Calls, blocks, run_cost, token_ids
from autoresearch_mcp.client.llm.base import LLMRequest, Message, ToolSpec
from autoresearch_mcp.client.meter import count
from autoresearch_mcp.client.prices import prices

LINE = "Iter {i}: F1=0.7{i:03d} n_estimators={i} max_depth=8 learning_rate=0.1 subsample=0.8\n"
HEAD = "You are optimizing hyperparameters. Search space: ...\nExperiment history:\n"


def stateless_request(
    rows: int, tail: str = "Best so far: Iter 1\nPropose the next configuration as JSON."
) -> LLMRequest:
    """A prompt shaped like the baseline's: a head, one line per experiment, a tail that changes, with
    cache points after the head and after the previous call's and this call's history."""
    history = "".join(LINE.format(i=i) for i in range(1, rows + 1))
    previous = "".join(LINE.format(i=i) for i in range(1, rows))
    text = HEAD + history + tail
    points = sorted({len(HEAD), len(HEAD + previous), len(HEAD + history)})
    return LLMRequest(system="", messages=[Message(role="user", text=text, cache_points=points)])


def record(request: LLMRequest, second: int, output: int = 20) -> dict[str, Any]:
    return {
        "ts": f"2026-12-02T10:{second // 60:02d}:{second % 60:02d}+00:00",
        "latency_s": 0.0,
        "request": request.model_dump(mode="json"),
        "tokens": {"output": output},
    }


def test_the_rules_and_prices_carry_their_source_and_date_and_the_published_minimums():
    table = prices()
    assert table.models["claude-haiku-4-5"].min_cacheable_tokens == 4096
    assert table.models["claude-sonnet-4-5"].min_cacheable_tokens == 1024
    assert (table.openai.min_tokens, table.openai.step_tokens) == (1024, 128)
    assert (table.anthropic.cache_write, table.anthropic.cache_read, table.anthropic.ttl_s) == (
        1.25,
        0.1,
        300,
    )
    for entry in (table.anthropic, table.openai, *table.models.values()):
        assert entry.source.startswith("https://") and entry.checked == "2026-12-02" and entry.verified


def test_the_blocks_add_up_to_the_meters_count_and_end_at_the_cache_points():
    request = stateless_request(30)
    parts = blocks(request, "anthropic")
    assert sum(b.tokens for b in parts) == count(request.messages[0].text)
    assert [b.breakpoint for b in parts] == [True, True, True, False]
    # Two calls that share a history share the keys of every block up to where they differ.
    again = blocks(stateless_request(31), "anthropic")
    assert again[0].key == parts[0].key and again[1].key == parts[2].key


def test_anthropic_caches_nothing_below_the_models_minimum_and_reads_what_it_wrote_above_it():
    table = prices()
    haiku, sonnet = table.models["claude-haiku-4-5"], table.models["claude-sonnet-4-5"]
    rows = [40, 41, 42]  # about 1,300 to 1,400 tokens: above Sonnet's 1,024, below Haiku's 4,096
    calls = Calls([record(stateless_request(n), second=10 * i) for i, n in enumerate(rows)])
    assert all(b.cache_read == b.cache_write == 0 for b in calls.bills(haiku, table))
    first, second, third = calls.bills(sonnet, table)
    assert first.cache_read == 0 and first.cache_write > 1024
    # The second call reads the first one's history from the cache and writes only its new line.
    assert second.cache_read == first.cache_write and 0 < second.cache_write < 40
    assert third.cache_read == second.cache_read + second.cache_write
    # The tail after the last cache point is plain input every time.
    assert second.uncached == count("Best so far: Iter 1\nPropose the next configuration as JSON.")


def test_an_anthropic_entry_is_gone_five_minutes_after_its_last_use():
    table = prices()
    sonnet = table.models["claude-sonnet-4-5"]
    calls = Calls([record(stateless_request(40), 0), record(stateless_request(41), 301)])
    _, late = calls.bills(sonnet, table)
    assert late.cache_read == 0 and late.cache_write > 1024


def test_openai_reads_a_shared_prefix_from_1024_tokens_in_steps_of_128_and_writes_for_free():
    table = prices()
    gpt = table.models["gpt-4.1"]
    calls = Calls([record(stateless_request(n), second=i) for i, n in enumerate([40, 41])])
    first, second = calls.bills(gpt, table)
    assert first.cache_read == 0 and first.cache_write == 0
    shared = count(HEAD + "".join(LINE.format(i=i) for i in range(1, 41)))
    assert second.cache_read == 1024 + (shared - 1024) // 128 * 128 and second.cache_write == 0
    short = Calls([record(stateless_request(n), second=i) for i, n in enumerate([10, 11])])
    assert [b.cache_read for b in short.bills(gpt, table)] == [0, 0]  # under 1,024 tokens


def test_a_stateful_fixed_prefix_below_the_minimum_is_billed_as_plain_input_on_every_model():
    tool = ToolSpec(name="run_experiment", description="Train.", input_schema={"type": "object"})
    request = LLMRequest(
        system="You tune XGBoost.", tools=[tool], messages=[Message(role="user", text="Next?")]
    )
    cost = run_cost([record(request, second=i, output=10) for i in range(3)])
    for name, model in prices().models.items():
        bill = cost[name]
        assert bill["cache_read"] == bill["cache_write"] == 0 and bill["output"] == 30
        assert bill["usd"] == pytest.approx(
            (bill["uncached"] * model.input + 30 * model.output) / 1e6, abs=1e-6
        )


def test_on_anthropic_a_request_that_offers_tools_also_pays_the_apis_tool_use_system_prompt():
    tool = ToolSpec(name="run_experiment", description="Train.", input_schema={"type": "object"})
    message = [Message(role="user", text="Next?")]
    with_tools = LLMRequest(system="You tune XGBoost.", tools=[tool], messages=message)
    without = LLMRequest(system="You tune XGBoost. Reply with JSON.", messages=message)

    def uncached(request: LLMRequest) -> dict[str, int]:
        return {name: bill["uncached"] for name, bill in run_cost([record(request, second=0)]).items()}

    for name, model in prices().models.items():
        if model.provider == "anthropic":
            assert model.tool_use_system_tokens == 346
            held = sum(b.tokens for b in blocks(with_tools, "anthropic"))  # system, tools, message
            assert uncached(with_tools)[name] == held + 346
            assert uncached(without)[name] == sum(b.tokens for b in blocks(without, "anthropic"))
        else:  # OpenAI adds nothing a request does not hold
            assert model.tool_use_system_tokens == 0
            assert uncached(with_tools)[name] == len(token_ids(with_tools))
