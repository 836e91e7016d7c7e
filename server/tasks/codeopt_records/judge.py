"""codeopt-records' verdict on what its harness reported: the report's shape, the outputs checked
against the trusted twin (the first difference, on the small check or on a timed call), the speedup
over the reference and against the current best, each paired call by call."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from autoresearch_mcp.server.tasks.base import Outcome
from autoresearch_mcp.server.tasks.codeopt_records.records import (
    make_records,
    process_records_fast,
)
from autoresearch_mcp.server.tasks.outputs import first_difference
from autoresearch_mcp.server.tasks.speed import MAX_CALLS, Timings, speed_outcome

# Every candidate runs once on this many records before anything is timed: a wrong version fails in
# milliseconds, with the first difference on an input small enough to reason about.
CHECK_RECORDS = 200


class Calls(Timings):
    """What the harness measured: each call's time (speed.Timings) and the candidate's outputs."""

    outputs: list[Any] = Field(min_length=1, max_length=MAX_CALLS)
    profile: dict[str, Any] | None = None  # checked by profiles.build_profile


class Failure(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    error: Literal["load", "raised", "type", "protocol", "harness"]
    detail: str = Field(max_length=4000)


class Wrong(BaseModel):
    """The small check's output, which the harness found wrong; judged again here."""

    model_config = ConfigDict(extra="forbid", strict=True)
    error: Literal["wrong"]
    detail: str = Field(max_length=4000)
    n: int = Field(ge=0, le=CHECK_RECORDS)
    seed: int
    output: Any


REPORT = TypeAdapter(Calls | Failure | Wrong)
FAILURES = {
    "load": "train.py failed to load",
    "raised": "process_records raised an exception",
    "protocol": "process_records' process broke the harness's protocol",
    "harness": "the benchmark harness refused the result",
}


def wrong_on_check(report: Wrong) -> Outcome:
    """The small check's output, judged here against the trusted twin: the first difference."""
    difference = first_difference(process_records_fast(make_records(report.n, report.seed)), report.output)
    if difference is None:  # the harness stops early only on a difference; this is not one
        return Outcome(status="crash", error_tail="the benchmark harness stopped on a correct output")
    where = f"the first check, on make_records({report.n}, seed={report.seed})"
    return Outcome(
        status="incorrect", metrics={"correct": 0.0}, error_tail=f"wrong output ({where}): {difference}"
    )


def judge(calls: Calls, seeds: list[int], n: int) -> Outcome:
    if len(calls.outputs) != len(seeds):
        return Outcome(status="crash", error_tail="the benchmark harness returned an incomplete result")
    for call, (seed, output) in enumerate(zip(seeds, calls.outputs, strict=True), start=1):
        difference = first_difference(process_records_fast(make_records(n, seed)), output)
        if difference:
            where = f"call {call} of {len(seeds)}, input make_records({n}, seed={seed})"
            return Outcome(
                status="incorrect",
                metrics={"correct": 0.0},
                error_tail=f"wrong output ({where}): {difference}",
            )
    return speed_outcome(calls, len(seeds))
