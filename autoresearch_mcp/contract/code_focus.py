"""What a code turn shows of train.py, the parts both sides need: where the time goes (the stateless
baseline says it too), which functions changed between versions, which a reader already holds, and
whether a turn showed the whole file. The turn itself is the server's (server/turn.py)."""

from autoresearch_mcp.contract.functions import Function, all_functions
from autoresearch_mcp.contract.profile import Profile

SHOWN_SHARES = 5  # functions named in the time line, hottest first
SHOWN_LINES = 3  # the hottest function's slowest lines named
LINE_CHARS = 50
WHOLE_FILE_HEADER = "train.py (current):"


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
