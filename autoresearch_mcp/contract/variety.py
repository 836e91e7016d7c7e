"""Which parameter has been explored least, and how to name a change of it: one rule and one wording
for the server's summary and the agent's hints."""

from typing import Any


def least_varied_first(distinct: dict[str, int]) -> list[str]:
    """Param names by how many distinct values each took so far, fewest first; ties keep the given
    (schema) order. A small model that copies the best configuration needs a name to change: the least
    varied one is where an untried change is most likely."""
    order = list(distinct)
    return sorted(order, key=lambda name: (distinct[name], order.index(name)))


def bounds_of(schema: dict[str, Any], name: str) -> tuple[Any, Any] | None:
    """A param's (minimum, maximum) from a params JSON schema, or None where it has no both."""
    prop = schema.get("properties", {}).get(name, {})
    low, high = prop.get("minimum"), prop.get("maximum")
    return None if low is None or high is None else (low, high)


def change_of(name: str, bounds: tuple[Any, Any] | None, at: Any) -> str:
    """`raise or lower learning_rate`: a change of the param from its value `at` in the best, with no
    number in it. Every number a hint held, Qwen2.5-Coder-1.5B sent back: listed tried values (the
    best's own among them, `{"learning_rate": 0.4}` three times in one run), the limits of each
    direction (max_depth 1, subsample 0.1, reg_alpha 100, each "down to" or "up to"), or a bound just
    past it ("gamma above 0 (range 0-20)": 21). Where `at` sits on a bound, only the way left is named:
    told "tried so far: 1" for colsample_bytree, it sent 1.2 and 1.5."""
    if bounds is not None and at is not None:
        if at == bounds[1]:
            return f"lower {name}"
        if at == bounds[0]:
            return f"raise {name}"
    return f"raise or lower {name}"
