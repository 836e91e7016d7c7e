"""The scripted backend on codeopt-records: it walks the rewrite catalogue, one cumulative step per call."""

import codeopt_rewrites as rewrites
import pytest

from autoresearch_mcp.client.llm import LLMRequest, Message, ToolResult, ToolSpec
from autoresearch_mcp.contract.functions import replace_function
from conftest import scripted_llm

CODE = "codeopt-records"
CODE_TOOLS = ("replace_function", "modify_train_py", "revert_train_py")


def _tool(name: str) -> ToolSpec:
    return ToolSpec(name=name, description=name, input_schema={"type": "object"})


def _stateful(text: str) -> LLMRequest:
    return LLMRequest(
        system="You optimise.",
        tools=[_tool(t) for t in CODE_TOOLS],
        messages=[Message(role="user", text=text)],
    )


@pytest.mark.asyncio
async def test_code_stateful_sends_each_catalogue_step_as_its_one_call_then_says_done() -> None:
    # The task's profile has the agent benchmark each accepted change: one tool call per reply, edits
    # with modify_train_py, a function's new version with replace_function.
    llm = scripted_llm(CODE, seed=1)
    source = rewrites.source_after(0)
    for step, rewrite in enumerate(rewrites.REWRITES, start=1):
        response = await llm.complete(_stateful("Summary"))
        (change,) = response.tool_calls
        assert change.arguments["description"] == rewrite.description
        if rewrite.function is not None:
            assert change.name == "replace_function" and change.arguments["source"] == rewrite.function
            source = replace_function(source, change.arguments["name"], change.arguments["source"])
        else:
            assert change.name == "modify_train_py"
            edits = [(e["search"], e["replace"]) for e in change.arguments["edits"]]
            assert edits == list(rewrite.edits)
            source = rewrites.apply_edits(source, edits)
        assert source == rewrites.source_after(step)
        assert response.stop_reason == "tool_use"
    for k in range(1, rewrites.VARIANTS + 1):  # then one-line equivalent variants, one edit each
        (modify,) = (await llm.complete(_stateful("Summary"))).tool_calls
        edits = [(e["search"], e["replace"]) for e in modify.arguments["edits"]]
        source = rewrites.apply_edits(source, edits)
        assert source == rewrites.source_after_variant(k)
    done = await llm.complete(_stateful("Summary"))
    assert done.tool_calls == [] and done.text.startswith("DONE") and done.stop_reason == "end_turn"


@pytest.mark.asyncio
async def test_code_stateful_resends_the_whole_source_after_a_refused_edit() -> None:
    llm = scripted_llm(CODE, seed=1)
    first = await llm.complete(_stateful("Summary"))
    refusal = [
        Message(role="assistant", tool_calls=first.tool_calls),
        Message(
            role="user",
            tool_results=[
                ToolResult(
                    tool_call_id=first.tool_calls[0].id, content="search text not found", is_error=True
                ),
            ],
        ),
    ]
    request = LLMRequest(system="s", tools=[_tool(t) for t in CODE_TOOLS], messages=refusal)
    second = await llm.complete(request)
    assert second.tool_calls[0].arguments["source"] == rewrites.source_after(2)
    assert "edits" not in second.tool_calls[0].arguments


@pytest.mark.asyncio
async def test_code_stateless_replies_with_the_complete_source_of_each_step_then_done() -> None:
    llm = scripted_llm(CODE, seed=1)
    prompt = LLMRequest(
        system="", messages=[Message(role="user", text="...\nReply with CODE: and the complete function.")]
    )
    for step in range(1, len(rewrites.REWRITES) + 1):
        response = await llm.complete(prompt)
        assert response.text == "CODE:\n" + rewrites.source_after(step) and response.tool_calls == []
    for k in range(1, rewrites.VARIANTS + 1):
        assert (await llm.complete(prompt)).text == "CODE:\n" + rewrites.source_after_variant(k)
    assert (await llm.complete(prompt)).text.startswith("DONE")


def test_after_the_catalogue_each_variant_is_one_edit_away_new_and_still_correct() -> None:
    from codeopt_rewrites import load_reference, make_records

    from autoresearch_mcp.server.tasks.outputs import first_difference

    records = make_records(1500, 11)
    expected = load_reference()(make_records(1500, 11))
    source = rewrites.source_after(len(rewrites.REWRITES))
    seen = {source}
    for k in range(1, rewrites.VARIANTS + 1):
        _, search, replace = rewrites.variant_edit(k)
        source = rewrites.apply_edits(source, [(search, replace)])
        assert source == rewrites.source_after_variant(k) and source not in seen
        seen.add(source)
        if k % 9 == 0:
            namespace: dict = {}
            exec(source, namespace)
            assert first_difference(expected, namespace["process_records"](records)) is None
