"""The records the store keeps and the tools return. Plain pydantic: they are the structured output.
One module on purpose: the contract's records side by side, as a host's author reads them."""

from typing import Any, Literal

from pydantic import BaseModel, Field

from autoresearch_mcp.contract.profile import Profile

RunStatus = Literal["running", "converged", "exhausted", "stopped"]
# Who decides a task's metric. evaluator: a trusted step the candidate cannot touch (a folder's
# [evaluate], a built-in's scorer); benchmark: the harness times the candidate beside the reference on
# fresh inputs and checks its output; script: params work, where the task's own script prints the
# metric and no agent edits it; self-reported: code work without [evaluate], where the edited script
# prints its own metric.
JudgedBy = Literal["evaluator", "benchmark", "script", "self-reported"]
JUDGED_BY_WORDS: dict[str, str] = {
    "evaluator": "decided by the task's evaluator, which the candidate cannot touch",
    "benchmark": "timed and checked by the harness beside the reference, on fresh inputs",
    "script": "printed by the task's own script, which the agent does not edit",
    "self-reported": "self-reported: the last metric line the edited script prints (no [evaluate])",
}
ExperimentStatus = Literal["running", "ok", "crash", "timeout", "incorrect", "interrupted"]
NoteKind = Literal["strategy", "failed"]
FINISHED_STATUSES: tuple[ExperimentStatus, ...] = ("ok", "crash", "timeout", "incorrect", "interrupted")


class Experiment(BaseModel):
    id: int
    run_id: str
    iteration: int = Field(description="1-based; one recorded experiment = one iteration of the budget")
    params: dict[str, Any]
    artifact_version: int
    status: ExperimentStatus
    metrics: dict[str, float] = Field(default_factory=dict)
    metric: float | None = Field(default=None, description="the task's target metric")
    kept: bool = Field(default=False, description="true when this experiment became the best so far")
    note: str | None = None
    error_tail: str | None = None
    started_at: str
    finished_at: str | None = None
    duration_s: float | None = None


# What the params a caller leaves out take: the task's defaults, or the best experiment's values.
ParamsBase = Literal["defaults", "best"]


class BestResult(BaseModel):
    iteration: int
    metric: float
    params: dict[str, Any]
    artifact_version: int
    low: float | None = Field(default=None, description="the metric's interval, where the task measures one")
    high: float | None = None
    mean: float | None = Field(
        default=None,
        description="the metric's mean over this experiment and its re-evaluations (reeval_seeds)",
    )


class Run(BaseModel):
    id: str
    name: str | None
    task: str
    status: RunStatus
    budget: int
    used: int = Field(
        description="experiments charged so far: each one recorded costs one unit of budget, except an"
        " interrupted one (cut short by the server or its operator, it measured nothing)"
    )
    running: int = Field(
        default=0, description="of those, the experiments being measured now (jobs, workers in parallel)"
    )
    target: float | None
    seed: int
    metric_name: str
    direction: Literal["max", "min"]
    best: BestResult | None = None
    created_at: str
    finished_at: str | None = None
    finish_reason: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    from_run: str | None = Field(
        default=None, description="the earlier run this one started from (start_run's from_run)"
    )
    tags: list[str] = Field(default_factory=list, description="labels a person put on the run")
    llm: str | None = Field(
        default=None,
        description="who proposed the experiments, as start_run was told (e.g. 'scripted': the test double)",
    )

    @property
    def scripted(self) -> bool:
        """Whether the run's experiments were proposed by the scripted test double, not a model."""
        return (self.llm or "").startswith("scripted")

    @property
    def judged_by(self) -> JudgedBy | None:
        """Who decided this run's metric, as its task said when the run started (None: a run from
        before it was recorded)."""
        found = self.config.get("judged_by")
        return found if found in JUDGED_BY_WORDS else None  # type: ignore[return-value]

    def reaches_target(self, metric: float) -> bool:
        if self.target is None:
            return False
        return metric >= self.target if self.direction == "max" else metric <= self.target


class Note(BaseModel):
    id: int
    run_id: str
    kind: NoteKind
    text: str
    created_at: str


class ArtifactVersion(BaseModel):
    run_id: str
    version: int
    source: str
    sha256: str
    description: str
    parent_version: int | None
    created_at: str


class Event(BaseModel):
    """A refusal or other thing that happened without becoming an experiment."""

    id: int
    run_id: str | None
    kind: str
    tool: str
    detail: str
    created_at: str


class ExperimentResult(BaseModel):
    """What run_experiment / run_benchmark return."""

    experiment: Experiment
    is_new_best: bool
    best: BestResult | None
    budget_left: int
    run_status: RunStatus
    reevaluations: list[Experiment] = Field(
        default_factory=list,
        description="with reeval_seeds: the re-evaluations of a would-be best on other seeds, each its own "
        "experiment (each costs budget); the keep decision took the mean",
    )
    message: str | None = Field(
        default=None, description="how the keep decision was made, when it needs saying"
    )
    profile: Profile | None = Field(
        default=None,
        description="code tasks: where this version spends its time (per function, and per line of the "
        "hottest), measured apart from the timed calls; absent when it did not run correctly",
    )


class HistoryPage(BaseModel):
    experiments: list[Experiment]
    total: int = Field(description="experiments matching the filter, over all pages")
    offset: int
    next_offset: int | None = Field(description="pass as offset to read the next page; null at the end")


class StartedRun(BaseModel):
    run_id: str
    summary: str
    task_description: str
    metric: str
    experiment_tool: Literal["run_experiment", "run_benchmark"] = Field(
        description="the tool that evaluates this task's train.py"
    )
    from_run: str | None = Field(
        default=None, description="the earlier run it started from; its best was re-measured as #1"
    )
    judged_by: JudgedBy = Field(
        default="evaluator",
        description="who decides the metric: "
        + "; ".join(f"{key}: {words}" for key, words in JUDGED_BY_WORDS.items()),
    )
    timeout_s: float | None = Field(
        default=None, description="how long one experiment may run before it is stopped as a timeout"
    )


class RunList(BaseModel):
    runs: list[Run]


class SummaryText(BaseModel):
    run_id: str
    summary: str


def line_count(source: str) -> int:
    """Lines of a file as editors count them (a final newline ends a line, it does not start one)."""
    return source.count("\n") + (1 if source and not source.endswith("\n") else 0)


class ArtifactInfo(BaseModel):
    """A version of train.py. `source` is omitted where only the version matters."""

    run_id: str
    version: int
    sha256: str
    description: str
    source: str | None = None
    lines: int


JobStatus = Literal["queued", "running", "done", "failed"]


class Job(BaseModel):
    """A background experiment. `done`: its experiment was recorded (whatever its status); `failed`: the
    job itself broke (worker died, executor error, server restart), and `error` says why."""

    id: str
    run_id: str
    experiment_id: int
    iteration: int
    status: JobStatus
    executor: str = Field(description="'local' or the Dask scheduler address")
    worker: str | None = Field(default=None, description="where it ran")
    worker_pid: int | None = None
    error: str | None = None
    submitted_at: str
    started_at: str | None = None
    finished_at: str | None = None


class JobInfo(BaseModel):
    """What submit_training_job and get_job return."""

    job: Job
    result: ExperimentResult | None = Field(
        default=None, description="the recorded experiment, once the job has ended (done or failed)"
    )


# What an SQLite cell becomes in a result (a blob as hex, a non-finite float as its name): typed, so
# that a strict client can check the output schema down to each cell.
Cell = str | int | float | None


class QueryResult(BaseModel):
    columns: list[str]
    rows: list[list[Cell]]
    truncated: bool = Field(description="true when more rows matched than max_rows (or the size cap)")
    elapsed_s: float


class ScriptedStep(BaseModel):
    """One move of the scripted double on a code task: search/replace edits of the previous step's file,
    or one whole new definition of a top-level function (replace_function's `source`)."""

    description: str
    edits: list[tuple[str, str]] = Field(default_factory=list)
    function: str | None = None


class ScriptedPlan(BaseModel):
    """What the deterministic test double needs to play a task (`autoresearch://tasks/{name}/scripted-plan`,
    read by the double alone); the task's folder supplies it.

    Params tasks: where a practitioner would draw each parameter from (inside the schema's bounds), and
    which are drawn on a log scale. Code tasks: a chain of steps applied cumulatively to train.py v1."""

    prior: dict[str, tuple[float, float]] = Field(default_factory=dict)
    log_scale: list[str] = Field(default_factory=list)
    steps: list[ScriptedStep] = Field(default_factory=list)


class StatelessWords(BaseModel):
    """How the stateless baseline words a task in its one growing message (defaults: generic words
    built from the task's metric, direction and params; the paper's tasks keep the paper's words)."""

    intro: str | None = Field(default=None, description="the first words, before `Task: ...`")
    goal: str | None = Field(default=None, description="default: `Goal: maximize|minimize <metric>.`")
    example: str | None = Field(default=None, description="params: an example reply (JSON)")
    metric_labels: dict[str, str] = Field(
        default_factory=dict,
        description="params: the metrics each history line shows, key -> label, in order "
        "(default: the metric, then every other metric the experiment has)",
    )
    best_label: str | None = Field(default=None, description="params: the label of the Best line")
    rule: str | None = Field(default=None, description="code: what every version must keep")
    not_run: str = Field(default="Not run yet.", description="code: the original's block before a run")
    headline: str | None = Field(
        default=None, description="code: a version's headline, formatted with its metrics"
    )
    benchmark: str | None = Field(
        default=None, description="code: a version's result block, formatted with its metrics (+ runs)"
    )
    reply: str = Field(
        default="Propose the next version. Reply with CODE: and the complete file.",
        description="code: the closing request",
    )


class AgentProfile(BaseModel):
    """How an agent works on a task: its fixed system prompt, the tools it offers the model, and the
    instruction the research prompt gives for one step."""

    system_prompt: str
    tools: list[str] = Field(description="the server tools the stateful agent offers the model")
    how: str = Field(description="one step of the loop, in the words of the `autoresearch` prompt")
    fixed_arguments: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="per tool: arguments the agent sends itself, not shown to the model "
        '(e.g. run_experiment base="best": the model sends only what it changes)',
    )
    dropped_arguments: dict[str, list[str]] = Field(
        default_factory=dict, description="per tool: optional arguments not offered to the model"
    )
    tool_descriptions: dict[str, str] = Field(
        default_factory=dict, description="per tool: the description the model reads, when it differs"
    )
    benchmark_after_edit: bool = Field(
        default=False,
        description="code tasks: the agent runs run_benchmark itself after each accepted edit, so the "
        "model makes one tool call per reply",
    )
    turn: str = Field(default="Next experiment?", description="the request that ends each turn's message")
    text_system_prompt: str | None = Field(
        default=None,
        description="the system prompt when the model answers in text rather than with tool calls: code "
        "tasks (the whole file in a python block, edits, REVERT v<N> or DONE), params tasks (one JSON "
        "object of params, or DONE)",
    )
    stateless: StatelessWords = Field(default_factory=StatelessWords)


class TaskInfo(BaseModel):
    """A task as an agent needs to know it: `autoresearch://tasks/{name}`."""

    name: str
    title: str
    description: str
    metric: str
    direction: Literal["max", "min"]
    kind: Literal["params", "code"] = Field(
        description="params: run_experiment(params) evaluates train.py; code: edit train.py, then run_benchmark"
    )
    experiment_tool: Literal["run_experiment", "run_benchmark"]
    params_schema: dict[str, Any]
    files: list[str] = Field(
        default_factory=lambda: ["train.py"],
        description="the files the artifact holds (a task folder's `edit`; several are one text, each "
        "under a header line: contract/files.py)",
    )
    judged_by: JudgedBy = Field(
        default="evaluator", description="who decides the metric (StartedRun.judged_by)"
    )
    agent: AgentProfile


class TaskList(BaseModel):
    tasks: list[TaskInfo]
