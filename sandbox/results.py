"""What a sandbox hands back, checked before anything in the server reads it; and why a run failed.

The result is plain JSON read from a pipe with a size cap. It must parse, be nested at most MAX_DEPTH
levels, hold only finite floats and integers a float can carry, and be a JSON object. Anything else is a
crash whose reason names the problem: the server never stores or compares a value it has not checked.
"""

import json
import math
import signal
import sys
from typing import Any

MAX_RESULT_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
_LARGEST = int(sys.float_info.max)


class BadResult(ValueError):
    """The sandbox's result is not a value the server accepts; the message says why."""


def _no_constants(name: str) -> Any:
    raise BadResult(f"the sandbox's result holds {name}, which is not a finite number")


def parse_result(data: bytes, overflowed: bool) -> dict[str, Any]:
    """The checked result, or BadResult."""
    if overflowed:
        raise BadResult(f"the sandbox's result is larger than {MAX_RESULT_BYTES // (1024 * 1024)} MB")
    if not data:
        raise BadResult("the sandbox wrote no result")
    try:
        value = json.loads(data, parse_constant=_no_constants)
    except RecursionError:
        raise BadResult(f"the sandbox's result is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # BadResult included
        raise (
            exc if isinstance(exc, BadResult) else BadResult("the sandbox's result is not valid JSON")
        ) from None
    check_value(value)
    if not isinstance(value, dict):
        raise BadResult("the sandbox's result is not a JSON object")
    return value


def check_value(value: Any) -> None:
    """Finite numbers, integers within float range, at most MAX_DEPTH levels (iteratively: no recursion
    for an attacker to exhaust)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadResult(f"the sandbox's result is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise BadResult(f"the sandbox's result holds {item!r}, which is not a finite number")
        elif isinstance(item, int):
            if abs(item) > _LARGEST:
                raise BadResult("the sandbox's result holds an integer too large for a float")
        elif isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        else:
            raise BadResult(f"the sandbox's result holds a {type(item).__name__}")


def crash_reason(code: int | None, tail: str, limits: Any) -> str:
    """One line: why a sandboxed process ended without a result."""
    if "MemoryError" in tail or "std::bad_alloc" in tail:
        return f"ran out of memory (limit {limits.memory_mb} MB of address space)"
    sig = None
    if code is not None and code < 0:
        sig = signal.Signals(-code)
    elif code is not None and code > 128 and code - 128 in signal.valid_signals():
        sig = signal.Signals(code - 128)  # unshare --fork reports a killed child as 128 + signal
    if sig == signal.SIGXCPU:
        return f"exceeded the CPU limit of {limits.cpu_s:g} s"
    if sig == signal.SIGXFSZ:
        return f"wrote a file larger than the limit of {limits.file_mb} MB"
    if sig is not None:
        return f"killed by signal {sig.name}"
    last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    return f"exited with code {code}: {last[:200]}" if last else f"exited with code {code}"
