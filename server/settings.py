"""What a server instance is configured with: CLI flags, else environment (names in contract/env.py),
else defaults."""

import os
from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from autoresearch_mcp.contract.env import (
    ENV_CODEOPT_RECORDS,
    ENV_CODEOPT_REPEATS,
    ENV_COVTYPE,
    ENV_DASK_SCHEDULER,
    ENV_HPO_THREADS,
    ENV_HPO_WALL_S,
    ENV_TASK_DIRS,
    default_db_path,
)


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


class ServerSettings(BaseModel):
    """Everything a server instance is configured with (CLI flags, else environment, else defaults)."""

    db_path: Path = Field(default_factory=default_db_path)
    covtype_path: str | None = Field(default_factory=lambda: os.environ.get(ENV_COVTYPE))
    # From the environment too, so that a host (or a test) that spawns the server can set them; a bad
    # value there is refused at start like a bad flag.
    codeopt_records: int | None = Field(
        default_factory=lambda: _env(ENV_CODEOPT_RECORDS), ge=100, le=1_000_000, validate_default=True
    )
    codeopt_repeats: int | None = Field(
        default_factory=lambda: _env(ENV_CODEOPT_REPEATS), ge=1, le=200, validate_default=True
    )
    hpo_threads: int | None = Field(
        default_factory=lambda: _env(ENV_HPO_THREADS), ge=1, le=256, validate_default=True
    )
    # A training that runs longer is killed and recorded as a timeout (validated even from the environment).
    hpo_wall_s: int = Field(
        default_factory=lambda: os.environ.get(ENV_HPO_WALL_S) or 600, ge=1, le=86_400, validate_default=True
    )
    # Task folders (a user's script + autoresearch.toml), absolute; --task-dir, else the environment.
    task_dirs: list[str] = Field(
        default_factory=lambda: [p for p in (os.environ.get(ENV_TASK_DIRS) or "").split(os.pathsep) if p]
    )
    # A task to focus on: only its agent's tools are listed, as our agent offers them (tools/focus.py).
    tools_for: str | None = Field(default=None, min_length=1, max_length=100)
    # Background jobs: local worker processes (default: one per core), or a Dask scheduler.
    workers: int | None = Field(default=None, ge=1, le=1024)
    dask_scheduler: str | None = Field(default_factory=lambda: os.environ.get(ENV_DASK_SCHEDULER) or None)

    @field_validator("task_dirs")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        # A job worker or a restarted server may run elsewhere: keep where each folder really is.
        return list(dict.fromkeys(str(Path(p).expanduser().resolve()) for p in value))

    def task_settings(self) -> dict[str, object]:
        return self.model_dump(exclude={"db_path", "workers", "dask_scheduler", "tools_for"})
