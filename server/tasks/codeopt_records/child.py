"""Harness entry for codeopt-records: time the reference and a candidate `process_records` in the child.

The harness owns the measurement, and the candidate cannot reach what decides it:
- the timer is bound into this frame before any candidate code exists, so patching `time` changes nothing;
- the inputs are regenerated per call from seeds the parent drew (fresh every benchmark, a distinct one
  per call), so neither a cache nor a special case for a known input can pass;
- correctness is judged in the parent, against a trusted twin of the reference, on plain copies taken
  right after each call (a dict subclass or a lazy object is refused here, before it is copied);
- the reference is timed before the candidate is loaded, in the same process and the same way.
The guard (checked in the parent) and the restricted builtins below keep the candidate from introspecting
its way into this frame; the OS sandbox keeps it from everything else.
"""

import builtins
import gc
import statistics
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

from autoresearch_mcp.server.tasks.codeopt_records.records import load_reference, make_records

# The task's guard policy is built from these (server/tasks/codeopt_records.py); they live here, free of
# pydantic, because the child enforces them again at run time and should start fast.
ALLOWED_IMPORTS = frozenset(
    {"collections", "itertools", "functools", "heapq", "operator", "math", "statistics", "bisect", "re"}
    | {"decimal", "fractions", "array", "copy", "typing"}
)
# String-to-attribute helpers would undo the ban on dunder attributes; get_type_hints evaluates strings.
EXTRA_FORBIDDEN_NAMES = frozenset({"attrgetter", "methodcaller", "get_type_hints", "ForwardRef"})
# Builtins the candidate's namespace does not get: the guard's forbidden names (a test keeps the two in
# step) and the loader, which can import any built-in module.
HIDDEN_BUILTINS = frozenset(
    {"eval", "exec", "compile", "open", "__import__", "globals", "locals", "vars", "getattr", "setattr"}
    | {"delattr", "input", "breakpoint", "exit", "quit", "help", "memoryview", "__loader__", "__spec__"}
)
MAX_OUTPUT_ITEMS = 200_000  # containers, scalars and string characters in one output
MAX_DEPTH = 40
_clock = time.perf_counter  # bound at import, long before a candidate is loaded


class NotPlain(Exception):
    """The candidate returned something other than plain JSON types."""


def run_benchmark(payload: dict[str, Any]) -> dict[str, Any]:
    """Payload: source, n_records, seeds (one per call; the first call is a warm-up), baseline_seeds
    (present only when the run's baseline is still to be measured). Returns times in ms and outputs."""
    clock, make = _clock, make_records  # locals: rebinding the module attributes later has no effect
    n = int(payload["n_records"])
    seeds = [int(seed) for seed in payload["seeds"]]
    result: dict[str, Any] = {}
    if payload.get("baseline_seeds"):
        times, _ = _time_calls(load_reference(), n, [int(s) for s in payload["baseline_seeds"]], clock, make)
        result["baseline_ms"] = _median_ms(times)
    try:
        candidate = _load(payload["source"])
    except BaseException:  # whatever the candidate raises, SystemExit too, is its failure
        return {**result, "error": "load", "detail": _traceback_tail()}
    try:
        times, outputs = _time_calls(candidate, n, seeds, clock, make, keep_outputs=True)
    except NotPlain as exc:
        return {**result, "error": "type", "detail": str(exc)}
    except BaseException:
        return {**result, "error": "raised", "detail": _traceback_tail()}
    return {**result, "time_ms": _median_ms(times), "times_ms": [t * 1000 for t in times], "outputs": outputs}


def _time_calls(
    function: Callable[[Any], Any],
    n: int,
    seeds: list[int],
    clock: Callable[[], float],
    make: Callable[[int, int], list[dict[str, Any]]],
    keep_outputs: bool = False,
) -> tuple[list[float], list[Any]]:
    times, outputs = [], []
    for seed in seeds:
        records = make(n, seed)
        gc.collect()
        gc.disable()  # as timeit does: a collection triggered by earlier garbage is not this call's cost
        try:
            start = clock()
            output = function(records)
            elapsed = clock() - start
        finally:
            gc.enable()
        times.append(elapsed)
        if keep_outputs:
            outputs.append(_plain_copy(output))
        del records, output
    return times, outputs


def _median_ms(times: list[float]) -> float:
    timed = times[1:] or times  # the first call warms up caches and is not timed
    return statistics.median(timed) * 1000


def _guarded_import(
    name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
) -> types.ModuleType:
    # The guard already refused other imports; this holds even for source that never went through it.
    if level or name.split(".")[0] not in ALLOWED_IMPORTS:
        raise ImportError(f"import of {name!r} is not allowed in this sandbox")
    return builtins.__import__(name, globals, locals, fromlist, level)


def _load(source: str) -> Callable[[Any], Any]:
    safe_builtins = {key: value for key, value in vars(builtins).items() if key not in HIDDEN_BUILTINS}
    safe_builtins["__import__"] = _guarded_import
    namespace: dict[str, Any] = {"__builtins__": safe_builtins, "__name__": "candidate"}
    exec(compile(source, "train.py", "exec"), namespace)
    function = namespace.get("process_records")
    if not isinstance(function, types.FunctionType):
        raise TypeError(f"train.py must define a function process_records(records), got {type(function)}")
    return function


def _plain_copy(value: Any) -> Any:
    """A fresh copy made of exactly dict, list, str, int, float, bool and None, or NotPlain."""
    budget = [MAX_OUTPUT_ITEMS]

    def copy(item: Any, path: str, depth: int) -> Any:
        kind = type(item)
        budget[0] -= 1 + (len(item) if kind is str else 0)
        if budget[0] < 0:
            raise NotPlain(f"the output is too large (over {MAX_OUTPUT_ITEMS} items and characters)")
        if depth > MAX_DEPTH:
            raise NotPlain(f"{path}: nested more than {MAX_DEPTH} levels deep")
        if kind in (str, int, float, bool) or item is None:
            return item
        if kind is list:
            return [copy(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(item)]
        if kind is dict:
            out = {}
            for key, x in item.items():
                if type(key) is not str:
                    raise NotPlain(f"{path}: a dict key of type {type(key).__name__}; keys must be str")
                out[key] = copy(x, f"{path}[{key!r}]", depth + 1)
            return out
        raise NotPlain(f"{path} is a {kind.__name__}; return only dict, list, str, int, float, bool and None")

    return copy(value, "output", 0)


def _traceback_tail(limit: int = 1500) -> str:
    return traceback.format_exc()[-limit:]
