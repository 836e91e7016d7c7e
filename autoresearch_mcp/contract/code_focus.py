"""What a code turn shows the model of train.py (our agent, and a server focused on one task): where the time goes, and the function to work on.

Not the whole file: the profile (each function's share of the time, the hottest function's slowest
lines) and the source of the function in focus, which is, in this order:
- the function where the current version crashed, when it did (its failing line is in the error);
- the functions the last change touched, when the current version's output was wrong;
- the hottest function of the profile, passing over those the agent has set aside (versions of them
  were wrong or crashed over and over: a model stuck on one function never gets to the next one that
  costs time).
A small model copying a long file drops lines, and misquotes it in edits; one function of 20-50 lines,
with the lines that cost the most named, is what it can rework.

The code once: a function the request already holds as it is now (the model's own reply in the window,
a version that failed and is kept there with its error) is named, not shown again.
"""

import re
from collections.abc import Collection
from dataclasses import dataclass

from autoresearch_mcp.contract.functions import MODULE, Function, all_functions, find_function
from autoresearch_mcp.contract.profile import Profile

SHOWN_SHARES = 5  # functions named in the time line, hottest first
SHOWN_LINES = 3  # the hottest function's slowest lines named
LINE_CHARS = 50
# A file this short is shown whole when no function can be singled out (the time is spent at module
# level, or there is no profile yet): a short script that trains in its module's loop has no function
# that stands for it, and one helper shown alone leaves the rest to guesswork.
WHOLE_FILE_LINES = 80
FAILURE_CHARS = 400  # of the failed version's error headline
WHOLE_FILE_HEADER = "train.py (current):"
_FAILED_AT = re.compile(r" at line (?P<line>\d+)(?: \((?P<name>[\w<>.:]+)\))?")


@dataclass(frozen=True)
class Failure:
    """The current version's last experiment, when it failed: its status and error headline."""

    status: str
    headline: str


def time_line(profile: Profile) -> str:
    """`Time by function: department_stats 48%, count_people 31%, copy_records 19%.`"""
    shown = [f"{f.name} {f.share:.0%}" for f in profile.functions[:SHOWN_SHARES] if f.share >= 0.005]
    rest = len(profile.functions) - len(shown)
    largest = profile.functions[len(shown)].share if rest > 0 else 0.0
    more = f", {rest} more, each under {int(largest * 100) + 1}%" if rest > 0 and shown else ""
    return f"Time by function: {', '.join(shown)}{more}."


def lines_line(profile: Profile) -> str:
    """`Slowest lines of department_stats: 69 `for j in ...` 22%; 72 `if a[...]` 15%.`"""
    if not profile.hot or not profile.lines:
        return ""
    parts = []
    for line in profile.lines[:SHOWN_LINES]:
        text = line.text if len(line.text) <= LINE_CHARS else line.text[: LINE_CHARS - 1] + "…"
        parts.append(f"{line.line} `{text}` {line.share:.0%}")
    return f"Slowest lines of {profile.hot}: {'; '.join(parts)}."


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


def changed_functions(before: str, after: str, files: list[str] | None) -> list[str]:
    """The top-level functions whose text differs between two versions of the artifact."""
    old = {(f.file, f.name): f.source for f in all_functions(before, files)}
    return [f.name for f in all_functions(after, files) if old.get((f.file, f.name)) != f.source]


def held_in(function: Function, texts: list[str]) -> bool:
    """Whether one of the request's messages already holds the function exactly as it is now."""
    body = _normal(function.source)
    return any(body in _normal(text) for text in texts if text)


def held_functions(source: str, files: list[str] | None, texts: list[str]) -> list[str]:
    """The functions of `source` that `texts` (a reader's own messages) already hold as they are now:
    what a turn names rather than quotes (the `shown` of the turn resource)."""
    return [function.name for function in all_functions(source, files) if held_in(function, texts)]


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def shows_whole_file(focus: str) -> bool:
    """Whether a turn's code part (focus_text's) holds the whole train.py rather than some functions."""
    return f"{WHOLE_FILE_HEADER}\n```python" in focus


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
