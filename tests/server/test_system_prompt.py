"""The system prompt and tool words are written once per kind of work: the built-ins, a user's folder and a
plugin read the same words, filled with their own facts, and none of them gives an order that the
neutral turn does not back."""

import json
from importlib.resources import files
from pathlib import Path

from autoresearch_mcp.contract.models import AgentProfile
from autoresearch_mcp.server.program import render_program
from autoresearch_mcp.server.system_prompt import search_space
from autoresearch_mcp.server.tasks.base import Task
from autoresearch_mcp.server.tasks.folder.task import folder_task_class
from autoresearch_mcp.server.tasks.registry import make_task
from folder_fixture import make_folder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"
# What only the small profile's turn says (client/profiles.py): a system prompt that every profile reads
# must not promise it.
SMALL_ONLY = ("change to make", "the summary names", "at least the change", "e.g. raise")


def folder(path: Path) -> Task:
    return folder_task_class(path)({})


def generic(task: Task) -> str:
    """The task's system prompt with its own facts taken out."""
    facts = task.facts()
    words = task.agent_profile().system_prompt
    words = words.replace(facts.description if facts.work == "code" else facts.about, "<TITLE>")
    if ranges := search_space(facts.params, facts.log_scaled):
        words = words.replace(ranges, "<RANGES>")
    return words.replace(facts.metric, "<METRIC>").replace(", ".join(facts.editable), "<FILES>")


def test_every_params_task_reads_the_same_words_with_its_own_title_and_ranges(tmp_path: Path) -> None:
    tasks = [
        make_task("hpo-covertype", {}),
        folder(EXAMPLES / "digits-hgb"),
        folder(make_folder(tmp_path)),
        make_task("toy-quadratic", {}),
    ]
    assert len({generic(task) for task in tasks}) == 1
    for task in tasks:
        profile = task.agent_profile()
        assert profile.system_prompt.startswith(task.facts().about.rstrip(".") + ".")
        assert profile.fixed_arguments == {"run_experiment": {"base": "best"}}


def test_every_code_task_reads_the_same_words_with_its_whole_description_and_who_judges_it() -> None:
    codeopt, slow = make_task("codeopt-records", {}), folder(EXAMPLES / "slow-function")
    assert generic(codeopt) == generic(slow)
    # The function's contract (input sizes, tolerances) is in the description, past its first sentence.
    assert "numbers within 1e-9" in codeopt.agent_profile().system_prompt
    words = slow.agent_profile()
    assert (
        "600 fresh random points" in words.system_prompt and "You may change slow.py" in words.system_prompt
    )
    assert "copies lines from the current slow.py" in (words.text_system_prompt or "")
    assert "train.py" not in words.system_prompt.replace("_train_py", "")
    for task in (codeopt, slow):
        assert "checks each output against the original's" in task.agent_profile().system_prompt


def test_no_task_is_promised_what_only_the_small_profiles_turn_gives(tmp_path: Path) -> None:
    tasks = [
        make_task("hpo-covertype", {}),
        make_task("codeopt-records", {}),
        folder(EXAMPLES / "digits-hgb"),
        folder(EXAMPLES / "slow-function"),
        folder(make_folder(tmp_path)),
    ]
    for task in tasks:
        profile = task.agent_profile()
        for words in (profile.system_prompt, profile.text_system_prompt or "", profile.how):
            assert not [said for said in SMALL_ONLY if said in words], (task.name, words)


def test_log_scales_and_choices_are_in_the_ranges(tmp_path: Path) -> None:
    digits = folder(EXAMPLES / "digits-hgb").agent_profile().system_prompt
    assert "learning_rate 0.001-1 log (0.1)" in digits
    bowl = folder(make_folder(tmp_path)).agent_profile().system_prompt
    assert "x -1-1 (0), y -1-1 (0), shape one of bowl, crash (bowl)" in bowl


def test_the_shipped_tasks_keep_only_their_baselines_words_in_agent_json() -> None:
    for name in ("hpo-covertype", "codeopt-records"):
        shipped = json.loads(
            (files("autoresearch_mcp.server.tasks") / "builtin" / name / "agent.json").read_text()
        )
        assert list(shipped) == ["stateless"]
        assert make_task(name, {}).agent_profile().stateless.model_dump() == {
            **AgentProfile(system_prompt="", tools=[], how="").stateless.model_dump(),
            **shipped["stateless"],
        }


def test_a_folders_agent_json_replaces_only_the_fields_it_gives(tmp_path: Path) -> None:
    path = make_folder(tmp_path)
    written = folder(path).agent_profile()
    (path / "agent.json").write_text(json.dumps({"turn": "Your move.", "stateless": {"intro": "Hi."}}))
    replaced = folder(path).agent_profile()
    assert replaced.turn == "Your move." and replaced.stateless.intro == "Hi."
    assert replaced.system_prompt == written.system_prompt and replaced.tools == written.tools


def test_a_script_that_prints_its_own_metric_is_not_offered_edits(tmp_path: Path) -> None:
    printed = folder(make_folder(tmp_path))  # no [evaluate]: the script's printout is the metric
    assert printed.judged_by == "script"
    assert "modify_train_py" not in printed.agent_profile().how
    assert "not edited" in render_program(printed) and "you may also edit" not in render_program(printed)
    hpo = make_task("hpo-covertype", {})  # judged by its evaluator: its train.py may change
    assert "modify_train_py" in hpo.agent_profile().how and "you may also edit" in render_program(hpo)
