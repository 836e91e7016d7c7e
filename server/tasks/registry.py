"""The task registry. Built-in tasks register themselves; a plugin adds one with `register`; task
folders come from the server's settings (`task_dirs`), so each server knows its own."""

import importlib
import os
from collections.abc import Callable, Set
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.env import ENV_TASK_PLUGINS
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Run
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.tasks.base import Task, TaskSettings
from autoresearch_mcp.server.tasks.recorded import recorded_task

TaskFactory = Callable[[dict[str, Any]], Task]
_REGISTRY: dict[str, TaskFactory] = {}
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


def _folders(settings: dict[str, Any] | None) -> dict[str, TaskFactory]:
    """The task folders the settings name, by task name (each folder's autoresearch.toml read here)."""
    paths = (settings or {}).get("task_dirs") or []
    if not paths:
        return {}
    from autoresearch_mcp.server.tasks.folder.task import folder_task_class

    store = (settings or {}).get("store_path")
    found: dict[str, TaskFactory] = {}
    for path in paths:
        cls = folder_task_class(path, None if store is None else Path(store))
        if cls.name in _REGISTRY or cls.name in found:
            raise ResearchError(
                f"task folder {path}: its name {cls.name!r} is already taken by another task; rename it "
                "in its autoresearch.toml",
                kind="bad_argument",
            )
        found[cls.name] = cls
    return found


def settings_models() -> list[type[TaskSettings]]:
    """The settings model of every task registered as its class (a factory function declares none)."""
    _load_builtins()
    models = {f.settings_model for f in _REGISTRY.values() if isinstance(f, type) and issubclass(f, Task)}
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
    # Imported lazily so that importing the registry does not pull in xgboost and friends.
    from autoresearch_mcp.server.tasks.codeopt_records import task as _codeopt  # noqa: F401
    from autoresearch_mcp.server.tasks.hpo_covertype import task as _hpo  # noqa: F401

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
