"""The settings a code file sets at its top level (`HIDDEN = 32`, `LEARNING_RATE = 0.05`), and one change
of them to name to a model whose reply changed nothing.

A small model that has no idea left answers a code turn with the file it already has, a revert to the
version it is on, or an early DONE, and a request for "an idea you have not tried" gives it nothing new
to act on. Named one concrete change, as the exact-repeat hint names a param, it has something to write:
the file's own constants are changes any task's script can take, whatever it trains.
"""

import ast

from autoresearch_mcp.client.prompts import knob_text

Number = int | float


def _number(node: ast.expr) -> Number | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def knobs(source: str) -> dict[str, Number]:
    """`NAME = number` at the module's top level, NAME in capitals, in file order (the last one wins);
    empty for a file that does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    found: dict[str, Number] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, _number(node.value)
            if value is not None and name.isupper():
                found[name] = value
    return found


Tried = dict[str, set[Number]]


def record(tried: Tried, source: str) -> None:
    """Add the settings of one version the agent has seen to what the run has tried."""
    for name, value in knobs(source).items():
        tried.setdefault(name, set()).add(value)


def _steps(value: Number, up_first: bool) -> list[Number]:
    """Doubled and halved (in the order asked), then four times and a quarter: steps large enough to
    show in the metric, small enough to stay sane. 0 steps to 1 (or 0.1)."""
    if value == 0:
        return [1] if isinstance(value, int) else [0.1]
    out: list[Number] = []
    for factor in (2, 4):
        bigger = value * factor
        smaller = (
            (value // factor if value > 0 else -(-value // factor))
            if isinstance(value, int)
            else value / factor
        )
        pair = [bigger, smaller] if up_first else [smaller, bigger]
        out += [v if isinstance(v, int) else float(f"{v:.6g}") for v in pair]
    return [v for v in out if v != value and v != 0]


def knob_hint(current: str, tried: Tried, nth: int) -> str | None:
    """The `nth` suggestion (0, 1, ...): a setting of `current` that no version of the run has changed
    first (in file order), else any, set to a value no version has run with: doubled then halved on
    alternate rounds. None for a file without settings or with every nearby value tried."""
    now = knobs(current)
    if not now:
        return None
    untouched = [name for name, value in now.items() if tried.get(name, {value}) <= {value}]
    names = untouched or list(now)
    up_first = (nth // len(names)) % 2 == 0
    for k in range(len(names)):  # the nth name first; the next if all its nearby values were tried
        name = names[(nth + k) % len(names)]
        value = now[name]
        fresh = [v for v in _steps(value, up_first) if v not in tried.get(name, set())]
        if fresh:
            return knob_text(name, fresh[0], value, name in untouched)
    return None
