"""Environment variable names and where things are kept by default: what both sides must agree on."""

import argparse
import os
from pathlib import Path

import platformdirs

APP_NAME = "autoresearch-mcp"

ENV_DB = "AUTORESEARCH_DB"
ENV_DATA_DIR = "AUTORESEARCH_DATA_DIR"
ENV_COVTYPE = "AUTORESEARCH_COVTYPE"
ENV_TOKEN = "AUTORESEARCH_TOKEN"
ENV_DASK_SCHEDULER = "AUTORESEARCH_DASK_SCHEDULER"
ENV_LOG_LEVEL = "AUTORESEARCH_LOG_LEVEL"
ENV_TASK_PLUGINS = "AUTORESEARCH_TASK_PLUGINS"
ENV_HPO_WALL_S = "AUTORESEARCH_HPO_WALL_S"
ENV_HPO_THREADS = "AUTORESEARCH_HPO_THREADS"
ENV_TASK_DIRS = "AUTORESEARCH_TASK_DIRS"  # task folders, separated like PATH
ENV_SANDBOX_USER = "AUTORESEARCH_SANDBOX_USER"  # who untrusted code runs as under a root server
# Every variable with this prefix is server configuration: the client forwards them to a spawned
# server, and the sandbox strips them from the environment of untrusted code.
ENV_PREFIX = "AUTORESEARCH_"


def data_dir_path() -> Path:
    """Where the user's data directory for autoresearch-mcp is (platformdirs, or AUTORESEARCH_DATA_DIR),
    made or not."""
    override = os.environ.get(ENV_DATA_DIR)
    return Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME))


def data_dir() -> Path:
    """The user's data directory for autoresearch-mcp, made if it is not there yet."""
    path = data_dir_path()
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


# The data setting that means "the real Covertype set, downloaded once by scikit-learn".
FULL_COVTYPE = "full"


def data_setting(value: str) -> str:
    """A --data value as the server keeps it: `full`, or an absolute path (a spawned server or a job
    worker may run in another directory)."""
    return value if value == FULL_COVTYPE else str(Path(value).expanduser().resolve())


def add_location_arguments(parser: argparse.ArgumentParser) -> None:
    """--db and --data: every command that opens or spawns a server takes them, with these meanings."""
    parser.add_argument(
        "--db", type=Path, help=f"SQLite file (default: ${ENV_DB} or the user data directory)"
    )
    parser.add_argument(
        "--data",
        metavar="PATH|full",
        help=f"hpo-covertype's data: a Covertype CSV, or `{FULL_COVTYPE}` for the real set (downloaded once by"
        f" scikit-learn); default: ${ENV_COVTYPE}, else the 20,000-row sample shipped with the package",
    )
