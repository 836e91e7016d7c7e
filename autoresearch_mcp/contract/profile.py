"""Where a version of train.py spends its time: the profile the server measures and an agent reads.

Time by top-level function (sampled over whole calls, so the functions' shares are the calls' own), and
for the hottest function, time by line (traced line by line: the shares within it). Module-level code
counts as one function named `<module>`. A profile is advice for whoever optimises the code, taken
apart from the timed calls, never a verdict: the speedup is still the paired benchmark's.
"""

from pydantic import BaseModel, Field

MAX_FUNCTIONS = 64
MAX_LINES = 12


class FunctionTime(BaseModel):
    name: str = Field(max_length=200, description="the function (`<module>`: top-level code)")
    file: str = Field(max_length=200, description="the file it is in (train.py, or a task folder's file)")
    first_line: int = Field(ge=1)
    last_line: int = Field(ge=1)
    share: float = Field(ge=0, le=1, description="of the time sampled in the profiled files")
    ms: float = Field(ge=0, description="its time per call (codeopt) or per run of the command, sampled")


class LineTime(BaseModel):
    line: int = Field(ge=1, description="the line number in its file")
    share: float = Field(ge=0, le=1, description="of the hottest function's own time")
    text: str = Field(max_length=200, description="the line, without its indentation")


class Profile(BaseModel):
    """One version's profile (`sha256` says which: reverting to a version finds its profile again)."""

    sha256: str
    how: str = Field(description="what was profiled, e.g. 'calls on 10000 records, sampled'")
    functions: list[FunctionTime] = Field(
        default_factory=list, max_length=MAX_FUNCTIONS, description="hottest first"
    )
    hot: str | None = Field(default=None, description="the hottest function, whose lines are timed")
    lines: list[LineTime] = Field(
        default_factory=list, max_length=MAX_LINES, description="the hottest function's slowest lines"
    )
    other_share: float = Field(
        default=0.0, ge=0, le=1, description="the share of the run spent outside the profiled files"
    )


class ProfileResult(BaseModel):
    """What profile_train_py returns: the current version's profile, or why there is none."""

    run_id: str
    version: int
    profile: Profile | None = None
    note: str | None = Field(default=None, description="why there is no profile, when there is none")
