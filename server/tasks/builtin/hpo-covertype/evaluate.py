"""hpo-covertype's evaluator ([evaluate] in autoresearch.toml): it decides the metric, macro F1 on the
held-out rows, from the predictions train.py saved, after every process of train.py has ended. No
version of train.py can change this file, read the labels (secret/), or print a line that counts."""

import numpy as np
from sklearn.metrics import accuracy_score, precision_recall_fscore_support

y_test = np.load("secret/y_test.npy")
predictions = np.load("predictions.npy")
if predictions.shape != y_test.shape or predictions.dtype.kind not in "iu":
    raise SystemExit(
        f"predictions.npy holds {predictions.size} {predictions.dtype} values; the held-out set has "
        f"{y_test.size} rows (predict on X_test, in order, and save the classes with prepare.save)"
    )
if predictions.size and not (predictions.min() >= 0 and predictions.max() < 7):
    raise SystemExit("predictions.npy holds labels outside 0..6")
precision, recall, f1, _ = precision_recall_fscore_support(
    y_test, predictions, average="macro", zero_division=0
)
print(f"precision: {precision:.6f}")
print(f"recall: {recall:.6f}")
print(f"accuracy: {accuracy_score(y_test, predictions):.6f}")
print(f"macro_f1: {f1:.6f}")
