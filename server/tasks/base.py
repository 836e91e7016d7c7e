"""What a task is: a fixed harness, a mutable artifact (train.py), a typed parameter schema, a metric."""

import logging
import os
import typing
from abc import ABC, abstractmethod
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationError, field_validator

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import AgentProfile, JudgedBy, ScriptedPlan, TaskInfo
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.sandbox.results import BadResult, check_value
from autoresearch_mcp.sandbox.runner import Limits, SandboxResult, allow_entry
from autoresearch_mcp.server.store import Incumbent, better
from autoresearch_mcp.server.system_prompt import TaskFacts, agent_profile
from autoresearch_mcp.server.text import scrub_paths

log = logging.getLogger(__name__)
MAX_ERROR_CHARS = 2000


class TaskSettings(BaseModel):
    """A task's own settings: what the operator gives it through the server's flags or environment
    (ServerSettings.task_settings), read by the task's model alone. A field names its environment
    variable in `json_schema_extra={"env": ...}`; None means the task's own default."""

    model_config = ConfigDict(extra="ignore")

    @classmethod
    def env_of(cls, name: str) -> str | None:
        """The environment variable the field `name` reads, if it names one."""
        extra = cls.model_fields[name].json_schema_extra
        return str(extra["env"]) if isinstance(extra, dict) and extra.get("env") else None

    @classmethod
    def from_environment(cls) -> dict[str, str]:
        """The values this model's fields take from the environment, where it sets them."""
        found = {name: os.environ.get(cls.env_of(name) or "") for name in cls.model_fields}
        return {name: value for name, value in found.items() if value}


class NoParams(BaseModel):
    """For tasks whose only knob is the artifact itself."""

    model_config = ConfigDict(extra="forbid")


class ExecContext(BaseModel):
    """What the harness needs to know about the experiment it is running."""

    run_id: str
    seed: int = Field(description="the run's seed (another one for a re-evaluation)")
    iteration: int
    options: dict[str, Any] = Field(description="the run's task options, fixed at start_run")
    best_iteration: int | None = Field(default=None, description="the run's best experiment when it started")
    best_source: str | None = Field(
        default=None, description="the best's train.py, for a task that measures candidates beside it"
    )
    profiled: bool = Field(
        default=False,
        description="this train.py's profile is already known in the run: no need to measure it",
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        description="the most training threads this measurement may use, where several run at once on "
        "one machine (job workers); None: the run's own limit",
    )

    def limits(self) -> Limits:
        """The sandbox limits the run started with, its threads capped to this measurement's share."""
        limits = Limits(**self.options["limits"])
        if self.threads is None or self.threads >= limits.threads:
            return limits
        return limits.model_copy(update={"threads": self.threads})


class Outcome(BaseModel):
    """What an experiment ended with. Everything in it is checked here, because it goes into the store
    and back out through the tools' output schemas: finite numbers, bounded sizes, no absolute paths."""

    status: Literal["ok", "crash", "timeout", "incorrect"]
    metrics: dict[Annotated[str, Field(max_length=64)], FiniteFloat] = Field(
        default_factory=dict, max_length=64
    )
    metric: FiniteFloat | None = None
    error_tail: str | None = Field(default=None, description="why it failed, and the end of its output")
    samples: list[FiniteFloat] = Field(
        default_factory=list,
        max_length=1000,
        description="the raw measurements behind the metric (e.g. each call's time), stored for later "
        "keep decisions and left out of the metrics the model reads",
    )
    state_update: dict[str, Any] = Field(
        default_factory=dict,
        description="values the task wants kept in the run's options for later experiments "
        "(e.g. the baseline time measured once per run)",
    )
    profile: Profile | None = Field(
        default=None, description="where this version spends its time, for a task that profiles"
    )

    @field_validator("error_tail")
    @classmethod
    def _short_and_pathless(cls, value: str | None) -> str | None:
        return None if value is None else scrub_paths(value)[-MAX_ERROR_CHARS:]

    @field_validator("state_update")
    @classmethod
    def _plain(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            check_value(value)
        except BadResult as exc:
            raise ValueError(str(exc).replace("the sandbox's result", "state_update")) from None
        return value


class Task(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    metric: ClassVar[str]
    direction: ClassVar[Literal["max", "min"]] = "max"
    params_model: ClassVar[type[BaseModel]] = NoParams
    # The tool that evaluates the current artifact: run_experiment (takes params) or run_benchmark.
    experiment_tool: ClassVar[Literal["run_experiment", "run_benchmark"]] = "run_experiment"
    # The harness entry points ("module:function") this task runs in the sandbox; the registry admits
    # them, and the sandbox runs nothing else.
    sandbox_entries: ClassVar[tuple[str, ...]] = ()
    # What the operator may set for this task (its data, its sizes): validated by the task itself.
    settings_model: ClassVar[type[TaskSettings]] = TaskSettings
    # Who decides the metric (contract JUDGED_BY_WORDS): a task's own harness, by default.
    judged_by: JudgedBy = "evaluator"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Defining a task admits its harness entry points: the sandbox runs nothing else.
        super().__init_subclass__(**kwargs)
        for entry in cls.sandbox_entries:
            allow_entry(entry)

    @abstractmethod
    def options(self) -> dict[str, Any]:
        """The task options a new run freezes into its config (data path, sizes, limits)."""

    @abstractmethod
    def initial_artifact(self) -> str:
        """Version 1 of train.py."""

    @abstractmethod
    def check_artifact(self, source: str) -> list[str]:
        """Guardrail problems with a proposed train.py; empty when it may run."""

    @abstractmethod
    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        """Run one experiment in the sandbox. Failures are outcomes, never exceptions."""

    def verdict(self, outcome: "Outcome", best: Incumbent | None) -> "Verdict":
        """Whether an ok outcome becomes the run's new best, and why, in words. This rule: a metric
        strictly better than the best's (its mean over re-evaluations where it has one). A task whose
        metric is noisy in a way it can measure (codeopt-records' timings) asks for more."""
        if outcome.metric is None:
            return Verdict(False, "not kept: it measured nothing")
        if best is None:
            return Verdict(True, f"kept: the run's first result ({self.metric} {outcome.metric:.6g})")
        value, than = two_apart(outcome.metric, best.value)
        where = f"the best's {than} (#{best.experiment.iteration})"
        if better(outcome.metric, best.value, self.direction):
            return Verdict(True, f"kept: {self.metric} {value} beats {where}")
        return Verdict(False, f"not kept: {self.metric} {value} does not beat {where}")

    @property
    def noisy(self) -> bool:
        """Whether measuring the same version again gives another sample: a timing does, a seeded
        training gives the same number. Such a task takes run_experiment's and run_benchmark's
        `remeasure`."""
        return self.judged_by == "benchmark"

    def time_limit_s(self, options: dict[str, Any]) -> float | None:
        """How long one experiment may run before it is stopped as a timeout (`options`: the run's
        frozen ones): the sandbox's wall-clock limit, unless the task states its own; None for a
        plugin task whose options name no limits (its harness keeps its own)."""
        limits = options.get("limits")
        return float(limits["wall_s"]) if isinstance(limits, dict) and "wall_s" in limits else None

    def keeps(self, outcome: "Outcome", best: Incumbent | None) -> bool:
        """Whether an ok outcome becomes the run's new best (the verdict without its words)."""
        return self.verdict(outcome, best).kept

    def log_scaled(self) -> frozenset[str]:
        """The params best searched on a log scale (an optimiser's suggestion reads it: suggest.py)."""
        return frozenset()

    def editable(self) -> list[str]:
        """The files the artifact holds: train.py, or a task folder's `edit` files."""
        return ["train.py"]

    def profile(self, params: BaseModel, source: str, ctx: ExecContext) -> Profile | None:
        """Where `source` spends its time on the task's own input, measured in the sandbox apart from
        any experiment (contract/profile.py); None for a task that does not profile, or when the
        version did not run. A code task's experiments return the same with their result."""
        return None

    def facts(self) -> TaskFacts:
        """What the words every task of its kind reads (server/system_prompt.py) need to know of it."""
        return TaskFacts(
            work="params" if self.experiment_tool == ToolName.RUN_EXPERIMENT else "code",
            about=self.title,
            description=self.title,
            metric=self.metric,
            direction=self.direction,
            judged_by=self.judged_by,
            params=self.params_model,
            log_scaled=self.log_scaled(),
            editable=self.editable(),
            profiled=False,
        )

    def agent_profile(self) -> AgentProfile:
        """How an agent works on this task: the words of its kind of work, with its facts."""
        return agent_profile(self.facts())

    def scripted_plan(self) -> ScriptedPlan:
        """What the scripted test double needs to play this task (see contract ScriptedPlan)."""
        return ScriptedPlan()

    def info(self) -> TaskInfo:
        return TaskInfo(
            name=self.name,
            title=self.title,
            description=self.describe(),
            metric=self.metric,
            direction=self.direction,
            kind="params" if self.experiment_tool == ToolName.RUN_EXPERIMENT else "code",
            experiment_tool=self.experiment_tool,
            params_schema=self.params_model.model_json_schema(),
            files=self.editable(),
            judged_by=self.judged_by,
            agent=self.agent_profile(),
        )

    def describe(self) -> str:
        """One paragraph for prompts: what the task is and what is being optimised."""
        return f"{self.title}. Metric: {self.metric} ({'higher' if self.direction == 'max' else 'lower'} is better)."

    def params_help(self) -> str:
        """The parameter schema as lines 'name: type, range, default: description'."""
        lines = []
        for name, field in self.params_model.model_fields.items():
            bounds = []
            for item in field.metadata:
                for attr, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
                    value = getattr(item, attr, None)
                    if value is not None:
                        bounds.append(f"{sym}{value}")
            if typing.get_origin(field.annotation) is Literal:
                kind = "one of " + "|".join(str(choice) for choice in typing.get_args(field.annotation))
            else:
                kind = getattr(field.annotation, "__name__", str(field.annotation))
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            shown = " ".join([kind, *bounds]) + (", log scale" if extra.get("scale") == "log" else "")
            desc = f": {field.description}" if field.description else ""
            lines.append(f"{name} ({shown}, default {field.default}){desc}")
        return "\n".join(lines) if lines else "(no parameters: the artifact is the only knob)"

    def format_params(self, params: dict[str, Any]) -> str:
        """Compact one-line rendering for summaries."""
        return " ".join(f"{key}={_fmt(value)}" for key, value in params.items()) or "-"


class Verdict(NamedTuple):
    """A keep decision and the sentence that says why (what an experiment's answer ends with)."""

    kept: bool
    why: str


def two_apart(value: float, other: float) -> tuple[str, str]:
    """The two numbers with the fewest significant digits (4 at least) that tell them apart."""
    for digits in range(4, 13):
        a, b = f"{value:.{digits}g}", f"{other:.{digits}g}"
        if a != b:
            return a, b
    return f"{value:.12g}", f"{other:.12g}"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def execute_safely(task: Task, params: BaseModel, source: str, ctx: ExecContext, where: str = "") -> Outcome:
    """The one boundary between a task's harness and the store: whatever `execute` does (a ResearchError,
    a harness bug, an outcome with a value the store cannot keep), the result is a valid Outcome, and a
    failure is a crash with a short message, never an exception that leaves an experiment running."""
    try:
        outcome = task.execute(params, source, ctx)
        return Outcome.model_validate(outcome.model_dump())
    except ResearchError as exc:  # e.g. the data went missing after the run started
        return Outcome(status="crash", error_tail=f"{where}{exc}")
    except ValidationError as exc:  # a value no record may hold (NaN, infinity, too large)
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        return Outcome(status="crash", error_tail=f"the result cannot be recorded: {problems}")
    except Exception as exc:  # the boundary: a harness bug is this experiment's crash, logged in full here
        log.exception("task %s failed outside the sandbox", task.name)
        return Outcome(
            status="crash", error_tail=f"the {task.name} harness failed: {type(exc).__name__}: {exc}"
        )


def sandbox_failure(result: SandboxResult) -> Outcome:
    """The outcome for a sandbox run that did not finish: crash or timeout with its reason and tail."""
    tail = result.output_tail[-1500:]
    status: Literal["crash", "timeout"] = "timeout" if result.status == "timeout" else "crash"
    return Outcome(status=status, error_tail=f"{result.reason}\n{tail}".strip())
