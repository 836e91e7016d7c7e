"""`autoresearch.toml`: what a task folder declares (a contract: docs/tasks.md documents every key).

A task folder is a user's own script plus this file. It is read by the server when an operator
registers the folder (`serve --task-dir PATH`, `run --task PATH`); a model only ever names the task.
Every mistake in the file is one message naming the file, the table and the key.
"""

import math
import os
import subprocess
import tomllib
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from autoresearch_mcp.contract.env import data_dir_path
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import JudgedBy, ScriptedPlan, StatelessWords
from autoresearch_mcp.server.tasks.folder.trust import (
    BenchmarkSection,
    EvaluateSection,
    benchmark_files,
    hidden_reads,
)

SPEC_FILE = "autoresearch.toml"
# Optional, beside it: words that replace some of those every task of its kind reads (AgentWords: the
# shipped tasks keep their stateless baselines' words there), and the scripted test double's plan.
AGENT_FILE = "agent.json"
SCRIPTED_FILE = "scripted.json"
_Model = TypeVar("_Model", bound=BaseModel)
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
METRIC_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.\-/]{0,63}$"
MAX_PARAMS = 64
MAX_EDIT_FILES = 8


class ParamSpec(BaseModel):
    """One tunable parameter: `[params.NAME]`."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["int", "float", "bool", "categorical"]
    low: float | None = Field(default=None, allow_inf_nan=False)
    high: float | None = Field(default=None, allow_inf_nan=False)
    log: bool = Field(default=False, description="search it on a log scale (low > 0)")
    default: Any = None
    choices: list[str | int | float | bool] | None = Field(default=None, min_length=1, max_length=100)
    description: str = Field(default="", max_length=300)

    @model_validator(mode="after")
    def _consistent(self) -> "ParamSpec":
        if self.type in ("int", "float"):
            if self.low is None or self.high is None:
                raise ValueError(f"a {self.type} param needs `low` and `high`")
            if not self.low < self.high:
                raise ValueError(f"`low` ({self.low:g}) must be below `high` ({self.high:g})")
            if self.log and self.low <= 0:
                raise ValueError("`log = true` needs `low` above 0")
            if self.type == "int" and not (float(self.low).is_integer() and float(self.high).is_integer()):
                raise ValueError("an int param's `low` and `high` are whole numbers")
            if self.choices is not None:
                raise ValueError(f"`choices` is for categorical params, not {self.type}")
            if self.default is None:
                self.default = _middle(self.low, self.high, self.log, self.type == "int")
            elif isinstance(self.default, bool) or not isinstance(self.default, int | float):
                raise ValueError(f"`default` must be a number, got {self.default!r}")
            elif not self.low <= self.default <= self.high:
                raise ValueError(f"`default` {self.default!r} is outside [{self.low:g}, {self.high:g}]")
            elif self.type == "int" and not float(self.default).is_integer():
                raise ValueError(f"an int param's `default` is a whole number, got {self.default!r}")
            if self.type == "int":
                self.default = int(self.default)
        elif self.type == "bool":
            if self.low is not None or self.high is not None or self.choices is not None or self.log:
                raise ValueError("a bool param takes only `default` and `description`")
            if self.default is None:
                self.default = False
            elif not isinstance(self.default, bool):
                raise ValueError(f"a bool param's `default` is true or false, got {self.default!r}")
        else:
            if not self.choices:
                raise ValueError("a categorical param needs `choices`")
            if self.low is not None or self.high is not None or self.log:
                raise ValueError("a categorical param takes `choices`, not `low`/`high`/`log`")
            if self.default is None:
                self.default = self.choices[0]
            elif self.default not in self.choices:
                raise ValueError(f"`default` {self.default!r} is not one of the choices")
        return self


def _middle(low: float, high: float, log: bool, whole: bool) -> float:
    value = math.sqrt(low * high) if log else (low + high) / 2
    return float(round(value)) if whole else value


RelativeFile = Annotated[str, Field(min_length=1, max_length=200)]


class TaskSection(BaseModel):
    """`[task]`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="what start_run takes")
    description: str = Field(default="", max_length=2000, description="shown to the model")
    command: list[Annotated[str, Field(min_length=1, max_length=1000)]] = Field(
        default_factory=list, max_length=64, description="what runs a version; none with [benchmark]"
    )
    metric: str = Field(pattern=METRIC_PATTERN, description="the script prints `metric: value`")
    direction: Literal["minimize", "maximize"]
    timeout_s: float = Field(default=600, gt=0, le=86_400)
    edit: list[RelativeFile] = Field(default_factory=lambda: ["train.py"], max_length=MAX_EDIT_FILES)
    reads: list[Annotated[str, Field(min_length=1, max_length=1000)]] = Field(
        default_factory=list, max_length=64
    )
    python: str | None = Field(default=None, description='the interpreter "python" means in command')
    work: Literal["params", "code"] | None = Field(
        default=None,
        description="params: the agent tunes [params] on the script as it is; code: it edits the `edit` "
        "files (and may still send params). Default: params when [params] exist, else code",
    )
    memory_mb: int = Field(default=4096, ge=64, le=1_048_576, description="address space per process")
    threads: int = Field(default=1, ge=1, le=256, description="OMP/BLAS threads the script may use")
    processes: bool = Field(
        default=False, description="the script may start processes of its own (subprocess, multiprocessing)"
    )
    profile: bool = Field(
        default=True,
        description="code work: each new version of the files runs once more under the profiler, so "
        "the model sees its hottest function (false: for a script whose run is long)",
    )

    @model_validator(mode="after")
    def _no_processes_needs_python(self) -> "TaskSection":
        # Without `processes`, a seccomp filter refuses new processes; only a Python interpreter can
        # install it before the script's first line (any other program would be refused its own exec).
        if self.command and not self.processes and self.command[0] not in ("python", self.python):
            raise ValueError(
                f"command: {self.command[0]!r} is not `python`, and only a Python command runs without new "
                "processes; declare `processes = true` if this program may start processes"
            )
        return self

    @model_validator(mode="after")
    def _files_stay_inside(self) -> "TaskSection":
        for file in self.edit:
            path = PurePosixPath(file)
            if path.is_absolute() or ".." in path.parts or file != str(path):
                raise ValueError(f"edit: {file!r} must be a plain path inside the folder")
        if len(set(self.edit)) != len(self.edit):
            raise ValueError("edit: a file is listed twice")
        return self


class FolderSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: TaskSection
    params: dict[str, ParamSpec] = Field(default_factory=dict, max_length=MAX_PARAMS)
    evaluate: EvaluateSection | None = None
    benchmark: BenchmarkSection | None = None

    @model_validator(mode="after")
    def _one_judge(self) -> "FolderSpec":
        if self.benchmark is None:
            return self
        if self.evaluate is not None:
            raise ValueError(
                "a folder has [evaluate] or [benchmark], not both: one of them decides its metric"
            )
        if (self.task.metric, self.task.direction) != ("speedup", "maximize"):
            raise ValueError(
                '[benchmark]: its metric is the speedup over the reference: metric = "speedup", '
                'direction = "maximize"'
            )
        if self.task.python is not None:
            raise ValueError(
                "[benchmark]: the function runs in the server's own interpreter; leave out `python`"
            )
        return self

    @model_validator(mode="after")
    def _param_names(self) -> "FolderSpec":
        for name in self.params:
            if not name.isidentifier():
                raise ValueError(f"params: {name!r} is not a valid name (letters, digits, underscores)")
        return self

    @model_validator(mode="after")
    def _something_runs(self) -> "FolderSpec":
        if not self.task.command and self.benchmark is None:
            raise ValueError("task.command: the command that runs the script is missing")
        return self

    @property
    def work(self) -> Literal["params", "code"]:
        return self.task.work or ("params" if self.params else "code")

    @property
    def judged_by(self) -> JudgedBy:
        if self.benchmark is not None:
            return "benchmark"
        if self.evaluate is not None:
            return "evaluator"
        return "script" if self.work == "params" else "self-reported"


class AgentWords(BaseModel):
    """agent.json: the fields of the task's words (server/system_prompt.py writes them for every task
    of its kind) that this folder replaces with its own; contract AgentProfile says what each holds."""

    model_config = ConfigDict(extra="forbid")
    system_prompt: str | None = None
    text_system_prompt: str | None = None
    tools: list[str] | None = None
    how: str | None = None
    fixed_arguments: dict[str, dict[str, Any]] | None = None
    dropped_arguments: dict[str, list[str]] | None = None
    tool_descriptions: dict[str, str] | None = None
    benchmark_after_edit: bool | None = None
    turn: str | None = None
    stateless: StatelessWords | None = None


class TaskFolder(BaseModel):
    """A registered folder: where it is, what it declares, and the files the agent may edit."""

    model_config = ConfigDict(frozen=True)

    path: Path
    spec: FolderSpec
    reads: tuple[Path, ...] = Field(description="the declared extra read paths, absolute")
    originals: tuple[tuple[str, str], ...] = Field(description="(file, source) of each `edit` file")
    hidden: tuple[Path, ...] = Field(default=(), description="[evaluate]'s reads: the evaluator's alone")
    agent: AgentWords | None = Field(default=None, description="agent.json: the words it replaces, if any")
    scripted: ScriptedPlan | None = Field(default=None, description="scripted.json: the double's plan")

    def modules(self) -> frozenset[str]:
        """The names the script can import from its own folder: `prepare` for prepare.py, a package
        for a directory with an __init__.py."""
        try:
            entries = list(self.path.iterdir())
        except OSError:
            return frozenset()
        return frozenset(
            entry.stem if entry.suffix == ".py" else entry.name
            for entry in entries
            if (entry.suffix == ".py" and entry.is_file()) or (entry / "__init__.py").is_file()
        )


def load_folder(folder: Path | str, store: Path | None = None) -> TaskFolder:
    """Read and check a task folder, or raise one ResearchError that says what to fix where. `store`:
    the server's database, which no declared read may hold (nor its data directory, its user's home or
    the root, wherever the database is)."""
    path = Path(folder).expanduser().resolve()
    toml = path / SPEC_FILE
    if not path.is_dir():
        raise ResearchError(f"task folder {path}: not a directory", kind="unknown_task")
    if not toml.is_file():
        raise ResearchError(
            f"task folder {path}: no {SPEC_FILE} in it (`autoresearch-mcp init {path}` writes one)",
            kind="unknown_task",
        )
    try:
        raw = tomllib.loads(toml.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ResearchError(f"{toml}: {exc}", kind="bad_argument") from None
    try:
        spec = FolderSpec.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'top level'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise ResearchError(f"{toml}: {problems}", kind="bad_argument") from None
    python = spec.task.python
    if python is not None:
        _check_interpreter(toml, python)
    originals = []
    for file in spec.task.edit:
        source_path = path / file
        _check_own_file(toml, path, file)
        if not source_path.is_file():
            if spec.work == "code" or file != "train.py" or "edit" in raw.get("task", {}):
                raise ResearchError(f"{toml}: edit: no file {file!r} in {path}", kind="bad_argument")
            continue  # a params task whose script has another name keeps the default `edit` unused
        try:
            originals.append((file, source_path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise ResearchError(f"{toml}: edit: {file} cannot be read as text ({exc})") from None
    if spec.work == "code" and not originals:
        raise ResearchError(f'{toml}: work = "code" needs a file to edit (`edit`)', kind="bad_argument")
    reads = tuple(
        (path / entry).resolve() if not Path(entry).is_absolute() else Path(entry)
        for entry in spec.task.reads
    )
    for entry, read in zip(spec.task.reads, reads, strict=True):
        _check_read(toml, entry, read, store)
    if spec.benchmark is not None:
        benchmark_files(toml, path, spec.benchmark, spec.task.edit)
    hidden: tuple[Path, ...] = ()
    if spec.evaluate is not None:
        hidden = hidden_reads(toml, path, spec.evaluate, spec.task.edit, reads)
        for entry, read in zip(spec.evaluate.reads, hidden, strict=True):
            _check_read(toml, entry, read, store)
    return TaskFolder(
        path=path,
        spec=spec,
        reads=reads,
        originals=tuple(originals),
        hidden=hidden,
        agent=_optional_json(path / AGENT_FILE, AgentWords),
        scripted=_optional_json(path / SCRIPTED_FILE, ScriptedPlan),
    )


def _optional_json(path: Path, model: type[_Model]) -> _Model | None:
    """agent.json or scripted.json, if the folder has it; refused in one line when malformed."""
    if not path.is_file():
        return None
    try:
        return model.model_validate_json(path.read_bytes())
    except (OSError, ValidationError) as exc:
        problem = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = ".".join(str(p) for p in problem["loc"]) + ": " + problem["msg"] if problem else str(exc)
        raise ResearchError(f"{path}: {where}", kind="bad_argument") from None


# Run by a folder's `python` when the folder loads: a Python 3 that can run the boot the sandbox puts in
# front of the script (server/tasks/folder/child.py: seccomp.py's source needs 3.9).
_PROBE = "import sys; print('python', *sys.version_info[:2])"
PROBE_TIMEOUT_S = 10.0
OLDEST_PYTHON = (3, 9)


def _check_interpreter(toml: Path, python: str) -> None:
    """`python` runs as a Python interpreter, checked once with a tiny probe (found here, not as every
    experiment's crash, each one a unit of budget spent)."""
    fix = (
        "give the absolute path of a Python interpreter (3.9 or newer) the command's `python` means "
        "(e.g. /home/me/venv/bin/python), or leave it out for the server's"
    )
    if not (Path(python).is_absolute() and os.path.isfile(python) and os.access(python, os.X_OK)):
        raise ResearchError(f"{toml}: python: {python} is not an executable file; {fix}", kind="bad_argument")
    try:
        probe = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        words = probe.stdout.decode("ascii", "replace").split()
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = (
            f"it did not answer within {PROBE_TIMEOUT_S:g} s"
            if isinstance(exc, subprocess.TimeoutExpired)
            else str(exc)
        )
        raise ResearchError(
            f"{toml}: python: {python} is not a Python interpreter ({problem}); {fix}", kind="bad_argument"
        ) from None
    version = tuple(int(w) for w in words[1:3] if w.isdigit())
    if probe.returncode != 0 or words[:1] != ["python"] or len(version) != 2:
        raise ResearchError(
            f"{toml}: python: {python} is not a Python interpreter (it could not run `{_PROBE}`); {fix}",
            kind="bad_argument",
        )
    if version < OLDEST_PYTHON:
        raise ResearchError(
            f"{toml}: python: {python} is Python {version[0]}.{version[1]}; {fix}", kind="bad_argument"
        )


def _check_own_file(toml: Path, folder: Path, file: str) -> None:
    """An `edit` file is the folder's own: no link on the way to it, and inside the folder once resolved
    (an edit shown to the model, and written back by `apply`, would otherwise be a file elsewhere)."""
    place = folder
    for part in PurePosixPath(file).parts:
        place = place / part
        if place.is_symlink():
            raise ResearchError(
                f"{toml}: edit: {file!r} goes through the link {place.relative_to(folder)}; list the folder's "
                "own files, not links (copy the file into the folder)",
                kind="bad_argument",
            )
    if not Path(os.path.realpath(folder / file)).is_relative_to(folder):
        raise ResearchError(f"{toml}: edit: {file!r} resolves outside the folder", kind="bad_argument")


def _check_read(toml: Path, entry: str, read: Path, store: Path | None) -> None:
    """A declared read holds none of the places no script may read: the root, the home directory of the
    server's user, the server's data directory (its default database, transcripts) or its database."""
    real = Path(os.path.realpath(read))
    places = {
        "the root of the file system": Path("/"),
        "the server's home directory": Path.home(),
        "the server's data directory": data_dir_path(),
    }
    if store is not None:
        places["the server's database"] = store
    for what, place in places.items():
        if Path(os.path.realpath(place)).is_relative_to(real):
            raise ResearchError(
                f"{toml}: reads: {entry!r} holds {what} ({place}); declare the files or directories the "
                "script reads, below it",
                kind="bad_argument",
            )
