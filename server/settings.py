"""What a server instance is configured with: CLI flags, else environment (names in contract/env.py),
else defaults."""

import os
from pathlib import Path

from pydantic import BaseModel, Field

from autoresearch_mcp.contract.env import ENV_COVTYPE, ENV_DASK_SCHEDULER, ENV_HPO_WALL_S, default_db_path


class ServerSettings(BaseModel):
    """Everything a server instance is configured with (CLI flags, else environment, else defaults)."""

    db_path: Path = Field(default_factory=default_db_path)
    covtype_path: str | None = Field(default_factory=lambda: os.environ.get(ENV_COVTYPE))
    codeopt_records: int | None = Field(default=None, ge=100, le=1_000_000)
    codeopt_repeats: int | None = Field(default=None, ge=1, le=200)
    hpo_threads: int | None = Field(default=None, ge=1, le=256)
    # A training that runs longer is killed and recorded as a timeout (validated even from the environment).
    hpo_wall_s: int = Field(
        default_factory=lambda: os.environ.get(ENV_HPO_WALL_S) or 600, ge=1, le=86_400, validate_default=True
    )
    # Background jobs: local worker processes (default: one per core), or a Dask scheduler.
    workers: int | None = Field(default=None, ge=1, le=1024)
    dask_scheduler: str | None = Field(default_factory=lambda: os.environ.get(ENV_DASK_SCHEDULER) or None)

    def task_settings(self) -> dict[str, object]:
        return self.model_dump(exclude={"db_path", "workers", "dask_scheduler"})
