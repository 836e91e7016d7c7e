"""hpo-covertype training script: the one file the agent may change.

prepare.load() gives X_train, y_train, X_test (labels 0..6); prepare.save(predictions) hands in the
held-out predictions, which the evaluator scores (macro F1). The parameters come as JSON in
AUTORESEARCH_PARAMS; change the model setup or feature engineering freely.
"""

import json
import os

import prepare
import xgboost as xgb

params = json.loads(os.environ.get("AUTORESEARCH_PARAMS", "{}"))
X_train, y_train, X_test = prepare.load()
model = xgb.XGBClassifier(
    objective="multi:softprob",
    tree_method="hist",
    n_jobs=int(os.environ.get("OMP_NUM_THREADS", "1")),
    random_state=int(os.environ.get("AUTORESEARCH_SEED", "0")),
    **params,
)
model.fit(X_train, y_train)
prepare.save(model.predict(X_test))
