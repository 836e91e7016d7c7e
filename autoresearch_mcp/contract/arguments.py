"""One arguments model per tool: names, types, defaults, ranges and descriptions, written once.

The server publishes each as its tool's input schema (field order is the schema's order) and the
client builds its calls from them. Task parameters travel in one nested `params` object: mcp 2.x drops
unknown top-level arguments without a word, so only a nested object, validated per task with
extra="forbid", can refuse an unknown knob. Its schema is the server's (each registered task's params
model); here it is any object.
"""

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.contract.models import (
    ArtifactInfo,
    ExperimentResult,
    ExperimentStatus,
    HistoryPage,
    JobInfo,
    Note,
    NoteKind,
    ParamsBase,
    QueryResult,
    RunList,
    RunStatus,
    StartedRun,
    SummaryText,
)
from autoresearch_mcp.contract.profile import ProfileResult

R = TypeVar("R", bound=BaseModel)

# get_experiment_history without `last` answers one page of HISTORY_PAGE, with next_offset; `last`
# takes at most HISTORY_MAX.
HISTORY_PAGE = 100
# A summary lists the last SUMMARY_LAST experiments, or up to SUMMARY_MAX_LAST where asked (a batch's).
SUMMARY_LAST, SUMMARY_MAX_LAST = 3, 16
HISTORY_MAX = 1000
MAX_BUDGET = 10_000
MAX_SEED = 2**31 - 1
MAX_REEVAL_SEEDS = 10
MAX_QUERY_ROWS = 1000
MAX_NOTE_CHARS = 2000

RunId = Annotated[
    str | None,
    Field(
        default=None,
        min_length=1,
        max_length=64,
        description="the run id from start_run (or list_runs): pass it on every call. Omitted: the run "
        "this connection started, on a connection that keeps a session (one opened with initialize), else "
        "the only running run; with several running and none named, the call is refused with their list",
    ),
]
Params = Annotated[
    dict[str, Any],
    Field(
        description="the task's parameters, all inside this one object (the run's task decides which"
        " apply; unknown keys are refused)"
    ),
]
NoteText = Annotated[str | None, Field(max_length=2000, description="why this experiment")]
Base = Annotated[
    ParamsBase,
    Field(
        description='what the params you leave out take: "defaults" (the task\'s), or "best" (the best '
        "experiment's values, so you send only what you change)"
    ),
]


class Arguments(BaseModel, Generic[R]):
    """A tool's arguments; `R` is what the tool returns. Unknown top-level keys are ignored, as the SDK
    ignores them on the wire."""

    @classmethod
    def result_model(cls) -> type[BaseModel]:
        """The model of the tool's result (its output schema)."""
        for base in cls.__mro__:
            meta = getattr(base, "__pydantic_generic_metadata__", None)
            if meta and meta["origin"] is Arguments and meta["args"]:
                return meta["args"][0]
        raise TypeError(f"{cls.__name__} names no result model")


class StartRunArgs(Arguments[StartedRun]):
    # The schema lists the known names (the server adds them as an enum), but the run logic checks the
    # name: a Literal made the SDK answer an unknown task with its validation dump, not `unknown_task`.
    task: Annotated[str, Field(min_length=1, max_length=100, description="which task to run")]
    budget: Annotated[
        int, Field(ge=1, le=MAX_BUDGET, description="experiments the run may record (refusals are free)")
    ] = 15
    target: Annotated[
        float | None,
        Field(allow_inf_nan=False, description="the run converges when the metric reaches this"),
    ] = None
    seed: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_SEED,
            description="the run's seed (given to train.py, e.g. as the model's random_state)",
        ),
    ] = 42
    name: Annotated[
        str | None, Field(max_length=100, description="a label for people, e.g. who started it and why")
    ] = None
    reeval_seeds: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_REEVAL_SEEDS,
            description="re-run a would-be new best on this many more seeds (each costs budget) and "
            "keep it only if the mean beats the best's; 0 = off",
        ),
    ] = 0
    from_run: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=64,
            description='an earlier run of the same task to continue from (its id, or "latest"): its '
            "best is measured again as this run's experiment #1 (one unit of budget), and the summary "
            "shows its best, strategy notes and failed approaches",
        ),
    ] = None
    llm: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=100,
            description="who proposes the experiments, recorded for people reading the run later (e.g."
            " 'anthropic:claude-haiku-4-5'; 'scripted' marks the deterministic test double)",
        ),
    ] = None
    suggest: Annotated[
        Literal["tpe"] | None,
        Field(
            description="params work: an optimiser's next configuration, one summary line each turn "
            "('optimiser suggests: ...'), to take, change or ignore; 'tpe' = Optuna's TPE fed the run's "
            "history; none by default",
        ),
    ] = None


class ListRunsArgs(Arguments[RunList]):
    status: Annotated[RunStatus | None, Field(description="only runs with this status")] = None


class GetRunSummaryArgs(Arguments[SummaryText]):
    run_id: RunId = None


class AddNoteArgs(Arguments[Note]):
    text: Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS, description="the note")]
    kind: Annotated[NoteKind, Field(description="a plan, or an approach that failed")] = "strategy"
    run_id: RunId = None


class FinishRunArgs(Arguments[SummaryText]):
    reason: Annotated[str, Field(min_length=1, max_length=500, description="why the run ends")]
    run_id: RunId = None


class ExperimentArgs(BaseModel):
    """What one experiment is asked with: run_experiment's arguments, and submit_training_job's."""

    params: Params
    note: NoteText = None
    base: Base = "defaults"
    run_id: RunId = None


Remeasure = Annotated[
    bool,
    Field(
        description="on a timed task, measure an exact repeat of an earlier experiment again, for "
        "another sample (charged to the budget like any experiment)"
    ),
]


class RunExperimentArgs(ExperimentArgs, Arguments[ExperimentResult]):
    remeasure: Remeasure = False


class RunBenchmarkArgs(Arguments[ExperimentResult]):
    run_id: RunId = None
    remeasure: Remeasure = False


class GetExperimentHistoryArgs(Arguments[HistoryPage]):
    run_id: RunId = None
    last: Annotated[
        int | None,
        Field(ge=1, le=HISTORY_MAX, description=f"only the most recent N (at most {HISTORY_MAX})"),
    ] = None
    offset: Annotated[int, Field(ge=0, le=1_000_000_000, description="skip this many")] = 0
    order: Annotated[Literal["iteration", "metric"], Field(description="iteration order, or best first")] = (
        "iteration"
    )
    status: Annotated[ExperimentStatus | None, Field(description="only this status")] = None


class GetCurrentTrainPyArgs(Arguments[ArtifactInfo]):
    run_id: RunId = None


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    search: str = Field(min_length=1, max_length=20_000, description="exact text, occurring once in train.py")
    replace: str = Field(max_length=20_000, description="its replacement")


class ModifyTrainPyArgs(Arguments[ArtifactInfo]):
    description: Annotated[
        str, Field(min_length=1, max_length=500, description="what the change does and why, one line")
    ]
    source: Annotated[
        str | None, Field(max_length=200_000, description="the whole new file (or give edits)")
    ] = None
    edits: Annotated[
        list[Edit] | None,
        Field(max_length=50, description="search/replace edits applied in order (or give source)"),
    ] = None
    run_id: RunId = None


class ReplaceFunctionArgs(Arguments[ArtifactInfo]):
    name: Annotated[str, Field(min_length=1, max_length=200, description="the function's name")]
    source: Annotated[
        str,
        Field(
            min_length=1,
            max_length=100_000,
            description="its new def, same name and parameters (imports before it go to the top)",
        ),
    ]
    description: Annotated[
        str | None, Field(max_length=500, description="what the change does and why, one line")
    ] = None
    run_id: RunId = None


class ProfileTrainPyArgs(Arguments[ProfileResult]):
    run_id: RunId = None


class RevertTrainPyArgs(Arguments[ArtifactInfo]):
    version: Annotated[int, Field(ge=1, le=1_000_000, description="the version to restore; 1 = the original")]
    run_id: RunId = None


class SubmitTrainingJobArgs(ExperimentArgs, Arguments[JobInfo]):
    pass


class GetJobArgs(Arguments[JobInfo]):
    job_id: Annotated[str, Field(min_length=1, max_length=64, description="from submit_training_job")]
    wait_seconds: Annotated[
        float, Field(ge=0, le=600, description="wait up to this long for the job to end")
    ] = 0


class QueryResultsArgs(Arguments[QueryResult]):
    sql: Annotated[str, Field(min_length=1, max_length=20_000, description="one SELECT statement")]
    max_rows: Annotated[int, Field(ge=1, le=MAX_QUERY_ROWS, description="rows to return at most")] = 200
