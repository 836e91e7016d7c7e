"""digits-mlp's evaluator ([evaluate] in autoresearch.toml): it decides the metric. It runs after every
process of train.py has ended, in a fresh directory holding a copy of the predictions train.py saved,
and reads the validation labels that only it may read (secret/). No version of train.py can change
this file, read the labels, or print a line that counts."""

import numpy as np

probabilities = np.load("predictions.npy")
y_val = np.load("secret/y_val.npy").astype(np.int64)
if probabilities.shape != (len(y_val), 10) or not np.all(np.isfinite(probabilities)):
    raise SystemExit(f"expected finite probabilities of shape ({len(y_val)}, 10), got {probabilities.shape}")
p = np.clip(probabilities[np.arange(len(y_val)), y_val], 1e-12, 1.0)
print(f"val_accuracy: {float(np.mean(probabilities.argmax(axis=1) == y_val)):.4f}")
print(f"val_loss: {float(-np.mean(np.log(p))):.5f}")
