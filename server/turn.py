"""A run's turn: what a model reads before its next step, written once, here.

A turn is the run's summary (summary.py), on a code task the code to work on (where the time goes and
the function in focus: contract/code_focus.py), and the request that ends it. It is served as the
resource autoresearch://runs/{run_id}/turn; the bundled agent reads it each turn, a server focused on
one task (`serve --tools-for`) shows it after each experiment, and the `autoresearch` prompt for a
run ends with it.

Two profiles, named, not mixed in: `neutral` (the default, for hosts and outside agents) states facts
and gives no order; `small` is the bundled agent's words for a small local model (the summary names a
value to change, and leaves out what such a model does not use).

The code part is not the whole file: the profile (each function's share of the time, the hottest
function's slowest lines) and the source of the function in focus, which is, in this order:
- the function where the current version crashed, when it did (its failing line is in the error);
- the functions the last change touched, when the current version's output was wrong;
- the hottest function of the profile, passing over those the reader has set aside (versions of them
  were wrong or crashed over and over: a model stuck on one function never gets to the next one that
  costs time).
A small model copying a long file drops lines, and misquotes it in edits; one function of 20-50 lines,
with the lines that cost the most named, is what it can rework. The code once: a function the reader
already holds as it is now (its own reply in its window) is named, not quoted again.

The reply protocol picks the request: `tool` and `json` end with the task's own request ("Next?"),
`text` (code written in the reply) with the form of the code asked for.
"""

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from autoresearch_mcp.contract.code_focus import (
    WHOLE_FILE_HEADER,
    changed_functions,
    lines_line,
    shows_whole_file,
    time_line,
)
from autoresearch_mcp.contract.edits import CODE_REPLY, WHOLE_FILE_REPLY
from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.functions import MODULE, Function, all_functions, find_function
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.summary import LAST_EXPERIMENTS, Words

Reply = Literal["tool", "json", "text"]
PROFILES: tuple[Words, ...] = ("neutral", "small")
REPLIES: tuple[Reply, ...] = ("tool", "json", "text")

# The request of a code task answered in text (the forms of code it asks for: contract/edits.py).
TEXT_TURN = f"Next? One line on what you change, then {CODE_REPLY}."
WHOLE_FILE_TURN = f"Next? One line on what you change, then {WHOLE_FILE_REPLY}."


# A file this short is shown whole when no function can be singled out (the time is spent at module
# level, or there is no profile yet): a short script that trains in its module's loop has no function
# that stands for it, and one helper shown alone leaves the rest to guesswork.
WHOLE_FILE_LINES = 80
FAILURE_CHARS = 400  # of the failed version's error headline
_FAILED_AT = re.compile(r" at line (?P<line>\d+)(?: \((?P<name>[\w<>.:]+)\))?")


@dataclass(frozen=True)
class Failure:
    """The current version's last experiment, when it failed: its status and error headline."""

    status: str
    headline: str


def in_focus(
    source: str,
    files: list[str] | None,
    profile: Profile | None,
    failure: Failure | None,
    changed: list[str],
    skip: frozenset[str] = frozenset(),
) -> list[Function]:
    """The functions a turn shows (see the module's docstring); empty when none can be singled out."""
    if failure is not None and failure.status == "crash":
        found = _FAILED_AT.search(failure.headline)
        if found and found["name"] and (function := find_function(source, found["name"], files)):
            return [function]
    if failure is not None and failure.status == "incorrect" and changed:
        touched = [f for name in changed[:2] if (f := find_function(source, name, files)) is not None]
        if touched:
            return touched
    if profile is not None and profile.hot and profile.hot.rpartition(":")[2] != MODULE:
        for name in [profile.hot] + [f.name for f in profile.functions if f.share > 0]:
            if name.rpartition(":")[2] in skip or name.rpartition(":")[2] == MODULE:
                continue
            function = find_function(source, name, files)
            if function is not None:
                return [function]
    return []


def focus_text(
    source: str,
    files: list[str] | None,
    profile: Profile | None,
    failure: Failure | None,
    changed: list[str],
    shown: Collection[str] = (),
    skip: Collection[str] = frozenset(),
) -> str:
    """The code part of a turn: the profile's two lines, the last failure in full (the summary clips
    it), then the function(s) in focus, or the whole file when it is short and nothing stands out. A
    function named in `shown` (the reader holds it as it is now: held_functions) is named, not quoted."""
    parts = []
    functions = in_focus(source, files, profile, failure, changed, frozenset(skip))
    if profile is not None:
        hot_shown = profile.hot is None or profile.hot.rpartition(":")[2] not in skip
        parts += [time_line(profile), lines_line(profile) if hot_shown else ""]
    if failure is not None:
        parts.append(f"The current version failed ({failure.status}): {failure.headline}")
    if not functions:
        if source.count("\n") <= WHOLE_FILE_LINES or not all_functions(source, files):
            parts.append(f"{WHOLE_FILE_HEADER}\n```python\n{source.rstrip()}\n```")
        else:
            names = ", ".join(f.signature for f in all_functions(source, files))
            why = "most time is spent outside them" if profile is not None else "no profile yet"
            parts.append(f"train.py defines: {names} ({why}).")
        return "\n".join(p for p in parts if p)
    for function in functions:
        where = f"{function.file} lines {function.first_line}-{function.last_line}"
        if function.name in shown:
            parts.append(f"{function.name} ({where}): as in your reply below.")
        else:
            parts.append(f"{function.name} ({where}):\n```python\n{function.source.rstrip()}\n```")
    return "\n".join(p for p in parts if p)


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
    last: int = LAST_EXPERIMENTS,
) -> str:
    """The run's turn in `profile`'s words, ending with the request for `reply`; its summary lists the
    `last` experiments."""
    record = research.store.run(run_id)
    task = research.tasks.of_run(record)
    summary = research.runs.get_run_summary(record.id, profile, last)
    if record.status != "running":
        return summary  # a finished run: how it ended, and nothing asked
    code = None
    if task.experiment_tool == ToolName.RUN_BENCHMARK:
        code = code_view(research, record.id, shown, skip)
    request = task.agent_profile().turn
    if reply == "text" and task.experiment_tool == ToolName.RUN_BENCHMARK:
        request = WHOLE_FILE_TURN if code is not None and shows_whole_file(code) else TEXT_TURN
    return turn_text(summary, request, code)
