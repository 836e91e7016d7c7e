"""A code reply that changes nothing (the file resent as it is, a revert to the version it is on, an
early DONE) is answered with one concrete change to make: a setting of train.py that no version has
changed, named with a value (Qwen2.5-Coder-1.5B on digits-mlp sent `REVERT v2` on v2, then "DONE: No
idea is left", with 14 of 15 experiments left). End to end: the real server (in this process:
conftest.server_here), a task folder in code work, the real OpenAI SDK against a local fake endpoint."""

import textwrap
from pathlib import Path
from typing import Any

import pytest

from autoresearch_mcp.client.knobs import knob_hint, knobs, record
from autoresearch_mcp.client.run_cmd import run_session
from autoresearch_mcp.client.task_folder import resolve_task_folder
from conftest import run_args
from fakes import FakeOpenAIServer, chat_completion
from folder_fixture import make_folder

SCRIPT = textwrap.dedent(
    """\
    HIDDEN = 32
    LEARNING_RATE = 0.05
    BATCH = 32
    offset = 1


    def loss():
        return abs(LEARNING_RATE - 0.02) + 1 / HIDDEN + BATCH / 1000


    print(f"loss: {loss():.6f}")
    """
)


def with_rate(rate: float) -> str:
    return SCRIPT.replace("LEARNING_RATE = 0.05", f"LEARNING_RATE = {rate}")


def whole_file(line: str, source: str) -> str:
    return f"{line}\n```python\n{source}```"


def folder_args(tmp_path: Path, folder: Path, fake: FakeOpenAIServer, *extra: str) -> Any:
    """`run --task FOLDER` against the fake endpoint: 2 experiments, DONE never accepted."""
    args = run_args(
        tmp_path, "--task", str(folder), "--llm", "openai", "--base-url", fake.base_url,
        "--model", "qwen2.5-coder", "--iterations", "2", "--done-from", "1", *extra,
    )  # fmt: skip
    resolve_task_folder(args)
    return args


def last_user_text(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def test_the_settings_of_a_file_are_its_top_level_numbers_in_capitals():
    source = "A = 1\nB = -0.5\nc = 3\nD = 2 * 3\nE = True\nF: int = 4\nif True:\n    G = 5\nA = 7\n"
    assert knobs(source) == {"A": 7, "B": -0.5}
    assert knobs("def broken(:\n") == {} and knobs("print('no settings')\n") == {}


def tried(*sources: str) -> dict:
    seen: dict = {}
    for source in sources:
        record(seen, source)
    return seen


def test_the_hint_names_the_untouched_settings_in_turn_doubled_then_halved():
    changed = with_rate(0.01)
    hints = [knob_hint(changed, tried(SCRIPT, changed), n) for n in range(4)]
    assert hints == [
        "For example, set HIDDEN = 64 (it is 32; no version has changed it yet).",
        "For example, set BATCH = 64 (it is 32; no version has changed it yet).",
        "For example, set HIDDEN = 16 (it is 32; no version has changed it yet).",
        "For example, set BATCH = 16 (it is 32; no version has changed it yet).",
    ]
    # every setting changed already: any of them, with a value no version has run with
    assert (
        knob_hint("A = 0.5\n", tried("A = 1.0\n", "A = 0.5\n"), 0) == "For example, set A = 0.25 (it is 0.5)."
    )
    assert knob_hint("print('no settings')\n", {}, 0) is None


def test_a_setting_a_version_changed_and_a_revert_restored_is_not_called_untouched_nor_set_to_a_value_tried():
    """Qwen on digits-mlp (stateful seed 456) had run HIDDEN = 64, reverted to HIDDEN = 32, and was told
    "set HIDDEN = 64 (it is 32; no version has changed it yet)": both halves were false."""
    versions = [SCRIPT, SCRIPT.replace("HIDDEN = 32", "HIDDEN = 64"), SCRIPT]
    seen = tried(*versions)
    first = knob_hint(SCRIPT, seen, 0)
    assert first == "For example, set LEARNING_RATE = 0.1 (it is 0.05; no version has changed it yet)."
    # once every setting has moved, HIDDEN's next value is one no version ran with: 16, not 64
    seen = tried(*versions, with_rate(0.01), SCRIPT.replace("BATCH = 32", "BATCH = 64"))
    hints = {knob_hint(SCRIPT, seen, n) for n in range(6)}
    assert "For example, set HIDDEN = 16 (it is 32)." in hints
    assert not any("HIDDEN = 64" in h or "BATCH = 64" in h or "yet" in h for h in hints if h)


@pytest.mark.asyncio
async def test_the_stateful_agent_answers_a_reply_that_changed_nothing_with_a_setting_to_change(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    folder = make_folder(tmp_path, script=SCRIPT, extra='work = "code"\nprofile = false')
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(whole_file("Lower the learning rate.", with_rate(0.01))),
            chat_completion(whole_file("Lower the learning rate.", with_rate(0.01))),  # the same file again
            chat_completion("REVERT v2"),  # the version it is on
            chat_completion("DONE: No idea is left"),
            chat_completion(whole_file("Wider.", with_rate(0.01).replace("HIDDEN = 32", "HIDDEN = 64"))),
        )
        args = folder_args(tmp_path, folder, fake, "--code-replies", "text", "--max-failures", "5")
        result = await run_session(args, mode="stateful", seed=42)
        bodies = fake.bodies("/chat/completions")
    assert result.stop_reason == "budget" and result.experiments == 2 and result.llm_calls == 5
    assert result.refusals == {"no_change": 2, "early_done": 1}
    resent, reverted, done = (last_user_text(body) for body in bodies[2:5])
    assert "Your last reply was not used. no change: this is already train.py v2. For example" in resent
    assert "For example, set HIDDEN = 64 (it is 32; no version has changed it yet)." in resent
    assert "Your last reply was not used. train.py v2 already equals v2. For example" in reverted
    assert "For example, set BATCH = 64 (it is 32; no version has changed it yet)." in reverted
    assert "Your last reply was not used. DONE is early: 1 of 2 experiments are left." in done
    assert "For example, set HIDDEN = 16 (it is 32; no version has changed it yet)." in done


@pytest.mark.asyncio
async def test_the_strong_baseline_is_told_the_same_and_the_papers_baseline_is_not(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    folder = make_folder(tmp_path, script=SCRIPT, extra='work = "code"\nprofile = false')
    prompts = {}
    for mode in ("stateless-strong", "stateless"):
        with FakeOpenAIServer() as fake:
            fake.enqueue(
                chat_completion(whole_file("CODE:", with_rate(0.01))),
                chat_completion(whole_file("CODE:", with_rate(0.01))),  # the same file again
                chat_completion(whole_file("CODE:", with_rate(0.02))),
            )
            (tmp_path / mode).mkdir()  # the database's directory: a missing one is refused, not made
            args = folder_args(tmp_path / mode, folder, fake)
            result = await run_session(args, mode=mode, seed=42)
            prompts[mode] = last_user_text(fake.bodies("/chat/completions")[2])
        assert result.experiments == 2 and result.refusals == {"no_change": 1}
    hint = "For example, set HIDDEN = 64 (it is 32; no version has changed it yet)."
    assert (
        "Your last reply was not used: no change: this is already train.py v2" in prompts["stateless-strong"]
    )
    assert hint in prompts["stateless-strong"]
    assert "Your last reply was not used" not in prompts["stateless"] and hint not in prompts["stateless"]


@pytest.mark.asyncio
async def test_a_version_that_crashed_resent_as_it_is_is_asked_for_its_fix_not_a_setting(
    tmp_path: Path, agent_server_env: None, server_here: None
):
    folder = make_folder(tmp_path, script=SCRIPT, extra='work = "code"\nprofile = false')
    crashing = with_rate(0.01).replace("print(", "raise SystemExit('no loss')\nprint(")
    with FakeOpenAIServer() as fake:
        fake.enqueue(
            chat_completion(whole_file("Lower the learning rate.", crashing)),
            chat_completion(whole_file("Lower the learning rate.", crashing)),  # the crashed file again
            chat_completion(whole_file("Without the exit.", with_rate(0.01))),
        )
        args = folder_args(tmp_path, folder, fake, "--code-replies", "text")
        result = await run_session(args, mode="stateful", seed=42)
        resent = last_user_text(fake.bodies("/chat/completions")[2])
    assert result.experiments == 2 and result.refusals == {"no_change": 1}
    assert "no change: this is already train.py v2, which ended crash in #1" in resent
    assert "fix that, or go back to a version that ran" in resent and "For example" not in resent
