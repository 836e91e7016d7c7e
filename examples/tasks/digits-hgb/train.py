"""Tune a gradient-boosted classifier on scikit-learn's bundled digits data (no download).

autoresearch-mcp passes the parameters as JSON in AUTORESEARCH_PARAMS; the script prints its metric
as `val_logloss: <number>` (the last such line counts) and any other `name: number` lines it likes.
Run it by hand with the defaults: python train.py
"""

import json
import os

from sklearn.datasets import load_digits
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

params = json.loads(os.environ.get("AUTORESEARCH_PARAMS", "{}"))
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))

X, y = load_digits(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)

model = HistGradientBoostingClassifier(
    learning_rate=params.get("learning_rate", 0.1),
    max_iter=params.get("max_iter", 100),
    max_leaf_nodes=params.get("max_leaf_nodes", 31),
    min_samples_leaf=params.get("min_samples_leaf", 20),
    l2_regularization=params.get("l2_regularization", 0.0),
    random_state=seed,
)
model.fit(X_train, y_train)
probabilities = model.predict_proba(X_val)
print(f"val_logloss: {log_loss(y_val, probabilities):.5f}")
print(f"val_accuracy: {accuracy_score(y_val, probabilities.argmax(axis=1)):.4f}")
