"""SEARCH/REPLACE edits in a text reply, in every form a small model wrote them, as modify_train_py's
(search, replace) pairs."""

import re

from autoresearch_mcp.client.code_blocks import parse_code

# Edits in the forms small models write when asked for aider's: the search lines end at a
# ======= line and start after a SEARCH line (with or without <<<<<<<) or an opening ``` fence; the
# replacement runs to >>>>>>> REPLACE, a closing fence or the end. Or SEARCH and REPLACE labels over
# fenced blocks (the SEARCH label sometimes left out), or `Search: ...` / `Replace with: ...` on one line
# each, or "Replace `...` with `...`" in prose.
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_SEARCH_LINE = re.compile(r"^[\s<*#`]*SEARCH\b[^:\n]*:?[\s*`]*$", re.IGNORECASE)  # a label alone on its line
_FENCE = re.compile(r"^\s*```")
_REPLACE_END = re.compile(r"^\s*>{5,9}|^[\s*#`]*REPLACE\W*$", re.IGNORECASE)
_LABELLED_EDIT = re.compile(
    r"(?:^[^\w\n]*SEARCH\b[^\n]*\n\s*)?```[^\n]*\n(.*?)```[^\n]*\n\s*[^\w\n]*REPLACE\b[^\n]*\n\s*```[^\n]*\n(.*?)```",
    re.DOTALL | re.MULTILINE | re.IGNORECASE,
)
_INLINE_EDIT = re.compile(
    r"^[^\w\n]*SEARCH[ \t]*:?[ \t]*(`?)([^`\n]+)\1[ \t]*\n[^\w\n]*REPLACE(?:[ \t]+WITH)?[ \t]*:?[ \t]*(`?)([^`\n]*)\3[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)
# "Replace `a` with `b`." or "Change `a` to `b`" in prose, quoted with backticks or quotes: a model that
# describes its edits instead of marking them still means them.
_PROSE_EDIT = re.compile(
    r"\b(?:replace|change)\s+(?:the\s+line\s+)?([`'\"])(.+?)\1\s+(?:with|to)\s+([`'\"])(.*?)\3", re.IGNORECASE
)


def parse_edits(text: str) -> list[tuple[str, str]] | None:
    """SEARCH/REPLACE edits in a text reply, in order, as modify_train_py's (search, replace) pairs;
    None when the reply holds none. The agent sends them as written (an empty search is refused
    before that): the server applies them or says why not."""
    edits = _divided_edits(text.split("\n"))
    if not edits:
        edits = [(a, b) for a, b in _LABELLED_EDIT.findall(text)]
    if not edits:
        edits = [(f"{a}\n", f"{b}\n") for _, a, _, b in _INLINE_EDIT.findall(text)]
    if not edits and parse_code(text) is None:  # with a whole file beside it, the prose describes it
        edits = [(a, b) for _, a, _, b in _PROSE_EDIT.findall(text)]
    return edits or None


def whole_file_edit(edits: list[tuple[str, str]]) -> str | None:
    """One edit with an empty SEARCH whose replacement holds a function: a whole new file, as aider reads
    an empty SEARCH (a reply of "SEARCH/REPLACE edits:", "=======", then the file)."""
    if len(edits) == 1 and not edits[0][0].strip() and "def " in edits[0][1]:
        return edits[0][1]
    return None


def _divided_edits(lines: list[str]) -> list[tuple[str, str]]:
    edits: list[tuple[str, str]] = []
    done = 0  # lines before this belong to an earlier edit
    for divider in range(len(lines)):
        if divider < done or not _DIVIDER.match(lines[divider]):
            continue
        start = next(
            (i for i in range(divider - 1, done - 1, -1) if _SEARCH_LINE.match(lines[i])),
            None,
        )
        if start is None:  # no SEARCH line: the search lines open with a fence
            start = next(
                (
                    i
                    for i in range(divider - 1, done - 1, -1)
                    if _FENCE.match(lines[i]) and any(line.strip() for line in lines[i + 1 : divider])
                ),
                None,
            )
        prose = start is None
        if start is None:  # prose, then the divider: an empty search (a whole file may follow)
            start = divider - 1
        end = next(
            (
                i
                for i in range(divider + 1, len(lines))
                if _REPLACE_END.match(lines[i])
                or _DIVIDER.match(lines[i])
                or (_FENCE.match(lines[i]) and any(line.strip() for line in lines[divider + 1 : i]))
            ),
            len(lines),
        )
        search, replace = (
            _unfenced("\n".join(lines[start + 1 : divider])),
            _unfenced("\n".join(lines[divider + 1 : end])),
        )
        if prose and not replace:
            continue  # a line of = signs under prose, not an edit
        edits.append((search, replace))
        done = end + 1
    return edits


def _unfenced(part: str) -> str:
    """An edit part without the ``` lines some models put around it, and without blank edge lines."""
    lines = part.split("\n")
    while lines and (lines[0].strip().startswith("```") or not lines[0].strip()):
        lines.pop(0)
    while lines and (lines[-1].strip().startswith("```") or not lines[-1].strip()):
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""
