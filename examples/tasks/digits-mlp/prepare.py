"""The fixed part of the digits-mlp task, which the agent may not edit (it is not in `edit`): the data,
the time budget, and how the validation probabilities reach the evaluator. In the manner of
karpathy/autoresearch's prepare.py, except that it does not score: evaluate.py does, after train.py's
process has ended, with the validation labels that no version of train.py can read (secret/).

The data is scikit-learn's handwritten digits, split once (make_data.py): no download.
"""

import time
from collections.abc import Callable

import numpy as np

TIME_BUDGET_S = 3.0  # wall-clock seconds of training; the same for every version of train.py
PREDICTIONS = "predictions.npy"  # what save() writes and the evaluator reads ([evaluate] outputs)


def _stopwatch() -> Callable[[], float]:
    """Seconds since this call; the start is held in a closure, where train.py has no name to set."""
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def _within(budget_s: float) -> Callable[[float], bool]:
    return lambda elapsed: elapsed < budget_s


# Bound here, once: a train.py that sets prepare.TIME_BUDGET_S afterwards changes nothing.
_within_budget = _within(TIME_BUDGET_S)
_since_import = _stopwatch()


def load() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X_train, y_train, X_val: pixels scaled to [0, 1]. The validation labels are the evaluator's."""
    with np.load("data/digits.npz") as data:
        return data["X_train"] / 16.0, data["y_train"].astype(np.int64), data["X_val"] / 16.0


class Budget:
    """`while budget.left(): ...` trains for TIME_BUDGET_S of wall-clock time."""

    def __init__(self) -> None:
        self._elapsed = _stopwatch()

    def left(self) -> bool:
        return _within_budget(self._elapsed())


def save(probabilities: np.ndarray) -> None:
    """Write the validation probabilities (one row of 10 per validation image) for the evaluator, and
    print train_s: seconds since prepare was imported, so a version that trains past its Budget, or
    without one, shows it (a reported value: the evaluator's val_loss is the metric)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.ndim != 2 or probabilities.shape[1] != 10:
        raise SystemExit(f"save: expected probabilities of shape (n_val, 10), got {probabilities.shape}")
    np.save(PREDICTIONS, probabilities)
    print(f"train_s: {_since_import():.2f}")
