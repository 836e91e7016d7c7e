"""Search/replace edits of train.py, applied the one way both sides agree on."""

import difflib


class EditError(ValueError):
    """An edit whose search text does not occur exactly once; the message says how to fix it."""


def apply_edits(source: str, edits: list[tuple[str, str]]) -> str:
    """Apply (search, replace) pairs in order; each search text must occur exactly once."""
    if not edits:
        raise EditError("edits is empty; give at least one {search, replace}")
    for number, (search, replace) in enumerate(edits, start=1):
        count = source.count(search) if search else 0
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
