"""The scripted double's view of hpo-covertype: where a sensible practitioner draws each parameter."""

from autoresearch_mcp.contract.models import ScriptedPlan

# Inside the hard bounds (the client clips to them): XGBoost's cost grows with n_estimators x depth, and
# heavy regularisation or tiny samples only waste experiments.
PRIOR: dict[str, tuple[float, float]] = {
    "n_estimators": (100, 400),
    "max_depth": (4, 12),
    "learning_rate": (0.03, 0.5),
    "subsample": (0.6, 1.0),
    "colsample_bytree": (0.5, 1.0),
    "min_child_weight": (0.0, 5.0),
    "gamma": (0.0, 1.0),
    "reg_alpha": (0.0, 1.0),
    "reg_lambda": (0.0, 5.0),
}


def plan() -> ScriptedPlan:
    return ScriptedPlan(prior=PRIOR, log_scale=["learning_rate"])
