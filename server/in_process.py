"""A server in the calling process, for the CLI's commands that look at a local database (`runs`,
`show`, `tasks`, `export`, `stop`, `apply`): the same server a spawned one would be (its settings parsed
from the same flags and AUTORESEARCH_* variables, the same start-up chores), reached over the SDK's
in-memory transport instead of stdio. A spawned server costs a second interpreter and its imports
(about three CPU seconds) to answer a few reads; the agent's `run` still spawns one, whose sandboxes
and Ctrl-C are its own.
"""

import argparse
import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from mcp.server import MCPServer

from autoresearch_mcp.contract.env import ENV_LOG_LEVEL
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.main import add_serve_arguments, settings_from_args
from autoresearch_mcp.server.research import Research


@asynccontextmanager
async def serve_here(db: Path, server_args: list[str], log_level: str) -> AsyncIterator[MCPServer]:
    """The server on `db`, with the flags a spawned one would get (`--task-dir PATH`...), logging to
    stderr from `log_level` up (AUTORESEARCH_LOG_LEVEL wins, as it does for a spawned one)."""
    parser = argparse.ArgumentParser(prog="autoresearch-mcp-server")
    add_serve_arguments(parser)
    settings = settings_from_args(parser.parse_args(["--db", str(db), *server_args]))
    with _logging_to_stderr(os.environ.get(ENV_LOG_LEVEL, log_level)), Research(settings) as research:
        yield build_server(research)


@contextmanager
def _logging_to_stderr(level: str) -> Iterator[None]:
    """The server's log lines on stderr as a spawned server writes them, for the block only: the
    command's own logging (none, or a test's) is as it was afterwards."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    before = root.level
    try:
        root.setLevel(level.upper())
    except ValueError:
        raise ResearchError(
            f"${ENV_LOG_LEVEL} is a logging level (DEBUG, INFO, WARNING, ERROR), not {level!r}"
        ) from None
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(before)
