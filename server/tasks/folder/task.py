"""A task folder as a Task: the user's script, run as it is, scored by the metric line it prints.

The folder's `edit` files are the artifact (train.py's place: versioned, edited with modify_train_py);
the `[params]` table is the params model (sent to the script as JSON in AUTORESEARCH_PARAMS). Each
experiment runs the folder's command in the sandbox (child.py beside this file) with the run's version
of the files and the folder's other entries beside them; the script's stdout is parsed here, in the
server: its last `metric: value` line is the metric, every other `name: number` line a secondary
metric. The user's folder is never written: the script runs in a fresh working directory.
"""

import hashlib
import json
import math
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from autoresearch_mcp.contract import files as artifact
from autoresearch_mcp.contract.models import AgentProfile, JudgedBy, ScriptedPlan
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.store import Incumbent
from autoresearch_mcp.server.system_prompt import TaskFacts
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task, Verdict, sandbox_failure
from autoresearch_mcp.server.tasks.folder import benchmark
from autoresearch_mcp.server.tasks.folder.spec import AGENT_FILE, FolderSpec, TaskFolder, load_folder
from autoresearch_mcp.server.tasks.folder.trust import package_read
from autoresearch_mcp.server.tasks.intervals import LEVEL
from autoresearch_mcp.server.tasks.profiles import build_profile, exception_line, failing_line
from autoresearch_mcp.server.tasks.speed import speed_verdict

ENTRY = "autoresearch_mcp.server.tasks.folder.child:run_command"
MAX_ARTIFACT_BYTES = 1_000_000
MAX_METRICS = 64
# `name: number` (or `name = number`), alone on its line; the number may be nan or inf, which makes
# the main metric a crash and drops a secondary one.
METRIC_LINE = re.compile(
    r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_.\-/]{0,63})\s*[:=]\s*"
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf|infinity))\s*$",
    re.IGNORECASE,
)
HARNESS_MARGIN_S = 15.0  # the harness's own work around the script, inside the runner's wall limit
MAX_FILES = 100_000  # entries a script may create in its working directory, beside the folder laid out


def params_model(spec: FolderSpec) -> type[BaseModel]:
    """The `[params]` table as a pydantic model that refuses unknown names and out-of-range values."""
    fields: dict[str, Any] = {}
    for name, param in spec.params.items():
        if param.type == "categorical":
            annotation: Any = Literal[tuple(param.choices or ())]  # type: ignore[misc]
            field = Field(default=param.default, description=param.description or None)
        elif param.type == "bool":
            annotation, field = bool, Field(default=param.default, description=param.description or None)
        else:
            annotation = int if param.type == "int" else float
            low, high = (
                (int(param.low or 0), int(param.high or 0))
                if param.type == "int"
                else (param.low, param.high)
            )
            field = Field(
                default=param.default,
                ge=low,
                le=high,
                description=param.description or None,
                allow_inf_nan=False,
                # searched on a log scale: said in the words a model reads (params_help) and the schema
                json_schema_extra={"scale": "log"} if param.log else None,
            )
        fields[name] = (annotation, field)
    # Titled by the task: the schema's title is what a host's model reads, not our class's name.
    config = ConfigDict(extra="forbid", title=f"{spec.task.name} params")
    return create_model("FolderParams", __config__=config, **fields)


def parse_metrics(
    stdout: str, metric: str, who: str = "the script"
) -> tuple[float | None, dict[str, float], str | None]:
    """The metric (the last line naming it), the secondary metrics (the last value of each other name),
    and what is wrong with the metric when it cannot be recorded (`who` printed it)."""
    values: dict[str, float] = {}
    for line in stdout.splitlines():
        match = METRIC_LINE.match(line)
        if match:
            values.pop(match["name"], None)  # re-inserted: the order is that of the last occurrence
            values[match["name"]] = float(match["value"])
    main = values.pop(metric, None)
    secondary = {k: v for k, v in values.items() if math.isfinite(v)}
    secondary = dict(list(secondary.items())[-(MAX_METRICS - 1) :])
    if main is None:
        return None, secondary, f"{who} printed no `{metric}: <number>` line on stdout"
    if not math.isfinite(main):
        return None, secondary, f"{who} printed `{metric}: {main}`, which is not a finite number"
    return main, secondary, None


class FolderTask(Task):
    """One per registered folder (a subclass made by `folder_task_class`, so each has its own name,
    metric and params model, as the built-in tasks do)."""

    folder: Path
    store: Path | None = None  # the server's database, which no declared read may hold
    sandbox_entries = (ENTRY, benchmark.ENTRY)

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings

    @property
    def loaded(self) -> TaskFolder:
        return _load(self.folder, self.store)

    @property  # type: ignore[override]
    def judged_by(self) -> JudgedBy:  # as the folder says now: an [evaluate] may be added meanwhile
        return self.loaded.spec.judged_by

    def options(self) -> dict[str, Any]:
        task, evaluate = self.loaded.spec.task, self.loaded.spec.evaluate
        # Code work: the profiled run after the first; a [benchmark]'s calls share its one time limit.
        runs = 2 if self.loaded.spec.work == "code" and self.loaded.spec.benchmark is None else 1
        judging = evaluate.timeout_s if evaluate is not None else 0.0
        limits = Limits(
            wall_s=runs * task.timeout_s + judging + HARNESS_MARGIN_S,
            cpu_s=(runs * task.timeout_s + judging) * task.threads + HARNESS_MARGIN_S,
            memory_mb=task.memory_mb,
            threads=task.threads,
            output_bytes=64_000,
            file_mb=1024,
            disk_mb=4096,
            max_files=MAX_FILES,
            processes=64 + 4 * task.threads,
            new_processes=task.processes,
        )
        # No absolute path: list_runs and the views show options to models.
        return {
            "command": task.command,
            "work": self.loaded.spec.work,
            "files": self.editable(),  # what `apply` writes back, even where the folder is not registered
            "limits": limits.model_dump(),
        }

    def initial_artifact(self) -> str:
        originals = list(self.loaded.originals)
        return artifact.pack(originals) if originals else ""

    def editable(self) -> list[str]:
        return [name for name, _ in self.loaded.originals]

    def check_artifact(self, source: str) -> list[str]:
        names = self.editable()
        if not names:
            return [f"{self.name} declares no file the agent may edit (`edit` in its autoresearch.toml)"]
        if len(source.encode()) > MAX_ARTIFACT_BYTES:
            return [f"the files are at most {MAX_ARTIFACT_BYTES // 1000} KB together"]
        try:
            files = artifact.unpack(source, names)
        except ValueError as exc:
            return [str(exc)]
        problems = []
        for name, text in files.items():
            if name.endswith(".py"):
                try:
                    compile(text, name, "exec")
                except SyntaxError as exc:
                    problems.append(f"{name} line {exc.lineno}: {exc.msg}")
        return problems

    def describe(self) -> str:
        spec = self.loaded.spec
        better = "lower" if self.direction == "min" else "higher"
        what = " ".join(spec.task.description.split()).rstrip(".") or self.title
        text = f"{what}. Metric: {self.metric} ({better} is better)."
        if spec.work == "code":
            text += f" You may edit: {', '.join(self.editable())}."
        return text

    def time_limit_s(self, options: dict[str, Any]) -> float:
        """The folder's `timeout_s`: a script past it is stopped (the sandbox's limit adds a margin)."""
        return float(self.loaded.spec.task.timeout_s)

    def facts(self) -> TaskFacts:
        spec = self.loaded.spec
        return (
            super()
            .facts()
            ._replace(
                description=spec.task.description or self.title,
                profiled=spec.work == "code" and spec.task.profile,
            )
        )

    def agent_profile(self) -> AgentProfile:
        words = super().agent_profile()
        replaced = self.loaded.agent
        if replaced is None:
            return words
        return words.model_copy(update={name: getattr(replaced, name) for name in replaced.model_fields_set})

    def log_scaled(self) -> frozenset[str]:
        return frozenset(name for name, p in self.loaded.spec.params.items() if p.log)

    def scripted_plan(self) -> ScriptedPlan:
        if self.loaded.scripted is not None:
            return self.loaded.scripted
        spec = self.loaded.spec
        prior = {
            name: (float(p.low), float(p.high))
            for name, p in spec.params.items()
            if p.low is not None and p.high is not None
        }
        return ScriptedPlan(prior=prior, log_scale=[name for name, p in spec.params.items() if p.log])

    def _payload(self, params: BaseModel, source: str, ctx: ExecContext) -> dict[str, Any]:
        loaded = self.loaded
        task = loaded.spec.task
        files = artifact.unpack(source, self.editable()) if self.editable() else {}
        python = task.python or sys.executable
        return {
            "folder_path": str(loaded.path),
            "files": files,
            "command": [python if part == "python" else part for part in task.command],
            "python_path": python,
            # As declared (where a relative one is placed beside the script) and resolved (what is read).
            "reads": [[entry, str(path)] for entry, path in zip(task.reads, loaded.reads, strict=True)],
            "params": json.dumps(params.model_dump()),
            "seed": ctx.seed,
            "timeout_s": task.timeout_s,
            "processes": task.processes,
            # A second run under the profiler, after a run that ended well: once per text of the files.
            "profile": loaded.spec.work == "code" and task.profile and not ctx.profiled,
            "evaluate": self._evaluate_payload(python),
        }

    def _evaluate_payload(self, python: str) -> dict[str, Any] | None:
        evaluate = self.loaded.spec.evaluate
        if evaluate is None:
            return None
        reads = zip(evaluate.reads, self.loaded.hidden, strict=True)
        return {
            "command": [python if part == "python" else part for part in evaluate.command],
            # Laid out beside the evaluator as the script's reads are; a package's file stays where it is.
            "reads": [[entry, str(path)] for entry, path in reads if package_read(entry) is None],
            "hidden": [str(path) for path in self.loaded.hidden],  # what no process of the script may read
            "outputs": evaluate.outputs,
            "timeout_s": evaluate.timeout_s,
        }

    def verdict(self, outcome: Outcome, best: Incumbent | None) -> Verdict:
        """A [benchmark] folder keeps a version only when it is surely faster (speed.py); any other
        folder, when its metric is better."""
        timed = self.loaded.spec.benchmark is not None and outcome.metric is not None
        if timed and (said := speed_verdict(outcome, best, LEVEL)) is not None:
            return said
        return super().verdict(outcome, best)

    def execute(self, params: BaseModel, source: str, ctx: ExecContext) -> Outcome:
        if self.loaded.spec.benchmark is not None:
            return benchmark.execute(self.loaded, self.editable(), source, ctx)
        task = self.loaded.spec.task
        result = run_sandboxed(ENTRY, self._payload(params, source, ctx), ctx.limits())
        if result.status != "ok" or result.result is None:
            return sandbox_failure(result)
        report = ScriptReport.model_validate(result.result)
        if report.timed_out:
            return Outcome(
                status="timeout",
                error_tail=f"the script ran past its timeout_s of {task.timeout_s:g} s\n{report.stderr_tail}",
            )
        if report.returncode != 0:
            at = failing_line(report.stderr_tail, tuple(self.editable()))
            raised = exception_line(report.stderr_tail, self.loaded.modules())
            if raised and raised.startswith("ModuleNotFoundError"):
                raised += interpreter_hint(task.python)
            return Outcome(
                status="crash",
                error_tail=f"the script exited with status {report.returncode}"
                + (f" at {at}" if at else "")
                + (f": {raised}" if raised else "")
                + f"\n{report.stderr_tail}",
            )
        if self.loaded.spec.evaluate is not None:
            return self._judged(report, source)
        metric, secondary, problem = parse_metrics(report.stdout_tail, self.metric)
        if problem is not None or metric is None:
            return Outcome(status="crash", error_tail=f"{problem}\n{report.stderr_tail}".strip())
        return Outcome(
            status="ok",
            metrics={self.metric: metric, **secondary},
            metric=metric,
            profile=self._profile_of(source, report.profile),
        )

    def _judged(self, report: "ScriptReport", source: str) -> Outcome:
        """The evaluator's verdict on a run that ended well: its metric line decides; what the script
        printed is kept beside it as `reported.NAME`, and decides nothing."""
        evaluation = report.evaluation
        if evaluation is None:
            return Outcome(status="crash", error_tail="the harness ran no evaluator for this run")
        if evaluation.missing is not None:
            return Outcome(status="crash", error_tail=f"{evaluation.missing}\n{report.stderr_tail}".strip())
        timeout = self.loaded.spec.evaluate.timeout_s if self.loaded.spec.evaluate else 0
        if evaluation.timed_out:
            return Outcome(
                status="crash", error_tail=f"the evaluator ran past its timeout_s of {timeout:g} s"
            )
        if evaluation.returncode != 0:
            return Outcome(
                status="crash",
                error_tail=f"the evaluator exited with status {evaluation.returncode}\n{evaluation.stderr_tail}",
            )
        metric, secondary, problem = parse_metrics(evaluation.stdout_tail, self.metric, "the evaluator")
        if problem is not None or metric is None:
            return Outcome(status="crash", error_tail=f"{problem}\n{evaluation.stderr_tail}".strip())
        said, others, _ = parse_metrics(report.stdout_tail, self.metric)
        reported = {**({self.metric: said} if said is not None else {}), **others}
        metrics = {self.metric: metric, **secondary}
        for name, value in reported.items():
            if len(metrics) < MAX_METRICS and len(f"reported.{name}") <= 64:
                metrics[f"reported.{name}"] = value
        return Outcome(
            status="ok", metrics=metrics, metric=metric, profile=self._profile_of(source, report.profile)
        )

    def profile(self, params: BaseModel, source: str, ctx: ExecContext) -> Profile | None:
        if not self.loaded.spec.task.profile:  # the folder said no: profile_train_py has none either
            return None
        if self.loaded.spec.benchmark is not None:
            return benchmark.profile(self.loaded, self.editable(), source, ctx)
        payload = {**self._payload(params, source, ctx), "profile": True, "profile_only": True}
        result = run_sandboxed(ENTRY, payload, ctx.limits())
        if result.status != "ok" or result.result is None:
            return None
        return self._profile_of(source, ScriptReport.model_validate(result.result).profile)

    def _profile_of(self, source: str, measured: dict[str, Any] | None) -> Profile | None:
        if not measured:
            return None
        command = " ".join(self.loaded.spec.task.command)
        how = f"one run of `{command}`, sampled; the files' lines traced"
        try:
            return build_profile(
                source, self.editable(), hashlib.sha256(source.encode()).hexdigest(), measured, how
            )
        except ValueError:  # a malformed profile (ValidationError): the experiment stands without it
            return None


def interpreter_hint(python: str | None) -> str:
    """What a missing module means for a folder: which interpreter ran the script, and the key that
    names another. Without `python =`, the script runs on the interpreter autoresearch-mcp itself runs
    on, which rarely has the user's own packages."""
    if python is None:
        return (
            " (the script runs on the Python that autoresearch-mcp runs on: install the module there, or "
            "set `python` in autoresearch.toml's [task] to the absolute path of your own environment's "
            "python)"
        )
    return (
        " (the script runs on the interpreter that autoresearch.toml names in `python =`: install it there)"
    )


class EvaluationReport(BaseModel):
    """What the harness reports of the evaluator's run, or why it could not run (`missing`)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    missing: str | None = Field(default=None, max_length=2000)
    returncode: int = 0
    timed_out: bool = False
    stdout_tail: str = Field(default="", max_length=70_000)
    stderr_tail: str = Field(default="", max_length=10_000)


class ScriptReport(BaseModel):
    """What the sandboxed harness reports of one run of the script (and of the evaluator after it)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    returncode: int = 0
    timed_out: bool = False
    stdout_tail: str = Field(default="", max_length=70_000)
    stderr_tail: str = Field(default="", max_length=10_000)
    profile: dict[str, Any] | None = None  # checked by profiles.build_profile
    evaluation: EvaluationReport | None = None


@lru_cache(maxsize=64)
def _load_cached(path: Path, store: Path | None, stamp: tuple[float, ...]) -> TaskFolder:
    return load_folder(path, store)


def _load(path: Path, store: Path | None) -> TaskFolder:
    """The folder as it is now: read again when its autoresearch.toml, agent.json or an edit file changed."""
    loaded = _load_cached(path, store, _stamp(path, ()))
    return _load_cached(path, store, _stamp(path, [name for name, _ in loaded.originals]))


def _stamp(path: Path, files: list[str]) -> tuple[float, ...]:
    stamps = []
    for name in ("autoresearch.toml", AGENT_FILE, *files):
        try:
            stamps.append((path / name).stat().st_mtime)
        except OSError:
            stamps.append(-1.0)
    return tuple(stamps)


def folder_task_class(folder: Path | str, store: Path | None = None) -> type[FolderTask]:
    """A Task class for the folder (its autoresearch.toml is read and checked here, against the server's
    database `store`)."""
    loaded = load_folder(folder, store)
    spec = loaded.spec
    title = spec.task.description.split(". ")[0].strip().rstrip(".") or f"Your task {spec.task.name}"
    return type(
        f"FolderTask_{spec.task.name.replace('-', '_').replace('.', '_')}",
        (FolderTask,),
        {
            "name": spec.task.name,
            "title": title[:200],
            "metric": spec.task.metric,
            "direction": "min" if spec.task.direction == "minimize" else "max",
            "params_model": params_model(spec),
            "experiment_tool": "run_experiment" if spec.work == "params" else "run_benchmark",
            "folder": loaded.path,
            "store": store,
            "sandbox_entries": (),  # admitted once, by FolderTask itself
        },
    )
