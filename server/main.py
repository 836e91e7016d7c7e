"""The server's own command (`autoresearch-mcp-server`, `python -m autoresearch_mcp.server`, and
`autoresearch-mcp serve`): run the MCP server over stdio (default) or streamable HTTP."""

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from autoresearch_mcp.contract.env import (
    ENV_DASK_SCHEDULER,
    ENV_HPO_WALL_S,
    ENV_LOG_LEVEL,
    ENV_TASK_DIRS,
    ENV_TOKEN,
    add_location_arguments,
    data_setting,
)
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.workers import workers_arg, workers_problem
from autoresearch_mcp.server.settings import ServerSettings

# setting -> the flag that sets it, for a one-line error naming what the user typed. A task's setting
# without a flag of its own is given as `--task-setting NAME=VALUE`.
FLAGS = {
    "db_path": "--db",
    "covtype_path": "--data",
    "hpo_threads": "--hpo-threads",
    "hpo_wall_s": "--hpo-wall-s",
    "workers": "--workers",
    "dask_scheduler": "--dask-scheduler",
    "task_dirs": f"--task-dir (or ${ENV_TASK_DIRS})",
    "tools_for": "--tools-for",
}
# Flags the server keeps for the built-in tasks; their values are the tasks' to validate.
TASK_FLAGS = ("hpo_threads", "hpo_wall_s")


def port_arg(value: str, lowest: int = 1) -> int:
    if not (value.isascii() and value.isdigit() and lowest <= int(value) <= 65535):
        raise argparse.ArgumentTypeError(f"expected a port number from {lowest} to 65535, not {value!r}")
    return int(value)


def listen_port_arg(value: str) -> int:
    """A port to serve on; 0 lets the system pick a free one (see --port-file)."""
    return port_arg(value, lowest=0)


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    """The settings, or one line naming the flag (or variable) whose value they, or a task, refuse."""
    from autoresearch_mcp.server.tasks.registry import check_task_settings

    if (
        problem := workers_problem(getattr(args, "workers", None), getattr(args, "force", False))
    ) is not None:
        raise ResearchError(problem)
    try:
        settings = _settings(args)
    except ValidationError as exc:
        raise ResearchError(_refusal(exc, FLAGS.get)) from None
    try:
        check_task_settings(settings.task_settings(), given=set(settings.task_options))
    except ValidationError as exc:
        # Named as the user gave it: the flag, or else the variable the task's setting reads.
        raise ResearchError(_refusal(exc, lambda key: _task_flag(key, settings))) from None
    return settings


def _refusal(exc: ValidationError, name_of: Callable[[str], str | None]) -> str:
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else ""
    if error["type"] == "value_error":  # our own words, which name the value already
        return f"{name_of(field) or field}: {error['msg'].removeprefix('Value error, ')}"
    return f"{name_of(field) or field}: {error['msg']}, not {error.get('input')!r}"


def _task_flag(key: str, settings: ServerSettings) -> str:
    from autoresearch_mcp.server.tasks.registry import setting_variable

    if key in settings.task_options or not setting_variable(key):
        return FLAGS.get(key, f"--task-setting {key}")
    return f"${setting_variable(key)}"


def task_setting_arg(value: str) -> tuple[str, str]:
    name, sep, setting = value.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, not {value!r}")
    return name, setting


def _settings(args: argparse.Namespace) -> ServerSettings:
    values: dict[str, object] = {}
    if getattr(args, "db", None):
        values["db_path"] = args.db
    if getattr(args, "task_dir", None):
        values["task_dirs"] = args.task_dir
    for key in ("workers", "dask_scheduler", "tools_for"):
        if getattr(args, key, None) is not None:
            values[key] = getattr(args, key)
    options: dict[str, object] = dict(getattr(args, "task_setting", None) or [])
    if getattr(args, "data", None):
        options["covtype_path"] = data_setting(args.data)
    options.update({key: getattr(args, key) for key in TASK_FLAGS if getattr(args, key, None) is not None})
    return ServerSettings(**values, task_options=options)


def configure(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    add_serve_arguments(sub.add_parser("serve", help="run the MCP server (stdio by default)"))


def main(argv: list[str] | None = None) -> int:
    """`autoresearch-mcp-server [--transport http] ...`: the server alone, as hosts start it."""
    parser = argparse.ArgumentParser(
        prog="autoresearch-mcp-server", description="The autoresearch MCP server (stdio by default)."
    )
    add_serve_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ResearchError as exc:  # a bad setting: one line, as the autoresearch-mcp command says it
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    add_location_arguments(parser)
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (as a host such as Claude Desktop starts it) or streamable HTTP at /mcp",
    )
    parser.add_argument("--host", default="127.0.0.1", help="http: the address to bind")
    parser.add_argument(
        "--port", type=listen_port_arg, default=8765, help="http: the port (0: any free one, see --port-file)"
    )
    parser.add_argument(
        "--port-file",
        type=Path,
        metavar="PATH",
        help="http: once listening, write the port to PATH (removed on stop): how a script learns the port "
        "--port 0 got",
    )
    parser.add_argument("--hpo-threads", type=int, help="threads per XGBoost training (default: all cores)")
    parser.add_argument(
        "--hpo-wall-s",
        type=int,
        help=f"seconds one XGBoost training may run before it is killed (default: ${ENV_HPO_WALL_S} or 600)",
    )
    parser.add_argument(
        "--task-setting",
        action="append",
        type=task_setting_arg,
        metavar="NAME=VALUE",
        help="a setting a task declares (a plugin's own, or a built-in's by its name); repeatable",
    )
    parser.add_argument(
        "--workers",
        type=workers_arg,
        metavar="N",
        help="experiments measured at once by background jobs (submit_training_job), on local worker"
        " processes that share the cores' training threads between them (default: one per core)",
    )
    parser.add_argument("--force", action="store_true", help="allow --workers above the number of cores")
    parser.add_argument(
        "--dask-scheduler",
        help=f"run background jobs on this Dask scheduler (default: ${ENV_DASK_SCHEDULER})",
    )
    parser.add_argument(
        "--task-dir",
        action="append",
        metavar="PATH",
        help=f"register a task folder (a script + autoresearch.toml); repeatable (default: ${ENV_TASK_DIRS},"
        " folders separated as in PATH)",
    )
    parser.add_argument(
        "--tools-for",
        metavar="TASK",
        help="list only this task's agent tools, as the bundled agent offers them to its model (for an "
        "outside agent framework); the other tools stay callable",
    )
    parser.add_argument("--token", help=f"HTTP bearer token (default: ${ENV_TOKEN}; required off loopback)")
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="admit this Host name over HTTP (DNS-rebinding protection stays on); repeatable",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # stdout belongs to the MCP protocol on stdio: logs go to stderr.
    logging.basicConfig(
        level=os.environ.get(ENV_LOG_LEVEL, "INFO"), format="%(levelname)s %(name)s: %(message)s"
    )
    settings = settings_from_args(args)  # before the store and the transport: a bad flag is answered at once
    from autoresearch_mcp.server.build import build_server
    from autoresearch_mcp.server.research import Research

    if args.transport == "http":
        from autoresearch_mcp.server.http import serve_http

        serve_http(
            settings,
            host=args.host,
            port=args.port,
            token=args.token,
            allowed_hosts=args.allowed_host,
            port_file=args.port_file,
        )
        return 0
    import anyio

    from autoresearch_mcp.server.heap import settled
    from autoresearch_mcp.server.stdio import serve_stdio

    with Research(settings) as research:
        mcp = build_server(research)
        with settled():
            anyio.run(serve_stdio, mcp)
    return 0
