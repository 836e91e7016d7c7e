"""Which parameter has been explored least, and how to name a change of it: one rule and one wording
for the server's summary and the agent's hints."""

from collections.abc import Callable
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


def change_of(
    name: str, bounds: tuple[Any, Any] | None, tried: list[Any], fmt: Callable[[Any], str] = str
) -> str:
    """`learning_rate below 0.3 (down to 0.001) or above 0.4 (up to 1)`: a change of the param that no
    value tried so far satisfies, as directions with the limit of each, never as a list of values.
    Listed ("tried so far: 0.3, 0.4"), the values were what Qwen2.5-Coder-1.5B sent: `{"learning_rate":
    0.4}`, the best's own value, three times in one run. Given the range apart ("gamma above 0 (range
    0-20)"), it sent 21; told only the range, it went past a bound it sat on (colsample_bytree 1.5).
    `fmt` writes a value as the caller writes values elsewhere."""
    numbers = sorted(v for v in tried if isinstance(v, int | float) and not isinstance(v, bool))
    if not numbers:
        return f"{name} (a value not tried yet)"
    low_tried, high_tried = numbers[0], numbers[-1]
    if bounds is None:
        return f"{name} below {fmt(low_tried)} or above {fmt(high_tried)}"
    low, high = bounds
    ways = ([f"below {fmt(low_tried)} (down to {fmt(low)})"] if low_tried > low else []) + (
        [f"above {fmt(high_tried)} (up to {fmt(high)})"] if high_tried < high else []
    )
    if not ways:  # both bounds tried: only values between the tried ones are left
        return f"{name} between {fmt(low_tried)} and {fmt(high_tried)}, a value not tried yet"
    return f"{name} {' or '.join(ways)}"
