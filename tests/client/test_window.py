"""The stateful agent's window: bounded and made of whole turns."""

from pathlib import Path

import pytest

from autoresearch_mcp.client.connect import ToolOutcome
from autoresearch_mcp.client.llm.base import Message, ToolCall, ToolResult
from autoresearch_mcp.client.replies import says_done
from autoresearch_mcp.client.stateful_base import result_text
from autoresearch_mcp.client.window import Turn, select_window
from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.models import BestResult, Experiment, ExperimentResult


def turn(name: str, *, recorded: bool = False) -> Turn:
    call = ToolCall(id=f"id-{name}", name=name, arguments={})
    return Turn(
        assistant=Message(role="assistant", tool_calls=[call]),
        user=Message(role="user", tool_results=[ToolResult(tool_call_id=call.id, content="ok")]),
        recorded_experiment=recorded,
    )


def test_the_default_window_holds_only_the_turns_since_the_last_recorded_experiment():
    turns = [
        turn("run_experiment", recorded=True),
        turn("get_experiment_history"),
        turn("run_experiment", recorded=True),
    ]
    assert select_window(turns, None) == []
    turns.append(turn("add_note"))
    assert select_window(turns, None) == [turns[-1]]


def test_a_window_of_n_messages_keeps_whole_turns_so_no_tool_call_loses_its_result():
    turns = [turn(f"t{i}") for i in range(15)]
    window = select_window(turns, 20)
    assert window == turns[-10:]
    for t in window:
        assert {c.id for c in t.assistant.tool_calls} == {r.tool_call_id for r in t.user.tool_results}
    assert select_window(turns, 5) == turns[-2:]
    assert select_window(turns, 1) == []


def test_tool_results_reach_the_model_compactly():
    outcome = ToolOutcome(
        ok=True,
        text="",
        data=ExperimentResult(
            experiment=Experiment(
                id=4,
                run_id="r-1",
                iteration=4,
                params={"x": 1},
                artifact_version=1,
                status="crash",
                error_tail="timeout\nlong tail",
                started_at="2026-11-30T12:00:00+00:00",
            ),
            is_new_best=False,
            best=BestResult(iteration=2, metric=0.7712, params={"x": 0}, artifact_version=1),
            budget_left=11,
            run_status="running",
        ).model_dump(mode="json"),
    )
    assert result_text("run_experiment", outcome) == "#4 crash: timeout; best 0.7712 (#2); budget left 11"
    refused = ToolOutcome(ok=False, text="invalid params for toy: unknown parameter 'z'", data=None)
    assert result_text("run_experiment", refused) == refused.text


def refused(call_id: str, params: dict[str, int]) -> Turn:
    call = ToolCall(id=call_id, name="run_experiment", arguments={"params": params})
    return Turn(
        assistant=Message(role="assistant", tool_calls=[call]),
        user=Message(
            role="user",
            tool_results=[ToolResult(tool_call_id=call_id, content="exact repeat of #1", is_error=True)],
        ),
    )


def test_of_the_refused_calls_only_the_latest_shows():
    # Shown each refused call, Qwen2.5-Coder-1.5B continued them as a sequence (gamma 21, 22, 24, 25,
    # 28, 29, 31 against a bound of 20) or sent one of them again.
    first, note, again, other = (
        refused("a", {"max_depth": 6}),
        turn("add_note"),
        refused("b", {"max_depth": 6}),
        refused("c", {"max_depth": 7}),
    )
    turns = [turn("run_experiment", recorded=True), first, note, again, other]
    assert select_window(turns, None) == [note, other]
    assert select_window(turns, 20) == [turns[0], note, other]


def test_a_call_that_succeeded_is_never_dropped_for_looking_like_another():
    twice = [turn("get_experiment_history"), turn("get_experiment_history")]
    assert select_window(twice, None) == twice


def test_repeats_do_not_eat_into_a_window_of_n_messages():
    older = [turn(f"t{i}") for i in range(3)]
    repeats = [refused(f"r{i}", {"max_depth": 6}) for i in range(3)]
    window = select_window([*older, *repeats], 6)  # 3 turns
    assert window == [older[1], older[2], repeats[-1]]


def test_of_several_unparsable_calls_only_the_latest_shows():
    def broken(call_id: str, error: str) -> Turn:
        call = ToolCall(id=call_id, name="run_experiment", arguments={}, parse_error=error)
        return Turn(
            assistant=Message(role="assistant", tool_calls=[call]),
            user=Message(
                role="user", tool_results=[ToolResult(tool_call_id=call_id, content=error, is_error=True)]
            ),
        )

    first, second = broken("a", "not valid JSON: '{'"), broken("b", "not valid JSON: '[1'")
    assert select_window([first, second], None) == [second]


def test_a_refused_call_that_later_succeeded_is_shown_only_as_the_success():
    refusal = refused("a", {"max_depth": 6})
    call = ToolCall(id="b", name="run_experiment", arguments={"params": {"max_depth": 6}})
    success = Turn(
        assistant=Message(role="assistant", tool_calls=[call]),
        user=Message(role="user", tool_results=[ToolResult(tool_call_id="b", content="#3 ok 0.71")]),
    )
    assert select_window([refusal, success], None) == [success]


def test_of_the_refused_text_replies_only_the_latest_shows_and_a_used_one_always():
    def text_turn(text: str, refused: bool) -> Turn:
        return Turn(
            assistant=Message(role="assistant", text=text),
            user=Message(role="user", text="nudge" if refused else "train.py is now v3"),
            refused=refused,
        )

    same = [text_turn("Revert it, I think", refused=True) for _ in range(3)]
    other = text_turn("Another idea", refused=True)
    kept = text_turn("Revert it, I think", refused=False)  # not refused: never dropped
    turns = [same[0], other, same[1], kept, same[2]]
    assert select_window(turns, None) == [kept, same[2]]


def test_an_error_line_names_the_exception_not_only_its_introduction():
    assert error_headline("process_records raised an exception:\nKeyError: 'id'") == (
        "process_records raised an exception: KeyError: 'id'"
    )
    traceback = "failed:\nTraceback (most recent call last):\n  File 'x', line 1\nValueError: bad"
    assert error_headline(traceback) == "failed: ValueError: bad"
    assert error_headline("timeout\nlong tail") == "timeout" and error_headline("  \n") == ""


def test_both_modes_are_told_the_same_error_line_for_a_crashed_version():
    from autoresearch_mcp.client.prompts import benchmark_text
    from autoresearch_mcp.server.tasks.registry import make_task

    tail = (
        "process_records raised an exception:\nTraceback (most recent call last):\n  File x\nKeyError: 'name'"
    )
    task = make_task("codeopt-records", {}).info()
    headline, block = benchmark_text(task, "crash", {}, tail, None)
    assert headline == "crash" and block == f"CRASH: {error_headline(tail)}"
    assert block.endswith("KeyError: 'name'")


@pytest.mark.parametrize(
    ("reply", "done"),
    [
        ("DONE: no idea left", True),
        ("Done: No further changes necessary.", True),
        ("**done:** nothing left", True),
        ("I am done with the sort.\n```python\n...```", False),
        ("Done the sorting: next I replace the bubble sort", False),
    ],
)
def test_a_reply_ends_the_run_when_it_says_DONE_or_opens_with_done_in_any_case(reply: str, done: bool):
    assert says_done(reply) is done


def test_the_stateless_baseline_words_a_task_folder_by_its_own_metric_direction_and_params(tmp_path):
    from autoresearch_mcp.client.prompts import stateless_hpo
    from autoresearch_mcp.contract.models import Experiment
    from autoresearch_mcp.server.tasks.registry import make_task
    from folder_fixture import make_folder

    task = make_task("bowl", {"task_dirs": [str(make_folder(tmp_path))]}).info()
    experiments = [
        Experiment(
            id=i,
            run_id="r",
            iteration=i,
            params={"x": x},
            artifact_version=1,
            status="ok",
            metrics={"loss": loss, "steps": 3.0},
            metric=loss,
            started_at="t",
        )
        for i, (x, loss) in enumerate([(0.0, 0.5), (0.3, 0.1), (0.9, 0.7)], start=1)
    ]
    prompt = stateless_hpo(task, experiments).text
    assert "Goal: minimize loss." in prompt and "maximize" not in prompt
    assert 'e.g. {"x": 0.0, "y": 0.0}' in prompt and "n_estimators" not in prompt
    assert "Iter 2: loss=0.1000, steps=3.0000, params=" in prompt
    assert "Best so far: Iter 2 with loss=0.1000" in prompt  # the lowest, not the highest


def test_the_stateless_code_baseline_says_the_metric_is_measured_where_the_script_does_not_judge_it():
    from autoresearch_mcp.client.prompts import stateless_code
    from autoresearch_mcp.server.tasks.folder.task import folder_task_class

    examples = Path(__file__).resolve().parents[2] / "examples" / "tasks"
    timed = folder_task_class(examples / "slow-function")({}).info()
    assert timed.judged_by == "benchmark" and not timed.agent.stateless.rule
    rule = stateless_code(timed, []).text.splitlines()[1]
    assert rule.startswith(f"The {timed.metric} is timed and checked by the harness") and "prints" not in rule
