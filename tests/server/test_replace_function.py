"""One function taken back by the AST (contract/functions.py), the profile a code task measures, and
both through the MCP tools a model calls: replace_function, profile_train_py and run_benchmark."""

import re
from pathlib import Path

import anyio
import pytest
from codeopt_rewrites import REFERENCE_SOURCE, codeopt_folder
from mcp import Client

from autoresearch_mcp.contract import files as packing
from autoresearch_mcp.contract.edits import EditError
from autoresearch_mcp.contract.functions import find_function, functions_in, replace_function
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.profiles import failing_line

SORTED_RANKING = """import operator

def rank_departments(summary):
    return sorted(sorted(summary), key=lambda d: -summary[d]["avg_salary"])
"""


def test_replacing_one_function_keeps_every_other_line_and_adds_its_imports_at_the_top() -> None:
    new = replace_function(REFERENCE_SOURCE, "rank_departments", SORTED_RANKING)
    old_lines, new_lines = REFERENCE_SOURCE.splitlines(), new.splitlines()
    ranked = find_function(REFERENCE_SOURCE, "rank_departments")
    assert ranked is not None
    assert new_lines[0] == "import operator" and new_lines[1:3] == ["", ""]
    assert new_lines[3:] == [*old_lines[: ranked.first_line - 1], *SORTED_RANKING.splitlines()[2:]]
    assert [f.name for f in functions_in(new)] == [f.name for f in functions_in(REFERENCE_SOURCE)]
    # an import the file already has is not added twice
    assert replace_function(new, "rank_departments", SORTED_RANKING) == new


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        ("def rank_departments(summary, reverse=True):\n    return []\n", "must keep its parameters"),
        ("def rank(summary):\n    return []\n", "the function is named 'rank'"),
        ("def rank_departments(summary):\n    return []\n\ndef helper():\n    pass\n", "send one function"),
        ("x = 1\ndef rank_departments(summary):\n    return []\n", "and other statements"),
        ("def rank_departments(summary):\n    return [\n", "does not parse: line"),
    ],
)
def test_a_new_definition_that_is_not_one_def_with_the_same_name_and_parameters_is_refused(
    sent: str, why: str
) -> None:
    with pytest.raises(EditError, match=why):
        replace_function(REFERENCE_SOURCE, "rank_departments", sent)


def test_an_unknown_function_is_refused_with_the_functions_the_file_has() -> None:
    with pytest.raises(EditError) as refused:
        replace_function(REFERENCE_SOURCE, "sort_ranking", "def sort_ranking(x):\n    return x\n")
    assert "no top-level function 'sort_ranking'" in str(refused.value)
    assert "rank_departments(summary)" in str(refused.value)


def test_in_an_artifact_of_several_files_a_name_two_files_define_is_named_with_its_file() -> None:
    names = ["train.py", "util.py"]
    text = packing.pack(
        [("train.py", "def go(x):\n    return x\n"), ("util.py", "def go(x):\n    return 1\n")]
    )
    with pytest.raises(
        EditError, match=re.escape("2 files define 'go': name one of train.py:go, util.py:go")
    ):
        replace_function(text, "go", "def go(x):\n    return 2\n", names)
    changed = packing.unpack(replace_function(text, "util.py:go", "def go(x):\n    return 2\n", names), names)
    assert changed == {"train.py": "def go(x):\n    return x\n", "util.py": "def go(x):\n    return 2\n"}


def test_the_failing_line_is_the_innermost_frame_in_the_candidates_own_files() -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/harness/child.py", line 9, in run\n    function(records)\n'
        '  File "train.py", line 4, in process_records\n    stats = department_stats(data)\n'
        '  File "train.py", line 31, in department_stats\n    top[j] = best[k]\n'
        "IndexError: list index out of range\n"
    )
    assert failing_line(traceback, ("train.py",)) == "line 31 (department_stats): top[j] = best[k]"
    assert failing_line("ValueError: no frames\n", ("train.py",)) is None


@pytest.mark.asyncio
async def test_through_mcp_a_function_is_replaced_benchmarked_with_its_profile_and_profiled_for_free(
    tmp_path: Path,
) -> None:
    settings = ServerSettings(
        db_path=tmp_path / "runs.db", task_dirs=[str(codeopt_folder(tmp_path / "codeopt-records", 800, 3))]
    )
    research = Research(settings).open()
    try:
        async with Client(build_server(research), raise_exceptions=True) as client:
            started = await client.call_tool("start_run", {"task": "codeopt-records", "budget": 3})
            run_id = started.structured_content["run_id"]
            with anyio.fail_after(120):
                before = (await client.call_tool("profile_train_py", {"run_id": run_id})).structured_content
            assert (
                before["version"] == 1
                and before["profile"]["hot"] == before["profile"]["functions"][0]["name"]
            )
            wrong = await client.call_tool(
                "replace_function",
                {"name": "rank_departments", "source": "def rank_departments():\n  return []"},
            )
            assert (
                wrong.is_error
                and "must keep its parameters: rank_departments(summary)" in wrong.content[0].text
            )
            changed = await client.call_tool(
                "replace_function",
                {"name": "rank_departments", "source": SORTED_RANKING, "description": "sorted, not bubbles"},
            )
            assert not changed.is_error and changed.structured_content["version"] == 2
            with anyio.fail_after(120):
                measured = (await client.call_tool("run_benchmark", {"run_id": run_id})).structured_content
    finally:
        research.close()
    assert measured["experiment"]["status"] == "ok" and measured["experiment"]["artifact_version"] == 2
    profile = measured["profile"]
    assert profile["functions"] and {f["name"] for f in profile["functions"]} <= {
        f.name for f in functions_in(replace_function(REFERENCE_SOURCE, "rank_departments", SORTED_RANKING))
    }
    assert profile["sha256"] != before["profile"]["sha256"]  # the new version's own profile
    assert measured["budget_left"] == 2  # one benchmark recorded: the first profile cost no budget
