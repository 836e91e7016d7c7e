"""Sandbox entry point for hpo-covertype: run the agent's train.py against the fixed harness.

train.py imports `harness` (built here, before the candidate loads) and must define `main(params)`,
which trains a model, hands its test-set predictions to `harness.evaluate` and may record diagnostics
with `harness.log`. The test labels are not in this process: the server scores the predictions.
"""

import sys
import time
import types
from typing import Any

import numpy as np

MAX_LOG_ITEMS = 20


class Data(types.SimpleNamespace):
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    n_classes: int
    seed: int
    threads: int


def _make_harness(payload: dict[str, Any], state: dict[str, Any]) -> types.ModuleType:
    clock = time.perf_counter  # bound now, before the candidate could patch the time module

    def load_data() -> Data:
        """The fixed training split and the test features. The test labels stay with the server."""
        arrays = np.load(payload["split_path"])
        state["started"] = clock()
        return Data(
            X_train=arrays["X_train"],
            y_train=arrays["y_train"],
            X_test=arrays["X_test"],
            n_classes=int(payload["n_classes"]),
            seed=int(payload["seed"]),
            threads=int(payload["threads"]),
        )

    def evaluate(predictions: Any) -> None:
        """Hand in the predicted class (0..n_classes-1) of every test row; the server scores them."""
        labels = np.asarray(predictions)
        if labels.ndim == 2:  # probabilities: take the most likely class
            labels = labels.argmax(axis=1)
        state["predictions"] = [int(v) for v in labels.reshape(-1)]
        state["train_seconds"] = clock() - state.get("started", clock())

    def log(**values: Any) -> None:
        """Record a few diagnostics (numbers or short strings) with the experiment."""
        for key, value in values.items():
            if len(state["log"]) >= MAX_LOG_ITEMS:
                break
            state["log"][str(key)[:40]] = value if isinstance(value, int | float) else str(value)[:200]

    module = types.ModuleType("harness", "The fixed hpo-covertype harness (data split and scoring).")
    module.load_data = load_data  # type: ignore[attr-defined]
    module.evaluate = evaluate  # type: ignore[attr-defined]
    module.log = log  # type: ignore[attr-defined]
    return module


def run_training(payload: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = {"log": {}}
    sys.modules["harness"] = _make_harness(payload, state)
    namespace: dict[str, Any] = {"__name__": "train"}
    exec(compile(payload["source"], "train.py", "exec"), namespace)
    namespace["main"](dict(payload["params"]))
    if "predictions" not in state:
        raise RuntimeError("train.py finished without calling harness.evaluate(predictions)")
    return {
        "predictions": state["predictions"],
        "train_seconds": round(state["train_seconds"], 4),
        "log": state["log"],
    }
