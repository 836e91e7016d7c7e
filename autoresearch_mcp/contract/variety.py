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
    number in it: a small model sends back whatever number a hint holds (a value already tried, the
    limit named, a bound just past it). Where `at` sits on a bound, only the way left is named: told
    both ways, it steps out of range."""
    if bounds is not None and at is not None:
        if at == bounds[1]:
            return f"lower {name}"
        if at == bounds[0]:
            return f"raise {name}"
    return f"raise or lower {name}"
