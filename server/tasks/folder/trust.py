"""Who decides a task folder's metric: `[evaluate]` or `[benchmark]`, trusted steps the candidate
cannot touch.

Without it the metric is the last `metric: value` line the edited script prints: self-reported, and said
so wherever a run is shown. With it, the folder's own evaluator (never a version the agent wrote) runs
after every process of the candidate has ended, in a fresh directory holding copies of the declared
`outputs`, and may read the `reads` no candidate process can open; its line alone decides.

```toml
[evaluate]
command = ["python", "evaluate.py"]   # read from the user's folder, never from the candidate's work dir
reads = ["secret/"]                    # only the evaluator may read these
outputs = ["predictions.csv"]          # what the candidate's run must leave for it
```

A speed task declares `[benchmark]` instead: the harness times the candidate's function beside the
reference's, on fresh inputs it never sees, and checks its output; the metric is the speedup.

```toml
[benchmark]
function = "slow.py:pairwise_close"    # the function a version is timed on (its file is in `edit`)
inputs = "bench.py:make_input"         # make_input(seed) -> the call's arguments, from your own file
# reference = "slow.py:pairwise_close" # default: the same function as your folder's file has it
# check = "bench.py:same"              # same(expected, got) -> None, or what differs; default: equal
# calls = 20                           # timed calls, each on a fresh input, after one untimed
```
"""

import importlib.util
import os
import re
from pathlib import Path, PurePosixPath
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from autoresearch_mcp.contract.errors import ResearchError

MAX_OUTPUTS = 16


def plain_relative(name: str, what: str) -> str:
    """`name` as a plain relative path (no `..`, not absolute, normalised), or a ValueError."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or name != str(path):
        raise ValueError(f"{what}: {name!r} must be a plain relative path")
    return name


class EvaluateSection(BaseModel):
    """`[evaluate]`: the command that decides the metric, what only it may read, and what it reads of
    the candidate's run."""

    model_config = ConfigDict(extra="forbid")

    command: list[Annotated[str, Field(min_length=1, max_length=1000)]] = Field(min_length=1, max_length=64)
    reads: list[Annotated[str, Field(min_length=1, max_length=1000)]] = Field(
        default_factory=list,
        max_length=64,
        description="paths only the evaluator may read: relative to the folder, absolute, or "
        "`package:path` inside an installed package",
    )
    outputs: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        max_length=MAX_OUTPUTS,
        description="files the candidate's run leaves in the script's directory for the evaluator",
    )
    timeout_s: float = Field(default=120, gt=0, le=86_400)

    @field_validator("outputs")
    @classmethod
    def _outputs_stay_inside(cls, outputs: list[str]) -> list[str]:
        if len(set(outputs)) != len(outputs):
            raise ValueError("an output is listed twice")
        return [plain_relative(name, "outputs") for name in outputs]


FunctionName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_./-]+\.py:[A-Za-z_][A-Za-z0-9_]*$", max_length=200)]


class BenchmarkSection(BaseModel):
    """`[benchmark]`: the function a version is timed on, and the folder's own code that makes its
    inputs, gives the reference and checks the output (each `file.py:name`)."""

    model_config = ConfigDict(extra="forbid")

    function: FunctionName
    inputs: FunctionName
    reference: FunctionName | None = Field(
        default=None, description="default: `function` as the folder has it"
    )
    check: FunctionName | None = None
    calls: int = Field(default=20, ge=2, le=200, description="timed calls, each on a fresh input")

    @field_validator("function", "inputs", "reference", "check")
    @classmethod
    def _file_inside(cls, value: str | None) -> str | None:
        if value is not None:
            plain_relative(value.partition(":")[0], "a [benchmark] file")
        return value

    @property
    def reference_of(self) -> str:
        return self.reference or self.function


def benchmark_files(toml: Path, folder: Path, benchmark: BenchmarkSection, edit: list[str]) -> None:
    """The function's file is one the agent edits; what makes the inputs, the reference and the check
    is the folder's own, which it does not: refused in one line otherwise."""
    function_file = benchmark.function.partition(":")[0]
    if function_file not in edit:
        raise ResearchError(
            f"{toml}: benchmark.function: {function_file} is not in `edit`: the agent must be able to change "
            "the function it is timed on",
            kind="bad_argument",
        )
    for key in ("inputs", "reference", "check"):
        value = getattr(benchmark, key) if key != "reference" else benchmark.reference
        if value is None:
            continue
        file = value.partition(":")[0]
        if file in edit:
            raise ResearchError(
                f"{toml}: benchmark.{key}: {file} is in `edit`: the agent may not edit what makes the inputs, "
                "the reference or the check",
                kind="bad_argument",
            )
        if not (folder / file).is_file():
            raise ResearchError(f"{toml}: benchmark.{key}: no file {file} in {folder}", kind="bad_argument")


# `sklearn:datasets/data/digits.csv.gz`: a path inside an installed package, wherever it is installed.
PACKAGE_READ = re.compile(r"^(?P<package>[A-Za-z_][A-Za-z0-9_]*):(?P<path>[^:]+)$")


def package_read(entry: str) -> tuple[str, str] | None:
    """(package, path inside it) for an entry that names a path in an installed package, else None."""
    found = PACKAGE_READ.match(entry)
    return None if found is None else (found["package"], found["path"])


def resolved_read(toml: Path, folder: Path, entry: str) -> Path:
    """An `[evaluate]` read, absolute: relative to the folder, absolute, or inside an installed package of
    the server's interpreter (`package:path`: a public copy of the data the evaluator holds out, which
    the candidate could otherwise look its answers up in)."""
    named = package_read(entry)
    if named is None:
        return Path(os.path.realpath(folder / entry if not Path(entry).is_absolute() else entry))
    package, inside = named
    spec = importlib.util.find_spec(package)
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if not places:
        raise ResearchError(
            f"{toml}: evaluate.reads: {entry!r}: no installed package {package!r} holds it",
            kind="bad_argument",
        )
    try:
        inside = plain_relative(inside, "evaluate.reads")
    except ValueError as exc:
        raise ResearchError(f"{toml}: {exc}", kind="bad_argument") from None
    return Path(os.path.realpath(Path(places[0]) / inside))


def hidden_reads(
    toml: Path, folder: Path, evaluate: EvaluateSection, edit: list[str], reads: tuple[Path, ...]
) -> tuple[Path, ...]:
    """`[evaluate]`'s reads, absolute; refused in one line where a candidate could reach what decides
    its metric: a read the script declares too (or one inside another), an `edit` file that is the
    evaluator's own or lies in its reads, or a read that does not exist."""
    hidden = tuple(resolved_read(toml, folder, entry) for entry in evaluate.reads)
    for entry, path in zip(evaluate.reads, hidden, strict=True):
        if not os.path.lexists(path):
            raise ResearchError(
                f"{toml}: evaluate.reads: {entry!r}: no such file or directory", kind="bad_argument"
            )
        for read in reads:
            real = Path(os.path.realpath(read))
            if real.is_relative_to(path) or path.is_relative_to(real):
                raise ResearchError(
                    f"{toml}: evaluate.reads: {entry!r} overlaps the script's reads ({read}): what only the "
                    "evaluator may read cannot be the script's too",
                    kind="bad_argument",
                )
    own = {Path(os.path.realpath(folder / arg)) for arg in evaluate.command[1:] if (folder / arg).is_file()}
    for file in edit:
        real = Path(os.path.realpath(folder / file))
        if real in own or any(real.is_relative_to(path) for path in hidden):
            raise ResearchError(
                f"{toml}: edit: {file!r} is the evaluator's (its command or its reads): the agent may not "
                "edit what decides its metric",
                kind="bad_argument",
            )
    return hidden
