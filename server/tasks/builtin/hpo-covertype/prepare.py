"""The fixed part of hpo-covertype: train.py may not change it (it is not in `edit`).

load() gives the training split and the held-out rows' features (X_train, y_train, X_test; labels 0..6,
from data/, which the server prepares); save(predictions) writes the held-out rows' predicted classes
for the evaluator, which alone holds their labels: call it last, once.
"""

import numpy as np


def load():
    try:
        arrays = np.load("data/split.npz")
    except FileNotFoundError:
        raise SystemExit(
            "this server has no Covertype data (its log says why): tell the server's operator"
        ) from None
    with arrays:
        return arrays["X_train"], arrays["y_train"], arrays["X_test"]


def save(predictions):
    labels = np.asarray(predictions)
    if labels.ndim == 2:  # probabilities: the most likely class
        labels = labels.argmax(axis=1)
    np.save("predictions.npy", labels.reshape(-1).astype(np.int64))
