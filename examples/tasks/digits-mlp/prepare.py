"""The fixed part of the digits-mlp task, which the agent may not edit (it is not in `edit`): the data,
the split, the time budget and the evaluation. In the manner of karpathy/autoresearch's prepare.py.

Fixed means its text: train.py runs in this same process and could still reach around it (patch
`evaluate` before calling it, say). What is here makes the plain routes fail or show instead: the
budget is bound at import, `evaluate` prints how long the version really trained (`train_s`), and it
ends the process, so no line train.py prints later can stand in for its val_loss (docs/tasks.md).

The data is scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes): no download.
"""

import os
import sys
import time
from collections.abc import Callable

import numpy as np
from sklearn.datasets import load_digits

TIME_BUDGET_S = 3.0  # wall-clock seconds of training; the same for every version of train.py
SPLIT_SEED = 0


def _stopwatch() -> Callable[[], float]:
    """Seconds since this call; the start is held in a closure, where train.py has no name to set."""
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def _within(budget_s: float) -> Callable[[float], bool]:
    return lambda elapsed: elapsed < budget_s


# Bound here, once: a train.py that sets prepare.TIME_BUDGET_S afterwards changes nothing.
_within_budget = _within(TIME_BUDGET_S)
_since_import = _stopwatch()


def load() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """X_train, y_train, X_val, y_val: pixels scaled to [0, 1], a fixed 30% validation split."""
    X, y = load_digits(return_X_y=True)
    X = X.astype(np.float64) / 16.0
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    cut = int(len(y) * 0.7)
    train, val = order[:cut], order[cut:]
    return X[train], y[train], X[val], y[val]


class Budget:
    """`while budget.left(): ...` trains for TIME_BUDGET_S of wall-clock time."""

    def __init__(self) -> None:
        self._elapsed = _stopwatch()

    def left(self) -> bool:
        return _within_budget(self._elapsed())


def evaluate(probabilities: np.ndarray, y_val: np.ndarray) -> None:
    """Print the metric lines, then end the process: train_s (seconds since prepare was imported, so a
    version that trains past its Budget, or without one, shows it), val_accuracy, and val_loss
    (cross-entropy, what the task minimises)."""
    if probabilities.shape != (len(y_val), 10) or not np.all(np.isfinite(probabilities)):
        raise SystemExit("evaluate: expected finite probabilities of shape (n_val, 10)")
    p = np.clip(probabilities[np.arange(len(y_val)), y_val], 1e-12, 1.0)
    print(f"train_s: {_since_import():.2f}")
    print(f"val_accuracy: {float(np.mean(probabilities.argmax(axis=1) == y_val)):.4f}")
    print(f"val_loss: {float(-np.mean(np.log(p))):.5f}")
    # The last val_loss line is the metric: ending here, past atexit, leaves it last. (A task with
    # `profile = true` must not: its profiled run writes what it measured as the script ends.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
