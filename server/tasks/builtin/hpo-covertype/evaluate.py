"""hpo-covertype's evaluator ([evaluate] in autoresearch.toml): it decides the metric, macro F1 on the
held-out rows, from the predictions train.py saved, after every process of train.py has ended. No
version of train.py can change this file, read the labels (secret/), or print a line that counts."""

import numpy as np

y_test = np.load("secret/y_test.npy")
predictions = np.load("predictions.npy")
if predictions.shape != y_test.shape or predictions.dtype.kind not in "iu":
    raise SystemExit(
        f"predictions.npy holds {predictions.size} {predictions.dtype} values; the held-out set has "
        f"{y_test.size} rows (predict on X_test, in order, and save the classes with prepare.save)"
    )
if predictions.size and not (predictions.min() >= 0 and predictions.max() < 7):
    raise SystemExit("predictions.npy holds labels outside 0..6")

# scikit-learn's macro averages (precision_recall_fscore_support, zero_division=0) over the classes in
# either array, in numpy alone: importing sklearn.metrics would cost each experiment a second or two.
classes = np.union1d(y_test, predictions)
tp = np.array([np.sum((y_test == c) & (predictions == c)) for c in classes], dtype=float)
predicted = np.array([np.sum(predictions == c) for c in classes], dtype=float)
actual = np.array([np.sum(y_test == c) for c in classes], dtype=float)


def ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom > 0)


print(f"precision: {ratio(tp, predicted).mean():.6f}")
print(f"recall: {ratio(tp, actual).mean():.6f}")
print(f"accuracy: {np.mean(y_test == predictions):.6f}")
print(f"macro_f1: {ratio(2 * tp, predicted + actual).mean():.6f}")
