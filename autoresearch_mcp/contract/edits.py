"""Search/replace edits of train.py, applied the one way both sides agree on."""


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
            hint = "copy it exactly from get_current_train_py" if count == 0 else "include more context"
            raise EditError(f"edit {number}: the search text {found}; {hint}. train.py unchanged.")
        source = source.replace(search, replace, 1)
    return source
