"""How data/digits.npz and secret/y_val.npy were made (run once, by hand; no experiment runs it):
scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes), split 70/30 with a fixed seed.
The validation labels go where only the evaluator may read them ([evaluate] reads = ["secret/"]).
"""

import numpy as np
from sklearn.datasets import load_digits

X, y = load_digits(return_X_y=True)
order = np.random.default_rng(0).permutation(len(y))
cut = int(len(y) * 0.7)
train, val = order[:cut], order[cut:]
np.savez_compressed(
    "data/digits.npz",
    X_train=X[train].astype(np.uint8),
    y_train=y[train].astype(np.uint8),
    X_val=X[val].astype(np.uint8),
)
np.save("secret/y_val.npy", y[val].astype(np.uint8))
