"""The fixed part of the digits-mlp task, which the agent may not edit (it is not in `edit`): the data,
the split, the time budget and the evaluation. In the manner of karpathy/autoresearch's prepare.py.

The data is scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes): no download.
"""

import time

import numpy as np
from sklearn.datasets import load_digits

TIME_BUDGET_S = 3.0  # wall-clock seconds of training; the same for every version of train.py
SPLIT_SEED = 0


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
        self.start = time.perf_counter()

    def left(self) -> bool:
        return time.perf_counter() - self.start < TIME_BUDGET_S


def evaluate(probabilities: np.ndarray, y_val: np.ndarray) -> None:
    """Print the metric lines: val_loss (cross-entropy, what the task minimises) and val_accuracy."""
    p = np.clip(probabilities[np.arange(len(y_val)), y_val], 1e-12, 1.0)
    if probabilities.shape != (len(y_val), 10) or not np.all(np.isfinite(probabilities)):
        raise SystemExit("evaluate: expected finite probabilities of shape (n_val, 10)")
    print(f"val_accuracy: {float(np.mean(probabilities.argmax(axis=1) == y_val)):.4f}")
    print(f"val_loss: {float(-np.mean(np.log(p))):.5f}")
