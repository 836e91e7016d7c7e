"""The task registry. The built-in tasks are task folders shipped in the package (builtin/); a plugin
adds one with `register`; other task folders come from the server's settings (`task_dirs`), so each
server knows its own."""

import importlib
import logging
import os
from collections.abc import Callable, Set
from functools import cache
from importlib.metadata import entry_points
from importlib.resources import files
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.env import ENV_TASK_PLUGINS, data_dir_path
from autoresearch_mcp.contract.errors import ResearchError, UnavailableError
from autoresearch_mcp.contract.models import Run, TaskInfo
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.tasks.base import Task, TaskSettings
from autoresearch_mcp.server.tasks.recorded import recorded_task
from autoresearch_mcp.server.text import scrub_paths

TaskFactory = Callable[[dict[str, Any]], Task]
BUILTIN = Path(str(files(__package__) / "builtin"))  # the shipped task folders, one per task
_REGISTRY: dict[str, TaskFactory] = {}
log = logging.getLogger(__name__)
_loaded = False


def register(name: str, factory: TaskFactory) -> None:
    """Make a task available to start_run. The factory gets the server's task settings."""
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def task_names(settings: dict[str, Any] | None = None) -> list[str]:
    _load_builtins()
    return sorted({*_REGISTRY, *_folders(settings)})


def make_task(name: str, settings: dict[str, Any]) -> Task:
    _load_builtins()
    factory = _REGISTRY.get(name) or _folders(settings).get(name)
    if factory is None:
        raise ResearchError(
            f"unknown task {name!r}; available tasks: {', '.join(task_names(settings))}", kind="unknown_task"
        )
    return factory(settings)


def builtin_folders() -> list[Path]:
    """The task folders shipped in the package (hpo-covertype, codeopt-records)."""
    return sorted(path for path in BUILTIN.iterdir() if (path / "autoresearch.toml").is_file())


@cache
def _builtin_class(path: Path) -> TaskFactory:
    from autoresearch_mcp.server.tasks.folder.task import folder_task_class

    return folder_task_class(path)


def _folders(settings: dict[str, Any] | None) -> dict[str, TaskFactory]:
    """The task folders the settings name, then the shipped ones they do not replace, by task name (each
    folder's autoresearch.toml read here): a copy of a shipped task, changed, runs under its name."""
    paths = (settings or {}).get("task_dirs") or []
    found: dict[str, TaskFactory] = {}
    if paths:
        from autoresearch_mcp.server.tasks.folder.task import folder_task_class

        store = (settings or {}).get("store_path")
        for path in paths:
            cls = folder_task_class(path, None if store is None else Path(store))
            if cls.name in _REGISTRY or cls.name in found:
                raise ResearchError(
                    f"task folder {path}: its name {cls.name!r} is already taken by another task; rename "
                    "it in its autoresearch.toml",
                    kind="bad_argument",
                )
            found[cls.name] = cls
    for path in builtin_folders():
        if path.name in found:
            continue
        made = _covertype(path, settings or {}) if path.name == "hpo-covertype" else _builtin_class(path)
        found[made.name] = made  # type: ignore[attr-defined]
    return found


def _covertype(shipped: Path, settings: dict[str, Any]) -> TaskFactory:
    """hpo-covertype: the shipped folder, run from its copy prepared with the server's data
    (covertype.py), made when first used; where the data cannot be read, it refuses to start a run."""
    from autoresearch_mcp.server.tasks.covertype import CovertypeSettings

    key = tuple(sorted((k, settings[k]) for k in CovertypeSettings.model_fields if k in settings))
    return _covertype_class(shipped, key)


@cache
def _covertype_class(shipped: Path, key: tuple[tuple[str, Any], ...]) -> TaskFactory:
    from autoresearch_mcp.server.tasks.covertype import prepared, source_name

    base: Any = _builtin_class(shipped)
    made: dict[str, Path] = {}  # the copy, by the data directory it is in
    problems: dict[str, str] = {}

    def folder(self: Task) -> Path:
        where = str(data_dir_path())
        copy = made.get(where)
        if copy is None or not copy.is_dir():
            try:
                made[where] = copy = prepared(shipped, dict(key))
            except ResearchError as exc:  # not kept: the operator may fix it while the server runs
                log.info("hpo-covertype: %s", exc)  # the whole story, paths included, in the server's log
                problems[where] = scrub_paths(str(exc))
                return shipped
        return copy

    def options(self: Task) -> dict[str, Any]:
        if folder(self) == shipped:
            raise UnavailableError(
                "the hpo-covertype task cannot run here: this server has no Covertype data. Nothing was"
                " started and no budget used; tell the server's operator, who can give it the data.",
                operator=problems.pop(str(data_dir_path()), "no data"),
            )
        return {**base.options(self), "data": source_name(dict(key))}  # which data the run split

    def info(self: Task) -> TaskInfo:
        # What a listing shows is the shipped folder's (its copy differs in threads and time limit only):
        # listing tasks splits no data, and imports no scikit-learn, until a run needs the copy.
        return base(self.settings).info()

    return type(base.__name__, (base,), {"folder": property(folder), "options": options, "info": info})


def settings_models() -> list[type[TaskSettings]]:
    """The settings model of every task registered as its class (a factory function declares none)."""
    _load_builtins()
    from autoresearch_mcp.server.tasks.covertype import CovertypeSettings

    models = {f.settings_model for f in _REGISTRY.values() if isinstance(f, type) and issubclass(f, Task)}
    models.add(CovertypeSettings)  # the shipped hpo-covertype's data, threads and wall time
    return sorted(models, key=lambda model: model.__qualname__)


def setting_variable(name: str) -> str | None:
    """The environment variable a task's setting `name` reads, if its task names one."""
    return next((model.env_of(name) for model in settings_models() if name in model.model_fields), None)


def check_task_settings(settings: dict[str, Any], given: Set[str] = frozenset()) -> None:
    """Every registered task's settings, validated by the task's own model now, at start: a bad value
    (a flag, or a variable in the environment) is refused before anything runs (ValidationError), and
    a setting given that no task declares is refused too (a typo would otherwise be ignored)."""
    models = settings_models()
    for model in models:
        model.model_validate(settings)
    known = {name for model in models for name in model.model_fields}
    unknown = sorted(given - known)
    if unknown:
        raise ResearchError(
            f"--task-setting {unknown[0]}: no registered task declares this setting; the settings: "
            f"{', '.join(sorted(known))}",
            kind="bad_argument",
        )


def make_task_from(module: str, name: str, settings: dict[str, Any]) -> Task:
    """Import `module` (which registers `name`) and make that task, without importing every other
    task first: a job worker needs only the task its job runs (the built-ins pull in scikit-learn)."""
    importlib.import_module(module)
    factory = _REGISTRY.get(name)
    return factory(settings) if factory is not None else make_task(name, settings)


def _load_builtins() -> None:
    """Built-in tasks, then plugins: entry points in group `autoresearch_mcp.tasks`, and modules named
    in AUTORESEARCH_TASK_PLUGINS (comma-separated). Each plugin module calls `register` on import."""
    global _loaded
    if _loaded:
        return
    for point in entry_points(group="autoresearch_mcp.tasks"):
        point.load()
    for module in filter(None, (m.strip() for m in os.environ.get(ENV_TASK_PLUGINS, "").split(","))):
        importlib.import_module(module)
    _loaded = True


class Tasks:
    """The tasks one server runs, each made once from its settings (a task may cache data)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self._made: dict[str, Task] = {}

    def names(self) -> list[str]:
        return task_names(self.settings)

    def __call__(self, name: str) -> Task:
        if name not in self._made:
            self._made[name] = make_task(name, self.settings)
        return self._made[name]

    def of_run(self, run: Run) -> Task:
        """The run's task; one this server does not register (a task folder another server registered)
        as the run recorded it: enough to read the run, never to run it."""
        try:
            return self(run.task)
        except ResearchError as exc:
            if exc.kind != "unknown_task":
                raise
            return recorded_task(run)

    def evaluated_by(self, tool: ToolName) -> list[str]:
        """The tasks whose experiments run through `tool` (run_experiment or run_benchmark)."""
        return [name for name in self.names() if self(name).experiment_tool == tool]
