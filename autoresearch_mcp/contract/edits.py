"""Search/replace edits of train.py, applied the one way both sides agree on."""

import difflib

# How a text reply writes an edit (aider's form, which code models are trained on), for the agent's
# prompts and the task profiles alike. A concrete example, not placeholders: a model copies the
# example's shape, and copied placeholders make edits with empty markers.
EDIT_FORM = (
    "<<<<<<< SEARCH\n    for i in range(len(items)):\n        total += items[i]\n=======\n"
    "    for item in items:\n        total += item\n>>>>>>> REPLACE"
)
EDIT_RULE = (
    "An edit copies lines from the current train.py after SEARCH and gives their new version after ======="
)
# What a code reply in text holds, as a turn's request and a refusal's restatement both name it. "Next?"
# alone drew status reports ("Done: the sorting was replaced...") instead of code; a function of a long
# file, or edits, is what a small model writes without dropping lines; shown a whole short file and
# asked for "the function", it wrote a new one.
CODE_REPLY = (
    "the new version of the function in one ```python block (one def, the same name and parameters), "
    "or SEARCH/REPLACE edits"
)
WHOLE_FILE_REPLY = "the whole new train.py in one ```python block"


class EditError(ValueError):
    """An edit whose search text does not occur exactly once; the message says how to fix it."""


def apply_edits(source: str, edits: list[tuple[str, str]]) -> str:
    """Apply (search, replace) pairs in order; each search text must occur exactly once. A search text
    found nowhere as written but, as whole lines, at exactly one place once its indentation is shifted
    by a uniform amount is applied there, its replacement indented to start where the matched lines do:
    small models often copy code flush left; the lines must
    still match exactly, relative indentation included."""
    if not edits:
        raise EditError("edits is empty; give at least one {search, replace}")
    for number, (search, replace) in enumerate(edits, start=1):
        count = source.count(search) if search else 0
        if count == 0 and search.strip():
            shifted = _apply_shifted(source, search, replace)
            if shifted is not None:
                source = shifted
                continue
        if count != 1:
            found = "is empty" if not search else ("was not found" if count == 0 else f"occurs {count} times")
            if count == 0:
                hint = "copy it exactly, spaces included, from the current train.py" + _closest(
                    source, search
                )
            else:
                hint = "include more context (a line before or after it) so that it occurs once"
            raise EditError(f"edit {number}: the search text {found}; {hint}. train.py unchanged.")
        source = source.replace(search, replace, 1)
    return source


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _apply_shifted(source: str, search: str, replace: str) -> str | None:
    """`search` matched line by line at one place with every line's indentation shifted by the same
    number of spaces; the source with that place replaced by `replace`. None where no place or more
    than one matches."""
    wanted = search.strip("\n").split("\n")
    lines = source.split("\n")
    width = len(wanted)
    places = [i for i in range(len(lines) - width + 1) if _shift(lines[i : i + width], wanted) is not None]
    if len(places) != 1:
        return None
    start = places[0]
    # The replacement keeps its own relative indentation, its outermost lines where the matched ones
    # start: the model's indentation is what failed to match, and it got the replacement's right as
    # often as not (shifting it by the search's offset doubled that).
    written = replace.strip("\n").split("\n") if replace.strip("\n") else []
    base = min((_indent(line) for line in written if line.strip()), default=0)
    at = min(_indent(line) for line in lines[start : start + width] if line.strip())
    new = [" " * at + line[base:] if line.strip() else "" for line in written]
    return "\n".join(lines[:start] + new + lines[start + width :])


def _shift(window: list[str], wanted: list[str]) -> int | None:
    """The uniform indentation shift that turns `wanted` into `window` line by line (text equal after
    the leading spaces, trailing spaces ignored; blank lines match blank ones), or None."""
    shift: int | None = None
    for have, want in zip(window, wanted, strict=True):
        if not have.strip() or not want.strip():
            if have.strip() or want.strip():
                return None
            continue
        if have.rstrip().lstrip(" ") != want.rstrip().lstrip(" "):
            return None
        delta = _indent(have) - _indent(want)
        if shift is None:
            shift = delta
        elif delta != shift:
            return None
    return shift


def _closest(source: str, search: str) -> str:
    """The line of train.py nearest to the search text's first line: small models mostly miss by
    indentation or a renamed variable, and seeing the real line is what fixes the next attempt."""
    first = next((line for line in search.splitlines() if line.strip()), "")
    if not first:
        return ""
    lines = source.splitlines()
    match = difflib.get_close_matches(first.strip(), [line.strip() for line in lines], n=1, cutoff=0.6)
    if not match:
        return ""
    line = next(line for line in lines if line.strip() == match[0])
    return f" (the nearest line there is {line[:160]!r})"


def unfence(source: str) -> str:
    """A whole file sent wrapped in one markdown code fence (```python ... ```), without the fence:
    models write files that way; the fence is formatting, not code."""
    stripped = source.strip()
    if not stripped.startswith("```") or not stripped.endswith("```") or stripped.count("```") != 2:
        return source
    return fence_body(stripped[3:-3]).strip("\n") + "\n"


def fence_body(block: str) -> str:
    """The text between a pair of ``` fences, without the language tag on the opening line."""
    first, _, rest = block.partition("\n")
    return rest if first.strip().isalnum() or not first.strip() else block
