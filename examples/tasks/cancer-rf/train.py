"""Tune a random forest on scikit-learn's bundled breast cancer data (no download): three params.

autoresearch-mcp passes the parameters as JSON in AUTORESEARCH_PARAMS; the script prints its metric
as `val_logloss: <number>` (the last such line counts) and its accuracy beside it.
Run it by hand with the defaults: python train.py
"""

import json
import os

from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split

params = json.loads(os.environ.get("AUTORESEARCH_PARAMS", "{}"))
seed = int(os.environ.get("AUTORESEARCH_SEED", "0"))

X, y = load_breast_cancer(return_X_y=True)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)

model = RandomForestClassifier(
    n_estimators=params.get("n_estimators", 100),
    max_depth=params.get("max_depth", 8),
    max_features=params.get("max_features", 0.2),
    random_state=seed,
    n_jobs=1,
)
model.fit(X_train, y_train)
probabilities = model.predict_proba(X_val)
print(f"val_logloss: {log_loss(y_val, probabilities):.5f}")
print(f"val_accuracy: {accuracy_score(y_val, probabilities.argmax(axis=1)):.4f}")
