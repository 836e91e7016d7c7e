"""How a candidate's output is compared with the reference's: copied into plain JSON types in the fork
that made it (what crosses to the harness is data, never an object whose methods could run there), then
compared item by item.

Comparison rule (`first_difference`): same structure; dicts equal as key sets, lists element by element;
str and bool exact; numbers (int or float, never bool) equal within 1e-9, relative or absolute.
"""

import collections
import math
import sys
from typing import Any

MAX_OUTPUT_ITEMS = 200_000  # containers, scalars and string characters in one output
MAX_DEPTH = 40


class NotPlain(Exception):
    """The candidate returned something other than plain JSON types."""


# The stdlib's dict subclasses are what a faster version naturally returns; none changes what the items
# are, so each is copied as a plain dict. Checked by exact type: a train.py subclass is still refused.
DICTS = (dict, collections.defaultdict, collections.OrderedDict, collections.Counter)


def plain_copy(value: Any, *, arrays: bool = False) -> Any:
    """A fresh copy made of exactly dict, list, str, int, float, bool and None (defaultdict, OrderedDict
    and Counter become dict; with `arrays`, a numpy array becomes nested lists and a numpy scalar its
    Python number), or NotPlain."""
    budget = [MAX_OUTPUT_ITEMS]
    numpy = sys.modules.get("numpy") if arrays else None

    def copy(item: Any, path: str, depth: int) -> Any:
        kind = type(item)
        budget[0] -= 1 + (len(item) if kind is str else 0)
        if budget[0] < 0:
            raise NotPlain(f"the output is too large (over {MAX_OUTPUT_ITEMS} items and characters)")
        if depth > MAX_DEPTH:
            raise NotPlain(f"{path}: nested more than {MAX_DEPTH} levels deep")
        if kind in (str, bool) or item is None:
            return item
        if kind is int:
            if abs(item) > 2**63:
                raise NotPlain(f"{path} is an integer of {item.bit_length()} bits; at most 64 are compared")
            return item
        if kind is float:
            if not math.isfinite(item):
                raise NotPlain(f"{path} is {item!r}; numbers must be finite")
            return item
        if kind is list or (kind is tuple and arrays):
            return [copy(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(item)]
        if numpy is not None and isinstance(item, numpy.ndarray) and item.dtype.kind in "biuf":
            return copy(item.tolist(), path, depth)
        if numpy is not None and isinstance(item, numpy.generic) and item.dtype.kind in "biuf":
            return copy(item.item(), path, depth)
        if kind in DICTS:
            out = {}
            for key, x in dict.items(item):
                if type(key) is not str:
                    raise NotPlain(f"{path}: a dict key of type {type(key).__name__}; keys must be str")
                out[key] = copy(x, f"{path}[{key!r}]", depth + 1)
            return out
        raise NotPlain(f"{path} is a {kind.__name__}; return only dict, list, str, int, float, bool and None")

    return copy(value, "output", 0)


def first_difference(expected: Any, got: Any, path: str = "output") -> str | None:
    """Where `got` departs from `expected` under the comparison rule above, or None when they match."""
    if isinstance(expected, bool) or isinstance(got, bool):
        if type(got) is not type(expected) or got != expected:
            return f"{path}: expected {expected!r}, got {_short(got)}"
        return None
    if isinstance(expected, int | float) and type(got) in (int, float):
        if math.isclose(expected, got, rel_tol=1e-9, abs_tol=1e-9):
            return None
        return f"{path}: expected {expected!r}, got {got!r}"
    if type(got) is not type(expected):
        return f"{path}: expected a {type(expected).__name__}, got {_short(got)}"
    if isinstance(expected, dict):
        missing = [key for key in expected if key not in got]
        extra = [key for key in got if key not in expected]
        if missing or extra:
            return f"{path}: keys differ (missing {missing[:5]}, unexpected {extra[:5]})"
        for key, value in expected.items():
            found = first_difference(value, got[key], f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if len(got) != len(expected):
            return f"{path}: expected {len(expected)} items, got {len(got)}"
        for index, (want, have) in enumerate(zip(expected, got, strict=True)):
            found = first_difference(want, have, f"{path}[{index}]")
            if found:
                return found
        return None
    return None if got == expected else f"{path}: expected {_short(expected)}, got {_short(got)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
