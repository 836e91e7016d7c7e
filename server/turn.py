"""A run's turn: what a model reads before its next step, written once, here.

A turn is the run's summary (summary.py), on a code task the code to work on (where the time goes and
the function in focus: contract/code_focus.py), and the request that ends it. It is served as the
resource autoresearch://runs/{run_id}/turn; the bundled agent reads it each turn, a server focused on
one task (`serve --tools-for`) shows it after each experiment, and the `autoresearch` prompt for a
run ends with it.

Two profiles, named, not mixed in: `neutral` (the default, for hosts and outside agents) states facts
and gives no order; `small` is the bundled agent's words for a small local model (the summary names a
value to change, and leaves out what such a model does not use).

The reply protocol picks the request: `tool` and `json` end with the task's own request ("Next?"),
`text` (code written in the reply) with the form of the code asked for.
"""

from collections.abc import Collection
from typing import Literal

from autoresearch_mcp.contract.code_focus import (
    FAILURE_CHARS,
    Failure,
    changed_functions,
    focus_text,
    shows_whole_file,
)
from autoresearch_mcp.contract.edits import CODE_REPLY, WHOLE_FILE_REPLY
from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.summary import Words

Reply = Literal["tool", "json", "text"]
PROFILES: tuple[Words, ...] = ("neutral", "small")
REPLIES: tuple[Reply, ...] = ("tool", "json", "text")

# The request of a code task answered in text (the forms of code it asks for: contract/edits.py).
TEXT_TURN = f"Next? One line on what you change, then {CODE_REPLY}."
WHOLE_FILE_TURN = f"Next? One line on what you change, then {WHOLE_FILE_REPLY}."


def turn_text(summary: str, request: str, code: str | None = None) -> str:
    """The summary, the code part (code tasks), the request: one message."""
    shown = f"\n{code.rstrip()}" if code else ""
    return f"{summary}{shown}\n{request}"


def code_view(
    research: Research, run_id: str, shown: Collection[str] = (), skip: Collection[str] = ()
) -> str:
    """Where the current train.py spends its time and the function to work on (code_focus.py): the one
    where the current version failed, the ones its last change touched when its output was wrong, else
    the hottest not in `skip`. A function in `shown` is named, not quoted: the reader holds it already."""
    store = research.store
    record = store.run(run_id)
    task = research.tasks.of_run(record)
    current = research.train_py.get_current_train_py(record.id)
    files = task.editable() or None  # one file: its own name (slow.py), not train.py
    failure = None
    last, _ = store.experiments(record.id, last=1)
    if last and last[0].artifact_version == current.version and last[0].status not in ("ok", "running"):
        headline = error_headline(last[0].error_tail or "") or last[0].status
        failure = Failure(last[0].status, headline[:FAILURE_CHARS])
    changed: list[str] = []
    if current.version > 1:
        before = store.artifacts.get(record.id, current.version - 1).source
        changed = changed_functions(before, current.source, files)
    profile = research.train_py.profile_train_py(record.id)
    return focus_text(current.source, files, profile, failure, changed, frozenset(shown), frozenset(skip))


def render_turn(
    research: Research,
    run_id: str,
    profile: Words = "neutral",
    reply: Reply = "tool",
    shown: Collection[str] = (),
    skip: Collection[str] = (),
) -> str:
    """The run's turn in `profile`'s words, ending with the request for `reply`."""
    record = research.store.run(run_id)
    task = research.tasks.of_run(record)
    summary = research.runs.get_run_summary(record.id, profile)
    if record.status != "running":
        return summary  # a finished run: how it ended, and nothing asked
    code = None
    if task.experiment_tool == ToolName.RUN_BENCHMARK:
        code = code_view(research, record.id, shown, skip)
    request = task.agent_profile().turn
    if reply == "text" and task.experiment_tool == ToolName.RUN_BENCHMARK:
        request = WHOLE_FILE_TURN if code is not None and shows_whole_file(code) else TEXT_TURN
    return turn_text(summary, request, code)
