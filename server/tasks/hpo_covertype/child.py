"""Sandbox entry point for hpo-covertype: run the agent's train.py against the fixed harness.

train.py imports `harness` and must define `main(params)`, which trains a model, hands its test-set
predictions to `harness.evaluate` and may record diagnostics with `harness.log`. The test labels are not
in the sandbox: the server scores the predictions.

This process (the harness) loads the data and never runs train.py: that happens in a confined fork
(sandbox/isolate.py) whose imports are proxies (sandbox/proxies.py). The fork sends back what train.py
handed in; the harness checks it (labels in range, one per test row, finite log values) and times the
training itself, from the fork's start stamp to the arrival of its result.
"""

import ast
import importlib
import math
import sys
import types
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from autoresearch_mcp.sandbox.isolate import Channel, run_isolated, window
from autoresearch_mcp.sandbox.proxies import PROXY_PREFIX, disarm_evaluators, make_importer, safe_builtins

MAX_LOG_ITEMS = 20
MAX_REPORT_BYTES = 32 * 1024 * 1024  # predictions for a million test rows, as JSON
# What train.py may import (the task's guard allows the same names), and submodules never proxied:
# they lead to ctypes, test helpers, build tools or interpreter internals.
ALLOWED_IMPORTS = frozenset(
    {"xgboost", "sklearn", "numpy", "pandas", "scipy", "math", "statistics", "collections", "itertools"}
    | {"functools", "typing", "dataclasses"}
)
DENIED_SUBMODULES = frozenset(
    {"numpy.ctypeslib", "numpy.testing", "numpy.f2py", "numpy.distutils", "numpy.core", "numpy.lib"}
    | {"xgboost.core", "xgboost.libpath", "xgboost.collective", "xgboost.tracker", "xgboost.compat"}
    | {"sklearn.externals", "sklearn.utils", "pandas.io", "pandas.util", "pandas.testing", "pandas.compat"}
)
_LARGEST = sys.float_info.max


class Data(types.SimpleNamespace):
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    n_classes: int
    seed: int
    threads: int


def make_harness(data: Data, state: dict[str, Any]) -> types.ModuleType:
    """The `harness` module train.py imports: load_data, evaluate and log, over `state`."""

    def load_data() -> Data:
        """The fixed training split and the test features. The test labels stay with the server."""
        return data

    def evaluate(predictions: Any) -> None:
        """Hand in the predicted class (0..n_classes-1) of every test row; the server scores them."""
        labels = np.asarray(predictions)
        if labels.ndim == 2:  # probabilities: take the most likely class
            labels = labels.argmax(axis=1)
        labels = labels.reshape(-1)
        bad = labels.dtype.kind not in "iub" or (
            labels.size and not (labels.min() >= 0 and labels.max() < data.n_classes)
        )
        if bad:
            raise ValueError(
                f"harness.evaluate takes class labels 0..{data.n_classes - 1} (or probabilities)"
            )
        state["predictions"] = [int(v) for v in labels]

    def log(**values: Any) -> None:
        """Record a few diagnostics (finite numbers or short strings) with the experiment."""
        for key, value in values.items():
            if len(state["log"]) >= MAX_LOG_ITEMS:
                break
            state["log"][str(key)[:40]] = log_value(key, value)

    # Named like the proxies: a purpose-built module that holds only these three functions.
    module = types.ModuleType(
        PROXY_PREFIX + "harness", "The fixed hpo-covertype harness (split and scoring)."
    )
    module.load_data = load_data  # type: ignore[attr-defined]
    module.evaluate = evaluate  # type: ignore[attr-defined]
    module.log = log  # type: ignore[attr-defined]
    return module


def log_value(key: str, value: Any) -> float | int | str:
    """A value harness.log keeps: a finite number, or a string of at most 200 characters."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | float | np.integer | np.floating):
        number = float(value) if abs(value) <= _LARGEST else math.inf
        if not math.isfinite(number):
            raise ValueError(f"harness.log: {key} must be a finite number (got {value!r:.40})")
        return value.item() if isinstance(value, np.generic) else value
    return str(value)[:200]


def candidate_globals(harness: types.ModuleType) -> dict[str, Any]:
    """A fresh namespace for train.py: the harness, proxies of the allowed modules, restricted builtins."""
    importer = make_importer(ALLOWED_IMPORTS, denied=DENIED_SUBMODULES, provided={"harness": harness})
    return {"__builtins__": safe_builtins(importer), "__name__": "train"}


def run_training(payload: dict[str, Any]) -> dict[str, Any]:
    with np.load(payload["split_path"]) as arrays:  # read here: the fork needs no file access for it
        data = Data(
            X_train=arrays["X_train"],
            y_train=arrays["y_train"],
            X_test=arrays["X_test"],
            n_classes=int(payload["n_classes"]),
            seed=int(payload["seed"]),
            threads=int(payload["threads"]),
        )
    code = compile(payload["source"], "train.py", "exec")
    for name in imported_packages(payload["source"]):  # here, so the fork does not pay for them in its timing
        importlib.import_module(name)
    done = run_isolated(
        partial(_train, code, data, dict(payload["params"])),
        writable=Path.cwd(),
        max_messages=2,
        max_bytes=MAX_REPORT_BYTES,
    )
    if done.problem is not None or len(done.messages) != 2:
        done.mirror("train.py's process ended without handing in predictions")
    first, result = done.messages[0].message, done.messages[1].message
    ready = first.get("ready") if isinstance(first, dict) else None
    if not isinstance(ready, float) or not isinstance(result, dict):
        done.mirror("train.py's process broke the harness's protocol")
    report = {**check_report(result, data), "train_seconds": round(window(*done.messages), 4)}
    if done.cpu_s is not None:  # the CPU time of the training's processes and threads, beside it
        report["train_cpu_seconds"] = round(done.cpu_s, 4)
    return report


def imported_packages(source: str) -> list[str]:
    """The allowed packages train.py imports (xgboost for most scripts; a fresh process pays seconds
    for it, so a script that does not use it does not import it)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return sorted(names & ALLOWED_IMPORTS)


def check_report(result: dict[str, Any], data: Data) -> dict[str, Any]:
    """What the fork claims train.py handed in, checked here again: it ran candidate code."""
    predictions, log = result.get("predictions"), result.get("log")
    if not isinstance(predictions, list) or len(predictions) != len(data.X_test):
        return {"error": f"harness.evaluate must get one label per test row ({len(data.X_test)})"}
    if not all(type(v) is int and 0 <= v < data.n_classes for v in predictions):
        return {"error": f"harness.evaluate got labels outside 0..{data.n_classes - 1}"}
    if not isinstance(log, dict) or len(log) > MAX_LOG_ITEMS:
        return {"error": f"harness.log keeps at most {MAX_LOG_ITEMS} values"}
    try:
        checked = {str(k)[:40]: log_value(str(k), v) for k, v in log.items()}
    except ValueError as exc:
        return {"error": str(exc)}
    return {"predictions": predictions, "log": checked}


def _train(code: types.CodeType, data: Data, params: dict[str, Any], channel: Channel) -> None:
    state: dict[str, Any] = {"log": {}}
    namespace = candidate_globals(make_harness(data, state))
    disarm_evaluators()
    channel.ready()  # from here on, candidate code may run
    exec(code, namespace)
    namespace["main"](params)
    if "predictions" not in state:
        raise RuntimeError("train.py finished without calling harness.evaluate(predictions)")
    channel.send({"predictions": state["predictions"], "log": state["log"]})
