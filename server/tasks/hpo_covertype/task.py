"""hpo-covertype: tune XGBoost on Covertype (the paper's Task 1).

Fixed harness: the data split (data.py) and the scoring (macro F1 on the held-out 20%, computed
here from the predictions the sandboxed train.py hands in). Mutable artifact: train.py.
"""

import logging
import os
import textwrap
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, TypeAdapter, ValidationError

from autoresearch_mcp.contract.env import ENV_COVTYPE, ENV_HPO_THREADS, ENV_HPO_WALL_S
from autoresearch_mcp.contract.errors import ResearchError, UnavailableError
from autoresearch_mcp.contract.models import AgentProfile, ScriptedPlan
from autoresearch_mcp.sandbox.guard import GuardPolicy, check_source
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task, TaskSettings, sandbox_failure
from autoresearch_mcp.server.tasks.hpo_covertype import scripted
from autoresearch_mcp.server.tasks.hpo_covertype.child import ALLOWED_IMPORTS, MAX_LOG_ITEMS
from autoresearch_mcp.server.tasks.hpo_covertype.data import N_CLASSES, Split, prepare_split
from autoresearch_mcp.server.tasks.hpo_covertype.profile import profile
from autoresearch_mcp.server.tasks.registry import register
from autoresearch_mcp.server.text import scrub_paths

ENTRY = "autoresearch_mcp.server.tasks.hpo_covertype.child:run_training"
log = logging.getLogger(__name__)


class HPOParams(BaseModel):
    """XGBoost hyperparameters. Omitted ones take their default."""

    model_config = ConfigDict(extra="forbid")

    n_estimators: int = Field(default=100, ge=10, le=1000, description="boosting rounds")
    max_depth: int = Field(default=6, ge=1, le=15, description="tree depth")
    learning_rate: float = Field(default=0.3, ge=0.001, le=1.0, description="shrinkage (eta)")
    subsample: float = Field(default=1.0, ge=0.1, le=1.0, description="row fraction per tree")
    colsample_bytree: float = Field(default=1.0, ge=0.1, le=1.0, description="column fraction per tree")
    min_child_weight: float = Field(default=1.0, ge=0.0, le=100.0, description="min hessian in a leaf")
    gamma: float = Field(default=0.0, ge=0.0, le=20.0, description="min loss reduction to split")
    reg_alpha: float = Field(default=0.0, ge=0.0, le=100.0, description="L1 regularisation")
    reg_lambda: float = Field(default=1.0, ge=0.0, le=100.0, description="L2 regularisation")


TRAIN_PY = textwrap.dedent(
    '''\
    """hpo-covertype training script: the one file the agent may change.

    The harness owns the data split and the metric. harness.load_data() gives X_train, y_train,
    X_test (labels 0..6); harness.evaluate(predictions) hands in the test predictions, which the
    server scores (macro F1). Keep main(params), harness.evaluate and harness.log; change the
    model setup or feature engineering freely.
    """
    import harness
    import xgboost as xgb


    def main(params):
        data = harness.load_data()
        model = xgb.XGBClassifier(
            objective="multi:softprob",
            tree_method="hist",
            n_jobs=data.threads,
            random_state=data.seed,
            **params,
        )
        model.fit(data.X_train, data.y_train)
        harness.evaluate(model.predict(data.X_test))
        harness.log(n_features=data.X_train.shape[1])
    '''
)

GUARD = GuardPolicy(
    allowed_imports=ALLOWED_IMPORTS | {"harness"},
    # numpy arrays lead to ctypes (`array.ctypes._ctypes`); nothing a training script needs does.
    # DataFrame.query evaluates text, as pandas.eval and DataFrame.eval (`eval` is refused everywhere).
    extra_forbidden_names=frozenset({"ctypes", "ctypeslib", "query"}),
    private_attributes=False,
    required_functions={"main": ("params",)},
    required_calls=("harness.evaluate", "harness.log"),
)


class HPOSettings(TaskSettings):
    covtype_path: str | None = Field(
        default=None, description="the Covertype CSV, or 'full'", json_schema_extra={"env": ENV_COVTYPE}
    )
    hpo_threads: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="threads per training",
        json_schema_extra={"env": ENV_HPO_THREADS},
    )
    # A training that runs longer is killed and recorded as a timeout.
    hpo_wall_s: int = Field(
        default=600,
        ge=1,
        le=86_400,
        description="seconds per training",
        json_schema_extra={"env": ENV_HPO_WALL_S},
    )


class HPOCovertypeTask(Task):
    name = "hpo-covertype"
    title = "Tune XGBoost on Covertype (7 forest cover classes, 54 features)"
    metric = "macro_f1"
    direction = "max"
    params_model = HPOParams
    settings_model = HPOSettings
    experiment_tool = "run_experiment"
    sandbox_entries = (ENTRY,)
    entry: ClassVar[str] = ENTRY  # a test-only subclass runs the same harness with the Python layers off

    def agent_profile(self) -> AgentProfile:
        return profile(HPOParams)

    def scripted_plan(self) -> ScriptedPlan:
        return scripted.plan()

    def log_scaled(self) -> frozenset[str]:
        return frozenset({"learning_rate"})

    def __init__(self, settings: dict[str, Any]) -> None:
        own = HPOSettings.model_validate(settings)
        self.data_path = own.covtype_path
        self.threads = own.hpo_threads or os.cpu_count() or 1
        self.wall_s = own.hpo_wall_s

    def options(self) -> dict[str, Any]:
        split = self._split(self.data_path)  # fails now, clearly, if the data is missing
        limits = Limits(
            wall_s=self.wall_s,
            cpu_s=self.wall_s * self.threads,
            memory_mb=3072,
            threads=self.threads,
            disk_mb=512,
            processes=64 + 4 * self.threads,  # XGBoost and BLAS threads count as processes
        )
        # Where the data lives stays in the server's settings (list_runs and the views show options);
        # the run keeps which split it was, and refuses to go on with another.
        return {
            "data": split.source,
            "split_sha256": split.digest,
            "n_train": split.n_train,
            "n_test": split.n_test,
            "limits": limits.model_dump(),
        }

    def _split(self, path: str | None) -> Split:
        """The split, or `unavailable`: the caller (often a model) learns that the data is missing here
        and whom to tell; what the operator can do, with the path, stays with the operator."""
        try:
            return prepare_split(path)
        except ResearchError as exc:
            log.info("hpo-covertype: %s", exc)  # the whole story, paths included, in the server's log
            raise UnavailableError(
                "the hpo-covertype task cannot run here: this server has no Covertype data. Nothing was"
                " started and no budget used; tell the server's operator, who can give it the data.",
                operator=scrub_paths(str(exc)),
            ) from None

    def initial_artifact(self) -> str:
        return TRAIN_PY

    def check_artifact(self, source: str) -> list[str]:
        return check_source(source, GUARD)

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        split = self._split(ctx.options.get("covtype_path") or self.data_path)  # runs before issue 13
        started_with = ctx.options.get("split_sha256")
        if started_with is not None and split.digest != started_with:
            raise ResearchError(
                f"the Covertype data here ({split.source}) is not the split this run started with "
                f"({ctx.options.get('data')}); serve with the same --data to go on"
            )
        limits = ctx.limits()
        payload = {
            "source": source,
            "params": params.model_dump(),
            "split_path": str(split.features_path),
            "n_classes": N_CLASSES,
            "seed": ctx.seed,
            "threads": limits.threads,
        }
        result = run_sandboxed(self.entry, payload, limits)
        if result.status != "ok" or result.result is None:
            return sandbox_failure(result)
        try:
            report = REPORT.validate_python(result.result)
        except ValidationError as exc:
            return Outcome(
                status="crash", error_tail=f"the training harness returned a malformed report: {exc}"
            )
        if isinstance(report, TrainingFailure):
            return Outcome(status="crash", error_tail=report.error)
        predictions = np.asarray(report.predictions, dtype=np.int64)
        if predictions.shape != split.y_test.shape:
            return Outcome(
                status="crash",
                error_tail=f"harness.evaluate got {predictions.size} predictions; the test set has "
                f"{split.y_test.size} rows (predict on data.X_test, in order)",
            )
        from sklearn.metrics import accuracy_score, precision_recall_fscore_support  # (slow import)

        precision, recall, f1, _ = precision_recall_fscore_support(
            split.y_test, predictions, average="macro", zero_division=0
        )
        metrics = {
            "macro_f1": round(float(f1), 6),
            "precision": round(float(precision), 6),
            "recall": round(float(recall), 6),
            "accuracy": round(float(accuracy_score(split.y_test, predictions)), 6),
            "train_seconds": report.train_seconds,
        }
        if report.train_cpu_seconds is not None:
            metrics["train_cpu_seconds"] = report.train_cpu_seconds
        metrics.update({f"log_{k}": float(v) for k, v in report.log.items() if not isinstance(v, str)})
        return Outcome(status="ok", metrics=metrics, metric=metrics["macro_f1"])


class TrainingReport(BaseModel):
    """What the sandboxed harness reports (checked there already; checked again on arrival)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    predictions: list[Annotated[int, Field(ge=0, lt=N_CLASSES)]] = Field(max_length=10_000_000)
    log: dict[
        Annotated[str, Field(max_length=40)], int | FiniteFloat | Annotated[str, Field(max_length=200)]
    ] = Field(max_length=MAX_LOG_ITEMS)
    train_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    train_cpu_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None


class TrainingFailure(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    error: str = Field(max_length=2000)
    train_seconds: float
    train_cpu_seconds: float | None = None


REPORT = TypeAdapter(TrainingReport | TrainingFailure)


register("hpo-covertype", HPOCovertypeTask)
