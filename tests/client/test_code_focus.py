"""What a code turn shows of train.py (client/focus.py): the profile's lines and the function in focus,
not the whole file; a function the request already holds is named, not sent again. And how a python
block of some functions becomes replace_function calls (client/replies.py)."""

from pathlib import Path

from codeopt_rewrites import REFERENCE_SOURCE

from autoresearch_mcp.client.code_blocks import function_versions
from autoresearch_mcp.client.replies import read_text_reply
from autoresearch_mcp.contract.code_focus import changed_functions, held_functions, shows_whole_file
from autoresearch_mcp.contract.functions import find_function, replace_function
from autoresearch_mcp.contract.profile import FunctionTime, LineTime, Profile
from autoresearch_mcp.server.turn import WHOLE_FILE_TURN, Failure, focus_text, in_focus

SOURCE = REFERENCE_SOURCE


def _span(name: str) -> tuple[int, int]:
    function = find_function(SOURCE, name)
    assert function is not None
    return function.first_line, function.last_line


def profile_of(*shares: tuple[str, float]) -> Profile:
    functions = [
        FunctionTime(
            name=name, file="train.py", first_line=_span(name)[0], last_line=_span(name)[1], share=s, ms=1.0
        )
        for name, s in shares
    ]
    first = _span(shares[0][0])[0]
    return Profile(
        sha256="x",
        how="test",
        functions=functions,
        hot=shares[0][0],
        lines=[LineTime(line=first + 1, share=0.4, text=SOURCE.splitlines()[first].strip())],
    )


PROFILE = profile_of(("department_stats", 0.6), ("count_people", 0.3), ("copy_records", 0.1))


def test_a_turn_shows_the_time_by_function_and_the_hottest_function_not_the_whole_file() -> None:
    text = focus_text(SOURCE, None, PROFILE, None, [], [])
    assert text.startswith("Time by function: department_stats 60%, count_people 30%, copy_records 10%.")
    assert "Slowest lines of department_stats: " in text
    hot = find_function(SOURCE, "department_stats")
    assert hot is not None and hot.source.rstrip() in text
    assert f"department_stats (train.py lines {hot.first_line}-{hot.last_line}):" in text
    assert "def count_people(" not in text and "def process_records(" not in text
    assert len(text) < len(SOURCE) / 2


def test_after_a_crash_the_turn_shows_the_function_of_the_failing_line() -> None:
    crashed = Failure(
        "crash", "process_records raised an exception at line 70 (count_people): x = y[0]: IndexError"
    )
    (shown,) = in_focus(SOURCE, None, PROFILE, crashed, [])
    assert shown.name == "count_people"
    assert "The current version failed (crash): process_records raised" in focus_text(
        SOURCE, None, PROFILE, crashed, [], []
    )


def test_after_a_wrong_output_the_turn_shows_the_functions_the_last_change_touched() -> None:
    wrong = Failure("incorrect", "wrong output (the first check, ...): output['total']: expected 200, got 1")
    changed = changed_functions(
        SOURCE,
        replace_function(SOURCE, "copy_records", "def copy_records(records):\n    return records\n"),
        None,
    )
    assert changed == ["copy_records"]
    assert [f.name for f in in_focus(SOURCE, None, PROFILE, wrong, changed)] == ["copy_records"]


def test_a_function_the_window_already_holds_unchanged_is_named_not_sent_again() -> None:
    hot = find_function(SOURCE, "department_stats")
    assert hot is not None
    reply = f"Use a dict.\n```python\n{hot.source}```"
    held = held_functions(SOURCE, None, ["an earlier message", reply])
    assert held == ["department_stats"]
    text = focus_text(SOURCE, None, PROFILE, None, [], held)
    assert (
        f"department_stats (train.py lines {hot.first_line}-{hot.last_line}): as in your reply below." in text
    )
    assert "```python" not in text
    # a different version in the window does not count: the current one is sent
    edited = reply.replace("departments = []", "departments = list()")
    assert held_functions(SOURCE, None, [edited]) == []


def test_with_no_profile_a_long_file_is_named_by_its_functions_not_sent_whole() -> None:
    text = focus_text(SOURCE, None, None, None, [], [])
    assert text.startswith("train.py defines: process_records(records), copy_records(records)")
    assert text.endswith("(no profile yet).") and "```" not in text and not shows_whole_file(text)


def test_when_the_time_is_spent_at_module_level_a_short_file_is_shown_whole_and_asked_for_whole():
    """digits-mlp trains in its module's loop: naming its one helper (`forward`) left the model to
    guess at the rest, and it wrote a helper of its own. Its 53 lines are shown, and asked for whole."""
    source = (Path(__file__).parents[2] / "examples" / "tasks" / "digits-mlp" / "train.py").read_text()
    forward = find_function(source, "forward")
    assert forward is not None
    profile = Profile(
        sha256="x",
        how="test",
        functions=[
            FunctionTime(name="<module>", file="train.py", first_line=1, last_line=53, share=0.82, ms=1.0),
            FunctionTime(
                name="forward",
                file="train.py",
                first_line=forward.first_line,
                last_line=forward.last_line,
                share=0.18,
                ms=1.0,
            ),
        ],
        hot="<module>",
        lines=[LineTime(line=10, share=0.65, text="import prepare")],
    )
    text = focus_text(source, None, profile, None, [], [])
    assert text.startswith("Time by function: <module> 82%, forward 18%.")
    assert shows_whole_file(text) and source.rstrip() in text
    assert "No profile yet" not in text
    assert "the whole new train.py" in WHOLE_FILE_TURN


def test_a_python_block_of_some_functions_becomes_one_replacement_each_with_the_imports_sent_first() -> None:
    block = (
        "import heapq\n\n"
        "def rank_departments(summary):\n    return sorted(summary)\n\n"
        "def copy_records(records):\n    return [dict(r) for r in records]\n"
    )
    versions = function_versions(block, SOURCE)
    assert versions is not None and [name for name, _ in versions] == ["rank_departments", "copy_records"]
    assert versions[0][1].startswith("import heapq\n") and not versions[1][1].startswith("import")
    reply = read_text_reply(f"Sort once.\n```python\n{block}```", SOURCE, ran_well=True)
    assert reply.action == "functions" and reply.functions == versions
    # the whole file, or a def the file does not have, is not a function version
    assert function_versions(SOURCE, SOURCE) is None
    assert function_versions("def helper(x):\n    return x\n", SOURCE) is None
