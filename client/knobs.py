"""The settings a code file sets at its top level (`HIDDEN = 32`, `LEARNING_RATE = 0.05`), and one change
of them to name to a model whose reply changed nothing.

A small model that has no idea left answers a code turn with the file it already has, a revert to the
version it is on, or DONE (Qwen2.5-Coder-1.5B on digits-mlp: `REVERT v2` on v2 twice, then "DONE: No
idea is left", with 14 of 15 experiments left). Asked again for "an idea you have not tried", it does
the same. Named one concrete change, as the exact-repeat hint names a param, it writes the code for it:
the file's own constants are changes any task's script can take, whatever it trains.
"""

import ast

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


def _changed(value: Number, up: bool) -> Number:
    """Double it or halve it: a step large enough to show in the metric, small enough to stay sane."""
    if isinstance(value, int):
        return value * 2 if up else max(1, value // 2) if value > 0 else value // 2
    return float(f"{value * 2 if up else value / 2:.6g}")


def knob_hint(current: str, original: str, nth: int) -> str | None:
    """The `nth` suggestion (0, 1, ...): a setting of `current` that no version changed from `original`
    first, in file order, doubled then halved on later rounds; None for a file without settings."""
    now = knobs(current)
    if not now:
        return None
    before = knobs(original)
    untouched = [name for name, value in now.items() if before.get(name) == value]
    names = untouched or list(now)
    name = names[nth % len(names)]
    value = now[name]
    new = _changed(value, up=(nth // len(names)) % 2 == 0)
    if new == value:  # 0 doubles to 0
        new = 1 if isinstance(value, int) else 0.1
    why = "; no version has changed it yet" if name in untouched else ""
    return f"For example, set {name} = {new} (it is {value}{why})."
