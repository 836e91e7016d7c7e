"""Where the server keeps things, and which environment variables override that."""

import os
from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field

APP_NAME = "autoresearch-mcp"

ENV_DB = "AUTORESEARCH_DB"
ENV_DATA_DIR = "AUTORESEARCH_DATA_DIR"
ENV_COVTYPE = "AUTORESEARCH_COVTYPE"
ENV_TOKEN = "AUTORESEARCH_TOKEN"
ENV_DASK_SCHEDULER = "AUTORESEARCH_DASK_SCHEDULER"
# Every variable with this prefix is server configuration: the client forwards them to a spawned
# server, and the sandbox strips them from the environment of untrusted code.
ENV_PREFIX = "AUTORESEARCH_"


def data_dir() -> Path:
    """The user's data directory for autoresearch-mcp (platformdirs), or AUTORESEARCH_DATA_DIR."""
    override = os.environ.get(ENV_DATA_DIR)
    path = Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME))
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_db_path() -> Path:
    """`AUTORESEARCH_DB` if set, else `runs.db` in the data directory."""
    override = os.environ.get(ENV_DB)
    return Path(override) if override else data_dir() / "runs.db"


def transcripts_dir() -> Path:
    path = data_dir() / "transcripts"
    path.mkdir(parents=True, exist_ok=True)
    return path


class ServerSettings(BaseModel):
    """Everything a server instance is configured with (CLI flags, else environment, else defaults)."""

    db_path: Path = Field(default_factory=default_db_path)
    covtype_path: str | None = Field(default_factory=lambda: os.environ.get(ENV_COVTYPE))
    codeopt_records: int | None = Field(default=None, ge=100, le=1_000_000)
    codeopt_repeats: int | None = Field(default=None, ge=1, le=200)
    hpo_threads: int | None = Field(default=None, ge=1, le=256)
    # Background jobs: local worker processes (default: one per core), or a Dask scheduler.
    workers: int | None = Field(default=None, ge=1, le=1024)
    dask_scheduler: str | None = Field(default_factory=lambda: os.environ.get(ENV_DASK_SCHEDULER) or None)

    def task_settings(self) -> dict[str, object]:
        return self.model_dump(exclude={"db_path", "workers", "dask_scheduler"})
