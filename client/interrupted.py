"""What `run` says when Ctrl-C stops it: what became of the experiment in flight, and how to go on.

Ctrl-C reaches only this process (the SDK starts a stdio server in a session of its own). Leaving the
connection stops the spawned server, so an experiment it was running never ends: it stays `running`
in the database until a server opens it again, and a server marks such an experiment `interrupted` as
it starts. So this reopens the run's server once (quietly: its start-up warnings are not the user's
business here) and reads what is stored: the experiment in flight is then `interrupted`, which the
budget is not charged for (server/store: an experiment that was cut short measured nothing), and the
run stays `running`, so `run --run-id` takes it up again. A running HTTP server (--server-url) was not
stopped: its experiment goes on there and is charged when it ends.
"""

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path

import anyio

from autoresearch_mcp.client.connect import connect
from autoresearch_mcp.contract.arguments import GetExperimentHistoryArgs
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Experiment, Run

PROG = "autoresearch-mcp"
# Flags of `run` that describe the run itself (the resumed run keeps its own) or hold a secret.
NOT_REPEATED = {
    "task",
    "iterations",
    "target",
    "seed",
    "name",
    "from_run",
    "reeval_seeds",
    "run_id",
    "token",
    "first",
}
PATHS = {"db", "data", "transcript"}


@dataclass
class RunHandle:
    """What run_session has told its caller so far: the run it drives, and the last iteration recorded
    before this command's own experiments (an interrupted experiment after it was this command's)."""

    run_id: str | None = None
    seen: int = 0


def resume_command(args: argparse.Namespace, run_id: str, parser: argparse.ArgumentParser | None) -> str:
    """The `run` command that takes the run up again with the same backend, server and agent flags; a
    run on a task folder names the folder again (a spawned server knows only the folders it is given)."""
    words = [PROG, "run", "--run-id", run_id]
    for folder in getattr(args, "task_dirs", None) or []:
        words += ["--task", folder]
    for action in parser._actions if parser is not None else []:
        if not action.option_strings or action.dest in NOT_REPEATED or not hasattr(args, action.dest):
            continue
        value = getattr(args, action.dest)
        if value == action.default and action.dest != "llm":  # the backend is always said
            continue
        flag = action.option_strings[0]
        if value is True and action.nargs == 0:
            words.append(flag)
        elif value not in (None, False):
            text = str(Path(value).expanduser().resolve()) if action.dest in PATHS else str(value)
            words += [flag, text]
    if parser is None:
        words += ["--llm", args.llm]
    return shlex.join(words)


async def _stored(args: argparse.Namespace, run_id: str) -> tuple[Run, Experiment | None]:
    async with connect(
        server_url=args.server_url, token=args.token, db=args.db, data=args.data, log_level="ERROR"
    ) as rc:
        run = await rc.run(run_id)
        page = await rc.result(GetExperimentHistoryArgs(run_id=run_id, last=1))
    return run, page.experiments[-1] if page.experiments else None


def interrupted_line(
    args: argparse.Namespace, handle: RunHandle, parser: argparse.ArgumentParser | None = None
) -> str:
    """One line: what happened to the experiment in flight, whether it was charged, and how to resume."""
    if handle.run_id is None:
        return (
            f"interrupted before a run was under way: nothing to resume (`{PROG} runs` lists what is stored)"
        )
    run_id = handle.run_id
    resume = f"resume it with: {resume_command(args, run_id, parser)}"
    try:
        run, last = anyio.run(_stored, args, run_id)
    except ResearchError as exc:
        return f"interrupted; run {run_id} could not be read back ({exc}); {resume}"
    used = f"{run.used}/{run.budget} used"
    if run.status != "running":
        return f"interrupted; run {run_id} is {run.status} ({used}): `{PROG} show {run_id}` shows it"
    mine = last is not None and last.iteration > handle.seen
    if mine and last is not None and last.status == "interrupted":
        what = f"experiment #{last.iteration} was cut short and marked interrupted, not charged ({used})"
    elif mine and last is not None and last.status == "running":
        where = args.server_url or "the server"
        what = f"experiment #{last.iteration} goes on at {where} and is charged when it ends ({used})"
    else:
        what = f"no experiment was running ({used})"
    return f"interrupted: {what}; run {run_id} stays running, {resume}"
