"""The one user-facing error, and the kinds of refusal it carries on the wire.

The server raises `ResearchError(message, kind=...)`; the MCP glue turns it into an error tool result
whose text is the message (for the model) and whose `_meta` carries a `Refusal` under REFUSAL_META (for
programs: an agent tells an exact repeat from an invalid edit by its kind, never by matching text). It
travels in `_meta`, not in the structured content, because hosts such as the MCP Inspector check the
structured content of every result, errors included, against the tool's output schema.
"""

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

REFUSAL_META = "autoresearch/refusal"

RefusalKind = Literal[
    "invalid_params",  # params outside the task's schema (the message lists the ranges)
    "exact_repeat",  # same params on the same train.py version as an earlier experiment
    "rejected_edit",  # modify_train_py refused: guardrails, a search text not found once
    "no_change",  # an edit or revert that would leave train.py exactly as it is
    "wrong_tool",  # e.g. run_benchmark on a params task
    "unknown_run",
    "unknown_task",
    "unknown_job",
    "unknown_version",
    "no_running_run",  # run_id omitted and no run is running
    "ambiguous_run",  # run_id omitted and several runs are running
    "run_finished",  # the run takes no more experiments or edits
    "budget_exhausted",
    "bad_query",
    "bad_argument",
    "unavailable",  # the server cannot do it now (shutting down, data missing, scheduler unreachable)
]


class NoDetail(BaseModel):
    """A refusal whose message says it all."""


class RepeatDetail(BaseModel):
    """exact_repeat: what an agent needs to say which value to change, without reading the history."""

    iteration: int = Field(description="the experiment repeated")
    params: dict[str, Any] = Field(
        description="what that experiment ran: the configuration the refused call resolved to"
    )
    distinct: dict[str, int] = Field(
        default_factory=dict, description="per param, how many distinct values the run's experiments took"
    )


class AmbiguousRunDetail(BaseModel):
    """ambiguous_run: the runs a call without run_id could mean."""

    running: list[str]


class UnavailableDetail(BaseModel):
    """unavailable: what the operator can do about it (paths shortened), for a program that speaks for
    the operator, such as our CLI; the message, for whoever called, names no path and no flag."""

    operator: str | None = None


D = TypeVar("D", bound=BaseModel)
# Each refusal kind's detail; a kind not named here carries none.
DETAILS: dict[str, type[BaseModel]] = {
    "exact_repeat": RepeatDetail,
    "ambiguous_run": AmbiguousRunDetail,
    "unavailable": UnavailableDetail,
}


class Refusal(BaseModel):
    """The structured content of an error tool result."""

    kind: RefusalKind
    message: str
    detail: dict[str, Any] = Field(
        default_factory=dict,
        description="the kind's detail model (DETAILS), e.g. the earlier experiment of a repeat",
    )

    def details(self, model: type[D]) -> D | None:
        """The detail as its kind's model, or None when the refusal is of another kind (or its detail
        does not fit: an older server's)."""
        if DETAILS.get(self.kind) is not model:
            return None
        try:
            return model.model_validate(self.detail)
        except ValueError:
            return None


class ResearchError(Exception):
    """Something the caller asked for cannot be done; the message says why and what to do instead."""

    def __init__(
        self,
        message: str,
        kind: RefusalKind = "bad_argument",
        detail: BaseModel | dict[str, Any] | None = None,
    ):
        super().__init__(message)
        self.kind: RefusalKind = kind
        self.detail: dict[str, Any] = (
            detail.model_dump(mode="json") if isinstance(detail, BaseModel) else detail or {}
        )

    def refusal(self) -> Refusal:
        return Refusal(kind=self.kind, message=str(self), detail=self.detail)


class UnavailableError(ResearchError):
    """What this server lacks to do it (a task's data): the message, for whoever called, names no path
    of the server and no flag of its command line; `detail["operator"]` says what the operator can do
    about it (paths shortened), for a program that speaks for the operator, such as our CLI."""

    def __init__(self, message: str, operator: str) -> None:
        super().__init__(message, kind="unavailable", detail=UnavailableDetail(operator=operator))


class RefusedError(ResearchError):
    """A request refused before anything ran (invalid params, an exact repeat, a rejected edit).

    It costs no budget, is logged as an event, and counts toward the consecutive-failure stop.
    """


class RepeatError(RefusedError):
    """The same params on the same artifact version already ran; carries the earlier experiment, and
    its detail (RepeatDetail) what an agent needs to say which value to change."""

    def __init__(self, message: str, earlier: Any, distinct: dict[str, int] | None = None) -> None:
        detail = RepeatDetail(iteration=earlier.iteration, params=earlier.params, distinct=distinct or {})
        super().__init__(message, kind="exact_repeat", detail=detail)
        self.earlier = earlier


def error_headline(tail: str) -> str:
    """The line of an error tail that says what went wrong: the first, joined with the next when the
    first only introduces it (`process_records raised an exception:` says nothing by itself)."""
    lines = [line.strip() for line in tail.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[-1] if lines[1].startswith('Traceback') else lines[1]}"
    return lines[0]
