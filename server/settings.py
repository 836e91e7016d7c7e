"""What a server instance is configured with: CLI flags, else environment (names in contract/env.py),
else defaults. What a task is given (its data, its sizes) is the task's own to validate
(Task.settings_model): here it is only gathered, from the flags and from the variables each task's
settings name."""

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from autoresearch_mcp.contract.env import ENV_DASK_SCHEDULER, ENV_TASK_DIRS, default_db_path


class ServerSettings(BaseModel):
    """Everything a server instance is configured with (CLI flags, else environment, else defaults)."""

    db_path: Path = Field(default_factory=default_db_path)
    # Task folders (a user's script + autoresearch.toml), absolute; --task-dir, else the environment.
    task_dirs: list[str] = Field(
        default_factory=lambda: [p for p in (os.environ.get(ENV_TASK_DIRS) or "").split(os.pathsep) if p]
    )
    # What the operator gave the tasks by flag, by the name of a task's setting (covtype_path,
    # hpo_threads, hpo_wall_s, ...); the environment fills in the rest (task_settings).
    task_options: dict[str, Any] = Field(default_factory=dict)
    # A task to focus on: only its agent's tools are listed, as our agent offers them (tools/focus.py).
    tools_for: str | None = Field(default=None, min_length=1, max_length=100)
    # Background jobs: local worker processes (default: one per core), or a Dask scheduler.
    workers: int | None = Field(default=None, ge=1, le=1024)
    dask_scheduler: str | None = Field(default_factory=lambda: os.environ.get(ENV_DASK_SCHEDULER) or None)

    @model_validator(mode="before")
    @classmethod
    def _tasks_own_the_rest(cls, values: Any) -> Any:
        """A key that is not the server's (ServerSettings(hpo_threads=1)) is a task's option."""
        if not isinstance(values, dict):
            return values
        own = {key: value for key, value in values.items() if key in cls.model_fields}
        given = {key: value for key, value in values.items() if key not in cls.model_fields}
        return {**own, "task_options": {**own.get("task_options", {}), **given}}

    @field_validator("db_path")
    @classmethod
    def _in_a_folder_that_exists(cls, value: Path) -> Path:
        # A mistyped directory would otherwise be made, and the runs kept where no one looks for them.
        folder = Path(value).expanduser().resolve().parent
        if not folder.is_dir():
            raise ValueError(
                f"no directory {folder} to keep the database in: create it, or give a path in one"
            )
        return value

    @field_validator("task_dirs")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        # A job worker or a restarted server may run elsewhere: keep where each folder really is.
        return list(dict.fromkeys(str(Path(p).expanduser().resolve()) for p in value))

    def with_options(self, **values: Any) -> "ServerSettings":
        """These settings, with these task options given as flags would give them."""
        return self.model_copy(update={"task_options": {**self.task_options, **values}})

    def task_settings(self) -> dict[str, Any]:
        """What every task is made with: the variables its settings name, then the flags given, and
        the task folders (the registry finds them there, and the database none may read). Each task
        validates its own."""
        from autoresearch_mcp.server.tasks.registry import settings_models

        environment = {k: v for model in settings_models() for k, v in model.from_environment().items()}
        folders = {"task_dirs": self.task_dirs, "store_path": str(self.db_path)}
        return {**environment, **self.task_options, **folders}
