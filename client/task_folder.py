"""`--task PATH`: a task folder named on the command line, registered with the server this command spawns.

The operator names the folder; the server reads and checks it (`serve --task-dir PATH`) and the run
starts by the task's name, as any run does: a model never names a path. Only the name is read here, to
start the run with it; everything else about the folder is the server's to judge.
"""

import argparse
import os
import tomllib
from pathlib import Path

from autoresearch_mcp.contract.errors import ResearchError

SPEC_FILE = "autoresearch.toml"


def is_folder_argument(task: str) -> bool:
    """A path rather than a task name: it has a separator, starts with a dot or a tilde, or is a folder."""
    return os.sep in task or "/" in task or task.startswith((".", "~")) or Path(task).is_dir()


def folder_task_name(folder: Path) -> str:
    toml = folder / SPEC_FILE
    if not toml.is_file():
        raise ResearchError(
            f"{folder}: no {SPEC_FILE} in it (`autoresearch-mcp init {folder}` writes one next to your script)",
            kind="unknown_task",
        )
    try:
        name = tomllib.loads(toml.read_text(encoding="utf-8")).get("task", {}).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ResearchError(f"{toml}: {exc}") from None
    if not isinstance(name, str) or not name:
        raise ResearchError(f"{toml}: [task] needs a name (what the run starts by)")
    return name


def resolve_task_folder(args: argparse.Namespace) -> None:
    """Turn `--task PATH` into the folder's task name, and remember the folder for the spawned server."""
    args.task_dirs = list(getattr(args, "task_dirs", None) or [])
    task = getattr(args, "task", None)
    if not task or not is_folder_argument(task):
        return
    folder = Path(task).expanduser().resolve()
    if not folder.is_dir():
        raise ResearchError(f"--task {task}: no such folder (a task name has no slash)", kind="unknown_task")
    if getattr(args, "server_url", None):
        raise ResearchError(
            f"--task {task}: a task folder is registered where the server runs; start that server with "
            f"`autoresearch-mcp serve --task-dir {folder}` and pass --task with the folder's task name"
        )
    args.task = folder_task_name(folder)
    args.task_dirs.append(str(folder))
