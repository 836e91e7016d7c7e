"""Harness entry point for plain scripts: run a source, optionally call one of its functions.

The source runs with ordinary Python (the OS sandbox is its only boundary), in a fork of the harness
(isolate.py): whatever it does, the result the harness reports is the one value it handed back.
"""

from functools import partial
from pathlib import Path
from typing import Any

from autoresearch_mcp.sandbox.isolate import Channel, run_isolated


def run_script(payload: dict[str, Any]) -> dict[str, Any]:
    """Execute payload["source"] as a module; if payload["call"] names a function, call it with args.

    The return value is passed back as JSON when it can be, else as its repr.
    """
    code = compile(payload["source"], "candidate.py", "exec")
    done = run_isolated(partial(_run, code, payload), writable=Path.cwd(), max_messages=1)
    if done.problem is not None or len(done.messages) != 1:
        done.mirror("the script ended without a result")
    message = done.messages[0].message
    if not isinstance(message, dict) or set(message) != {"value"}:
        done.mirror("the script's process sent a malformed result")
    return message


def _run(code: Any, payload: dict[str, Any], channel: Channel) -> None:
    namespace: dict[str, Any] = {"__name__": "candidate"}
    exec(code, namespace)
    call = payload.get("call")
    value = namespace[call](*payload.get("args", [])) if call else None
    try:
        channel.send({"value": value})
    except (TypeError, ValueError):
        channel.send({"value": repr(value)})
