"""Look at what is stored: `runs`, `show`, `tasks`, `db-path` (and, in export_cmd.py, `export`).

Like `llm logs` or optuna's `studies`/`trials`, these read the server's runs; like the agent, they read
them through MCP (from the CLI, a server in its own process on --db; or a running one at --server-url),
never the file.
"""

import argparse
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, get_args

import anyio

from autoresearch_mcp.client.agent_args import whole_number
from autoresearch_mcp.client.connect import ResearchClient, connect
from autoresearch_mcp.client.live import SCRIPTED_WHAT
from autoresearch_mcp.contract.arguments import GetRunSummaryArgs, QueryResultsArgs
from autoresearch_mcp.contract.display import better_way, utc_minute
from autoresearch_mcp.contract.env import ENV_DB, ENV_TOKEN, default_db_path
from autoresearch_mcp.contract.errors import ResearchError, error_headline
from autoresearch_mcp.contract.files import edited_files, file_diffs
from autoresearch_mcp.contract.models import JUDGED_BY_WORDS, Experiment, Run, RunStatus

RUN_ID = re.compile(r"^r-[0-9a-f]{10}$")
DIFF_LINES = 200  # a whole rewrite of a long file would bury the rest of `show`


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", type=Path, help=f"SQLite file (default: ${ENV_DB} or the user data directory)"
    )
    parser.add_argument("--server-url", help="ask a running HTTP server instead of spawning one on --db")
    parser.add_argument(
        "--token",
        default=os.environ.get(ENV_TOKEN),
        help=f"bearer token for --server-url (default ${ENV_TOKEN})",
    )


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "runs",
        help="list the stored runs, newest first",
        epilog="example:\n  autoresearch-mcp runs --status running",
    )
    add_server_arguments(p)
    p.add_argument("--status", choices=get_args(RunStatus), help="only this status")
    p.add_argument(
        "--limit", type=whole_number("expected", 0), default=20, help="show at most this many runs (0: all)"
    )
    p.set_defaults(func=lambda args: drive(args, list_runs))

    p = sub.add_parser(
        "show",
        help="show one run: its summary, best result and experiments (code: the best's diff from v1)",
        epilog="example:\n  autoresearch-mcp show latest\n  autoresearch-mcp show r-0123456789 --last 10"
        "\n  autoresearch-mcp show r-0123456789 --version 3 --diff-lines 0",
    )
    add_server_arguments(p)
    p.add_argument("run_id", nargs="?", default="latest", help="a run id, or 'latest' (default)")
    p.add_argument(
        "--last", type=whole_number("expected", 0), default=0, help="only the last N experiments (0: all)"
    )
    p.add_argument(
        "--version",
        type=whole_number("expected", 1),
        help="the version whose diff from the original v1 to show, as `apply` takes (default: the best's)",
    )
    p.add_argument(
        "--diff-lines",
        type=whole_number("expected", 0),
        default=DIFF_LINES,
        help="show at most N lines of each file's diff (0: all)",
    )
    p.set_defaults(func=lambda args: drive(args, show_run))

    p = sub.add_parser(
        "tasks",
        help="list the tasks a run can work on",
        epilog="example:\n  autoresearch-mcp tasks --task-dir my-project/",
    )
    add_server_arguments(p)
    p.add_argument(
        "--task-dir",
        dest="task_dirs",
        action="append",
        type=Path,
        metavar="PATH",
        help="a task folder to list too (repeatable; default: $AUTORESEARCH_TASK_DIRS)",
    )
    p.set_defaults(func=lambda args: drive(args, list_tasks))

    p = sub.add_parser(
        "db-path",
        help="print the path of the database the commands use",
        epilog='example:\n  sqlite3 "$(autoresearch-mcp db-path)" .tables',
    )
    p.add_argument("--db", type=Path, help=f"SQLite file (default: ${ENV_DB} or the user data directory)")
    p.set_defaults(func=print_db_path)


def db_path(args: argparse.Namespace) -> Path:
    return Path(args.db).expanduser().resolve() if args.db else default_db_path()


def print_db_path(args: argparse.Namespace) -> int:
    print(db_path(args))
    return 0


Command = Callable[[ResearchClient, argparse.Namespace], Coroutine[Any, Any, int]]


def drive(args: argparse.Namespace, command: Command) -> int:
    async def session() -> int:
        async with server_for(args) as rc:
            return await command(rc, args)

    return anyio.run(session)


@asynccontextmanager
async def server_for(args: argparse.Namespace) -> AsyncIterator[ResearchClient]:
    """The server to ask. A database that does not exist yet is not created by looking at it: `runs`
    and `tasks` ask an empty temporary one; `show`, `export` and `stop` have nothing to act on. The
    server logs errors only: its start-up chores (a sweep of stale sandboxes) are not what someone
    looking at their runs asked about."""
    if args.server_url:
        if getattr(args, "task_dirs", None):
            raise ResearchError(
                "--task-dir registers a folder with a server this command spawns; a running server "
                "(--server-url) lists the folders it was started with"
            )
        async with connect(server_url=args.server_url, token=args.token) as rc:
            yield rc
        return
    path = db_path(args)
    folders = [
        arg for folder in getattr(args, "task_dirs", None) or [] for arg in ("--task-dir", str(folder))
    ]
    # The CLI serves the database in its own process (cli.py passes server/in_process.py's server as
    # `serve_here`); without it (a caller of this module's own), a spawned server does.
    here = getattr(args, "serve_here", None)
    if path.is_file():
        async with connect(db=path, log_level="ERROR", server_args=folders, here=here) as rc:
            yield rc
        return
    if args.command in ("show", "export", "stop"):
        raise ResearchError(
            f"no database at {path}: no run has been stored there; pass --db PATH or set ${ENV_DB}"
        )
    with tempfile.TemporaryDirectory(prefix="autoresearch-") as empty:
        async with connect(
            db=Path(empty) / "runs.db", log_level="ERROR", server_args=folders, here=here
        ) as rc:
            yield rc


async def resolve_run(rc: ResearchClient, run_id: str) -> Run:
    if run_id != "latest":
        return await rc.run(run_id)
    runs = await rc.runs()
    if not runs:
        raise ResearchError("no run is stored yet: start one with `autoresearch-mcp run`", kind="unknown_run")
    return runs[0]


def columns(rows: list[list[str]]) -> str:
    """Rows as left-aligned columns (the last one unpadded): plain text that never wraps."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([cell.ljust(width) for cell, width in zip(row, widths, strict=False)] + [row[-1]]).rstrip()
        for row in rows
    )


def fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def arrow(run: Run) -> str:
    return better_way(run.direction)


async def list_runs(rc: ResearchClient, args: argparse.Namespace) -> int:
    runs = [run for run in await rc.runs() if args.status is None or run.status == args.status]
    if not runs:
        where = args.server_url or db_path(args)
        print(f"no runs{' with status ' + args.status if args.status else ''} in {where}")
        return 0
    shown = runs[: args.limit] if args.limit > 0 else runs
    chained = any(run.from_run for run in shown)  # the "from" column only where a run started from one
    tagged = any(run.tags for run in shown)
    head = ["run", "task", "status", "used", "best", "created", "llm"]
    rows = [head + (["from"] if chained else []) + (["tags"] if tagged else []) + ["name"]]
    for run in shown:
        best = f"{fmt(run.best.metric)} (#{run.best.iteration})" if run.best else "-"
        rows.append(
            [
                run.id,
                run.task,
                run.status,
                f"{run.used}/{run.budget}" + (f" ({run.running} running)" if run.running else ""),
                best,
                utc_minute(run.created_at),
                run.llm or "-",
                *([run.from_run or "-"] if chained else []),
                *([",".join(run.tags) or "-"] if tagged else []),
                run.name or "",
            ]
        )
    print(columns(rows))
    if len(shown) < len(runs):
        print(f"... {len(runs) - len(shown)} older runs (--limit 0 shows all)")
    if any(run.scripted for run in shown):
        print(f"llm scripted: {SCRIPTED_WHAT}")
    return 0


async def list_tasks(rc: ResearchClient, args: argparse.Namespace) -> int:
    rows = [["task", "kind", "metric", "experiment tool", "title"]]
    tasks = await rc.tasks()
    for task in tasks:
        better = better_way(task.direction)
        rows.append([task.name, task.kind, f"{task.metric} ({better})", task.experiment_tool, task.title])
    print(columns(rows))
    # A folder is registered by whoever starts a server; the runs remember only its task's name.
    known = {task.name for task in tasks}
    elsewhere = sorted({run.task for run in await rc.runs()} - known)
    if elsewhere:
        print(
            f"stored runs also worked on {', '.join(elsewhere)}: task folders, listed with --task-dir PATH "
            "(run them with --task PATH)"
        )
    return 0


async def edit_descriptions(rc: ResearchClient, run_id: str) -> dict[int, str]:
    """train.py version -> the description of the edit that made it (from the v_artifacts view)."""
    if not RUN_ID.match(run_id):
        return {}
    sql = f"SELECT version, description FROM v_artifacts WHERE run_id = '{run_id}' ORDER BY version"
    result = await rc.result(QueryResultsArgs(sql=sql, max_rows=1000))
    return {int(version): str(description) for version, description in result.rows}


def changes(exp: Experiment, best: dict[str, Any] | None) -> str:
    """The params that differ from the best configuration (all of them when there is no best)."""
    if best is None:
        return " ".join(f"{k}={v}" for k, v in exp.params.items())
    diff = [f"{k}={v}" for k, v in exp.params.items() if best.get(k) != v]
    return " ".join(diff) if diff else "(same as best)"


async def show_run(rc: ResearchClient, args: argparse.Namespace) -> int:
    run = await resolve_run(rc, args.run_id)
    summary = await rc.result(GetRunSummaryArgs(run_id=run.id))
    history = await rc.history(run.id)
    edited = any(e.artifact_version > 1 for e in history) or args.version is not None
    edits = await edit_descriptions(rc, run.id) if edited else {}
    if args.version is not None and args.version not in edits:
        raise ResearchError(
            f"run {run.id} has no version {args.version} (it has v1 to v{max(edits, default=1)})",
            kind="unknown_version",
        )
    print(f"run {run.id}  {run.name or ''}".rstrip())
    running = f" ({run.running} running now)" if run.running else ""
    print(f"task {run.task} · status {run.status} · {run.used}/{run.budget} used{running} · seed {run.seed}")
    print(f"metric {run.metric_name} ({arrow(run)}) · created {utc_minute(run.created_at)}")
    if run.judged_by is not None:
        print(f"the metric is {JUDGED_BY_WORDS[run.judged_by]}")
    if run.llm:
        print(f"proposed by {run.llm}" + (f": {SCRIPTED_WHAT}" if run.scripted else ""))
    if run.tags:
        print(f"tags {', '.join(run.tags)}")
    if run.finish_reason:
        print(f"finished {utc_minute(run.finished_at)}: {run.finish_reason}")
    if run.from_run:
        print(f"started from run {run.from_run} (see the From line of the summary)")
    print()
    print(summary.summary)
    print()
    if not history:
        print("no experiments yet")
        return 0
    names = edited_files(run.config)
    best_params = run.best.params if run.best else None
    shown = history[-args.last :] if args.last > 0 else history
    rows = [["#", "status", run.metric_name, "best", "seconds", "changes vs best / edit / note"]]
    for exp in shown:
        if edits:
            what = f"{names[0] + ' ' if len(names) == 1 else ''}v{exp.artifact_version}: "
            what += edits.get(exp.artifact_version, "")
        else:
            what = changes(exp, best_params)
        if exp.note:
            what += f" · {exp.note}"
        rows.append(
            [
                str(exp.iteration),
                exp.status,
                fmt(exp.metric),
                "*" if run.best and exp.iteration == run.best.iteration else "",
                fmt(exp.duration_s, 1),
                " ".join(what.split())[:200],
            ]
        )
    print(columns(rows))
    failure_lines(shown)
    if edits:
        await show_diff(rc, run, args)
    return 0


def failure_lines(shown: list[Experiment]) -> None:
    """Why each shown experiment failed, whole (the table has no room for it), then the latest
    failure's whole tail: the traceback a person fixes the script from."""
    failed = [exp for exp in shown if exp.status in ("crash", "timeout", "incorrect") and exp.error_tail]
    if not failed:
        return
    print()
    print("why they failed:")
    for exp in failed:
        print(f"  #{exp.iteration} {exp.status}: {error_headline(exp.error_tail or '')}")
    last = failed[-1]
    print()
    print(f"#{last.iteration}'s error, whole:")
    for line in (last.error_tail or "").strip().splitlines():
        print(f"  {line}")


async def show_diff(rc: ResearchClient, run: Run, args: argparse.Namespace) -> None:
    """The chosen version against the original, file by file (each bounded by --diff-lines): what the
    run changed, and what `apply` would write back."""
    version = args.version or (run.best.artifact_version if run.best else None)  # as `apply` chooses
    print()
    if version is None:
        print("no best yet: --version N shows that version's diff from v1")
        return
    which = f"v{version}" if args.version else f"v{version} (the best's version)"
    diffs = file_diffs(
        await rc.train_py(run.id, 1), await rc.train_py(run.id, version), edited_files(run.config), 1, version
    )
    if not diffs:
        print(f"{which} is the original v1's text: no diff")
        return
    print(f"{which} against the original v1, file by file:")
    for diff in diffs:
        limit = args.diff_lines or len(diff.lines)
        print("\n".join(diff.lines[:limit]))
        if len(diff.lines) > limit:
            left = len(diff.lines) - limit
            print(f"... {left} more lines of {diff.name}'s diff left out (--diff-lines 0 shows all)")
    print(f"write it back: autoresearch-mcp apply {run.id} --version {version} --to PATH")
