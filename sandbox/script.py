"""Harness entry point for plain scripts: run a source, optionally call one of its functions."""

import json
from typing import Any


def run_script(payload: dict[str, Any]) -> dict[str, Any]:
    """Execute payload["source"] as a module; if payload["call"] names a function, call it with args.

    The return value is passed back as JSON when it can be, else as its repr.
    """
    namespace: dict[str, Any] = {"__name__": "candidate"}
    exec(compile(payload["source"], "candidate.py", "exec"), namespace)
    call = payload.get("call")
    if not call:
        return {"value": None}
    value = namespace[call](*payload.get("args", []))
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        value = repr(value)
    return {"value": value}
