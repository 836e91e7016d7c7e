"""The `autoresearch-mcp` command: serve, run, look at what is stored, stop, rename, tag or delete a
run, compare, dashboard, report.

A user's mistake (a bad flag, an unknown task, a refused call, a missing key) is one line on stderr and
exit status 2, never a traceback; `--help` on every command shows the defaults and an example.
"""

import argparse
import difflib
import os
import re
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, NoReturn

from autoresearch_mcp import __version__
from autoresearch_mcp.client import (
    apply_cmd,
    compare,
    export_cmd,
    folder_cmd,
    inspect_cmd,
    run_cmd,
    stop_cmd,
)
from autoresearch_mcp.contract.display import say
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server import import_cmd, manage
from autoresearch_mcp.server import main as serve
from autoresearch_mcp.server.dashboard import cli as dashboard_cli

PROG = "autoresearch-mcp"

DESCRIPTION = f"""Stateful autonomous ML experimentation over MCP: a server that keeps every experiment,
and a thin agent that drives it.

The agent's default backend is the paid Anthropic API (--llm anthropic, needs ANTHROPIC_API_KEY);
--llm openai uses any OpenAI-compatible endpoint (e.g. a local server); --llm scripted is an offline
test double that needs no model.

examples:
  {PROG} run --task hpo-covertype --llm scripted --budget 5
  {PROG} runs
  {PROG} show latest
  {PROG} report latest"""

# One example per command, shown at the end of its --help.
EXAMPLES = {
    "serve": f"{PROG} serve --db runs.db                      # stdio, as a host starts it\n"
    f"  {PROG} serve --transport http --port 8765",
    "run": f"{PROG} run --task hpo-covertype --llm scripted --budget 5\n"
    f"  {PROG} run --task codeopt-records --llm openai --base-url http://127.0.0.1:8080/v1\n"
    f"  {PROG} run --run-id r-0123456789 --llm scripted        # resume a run",
    "compare": f"{PROG} compare --task hpo-covertype --llm scripted --budget 15 --seeds 42,123 --out results",
    "dashboard": f"{PROG} dashboard --db runs.db                  # then open http://127.0.0.1:8770/",
    "report": f"{PROG} report latest --out report.html",
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keep the examples' line breaks; show a default wherever the help text does not already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default in (None, False, argparse.SUPPRESS)
            or "default" in text.lower()
            or isinstance(action, argparse._VersionAction)
        ):
            return text
        return f"{text} (default: %(default)s)"


# argparse's words for a value outside `choices` (quoted with ' before Python 3.12's change, both read).
INVALID_CHOICE = re.compile(r"invalid choice: '?(?P<given>[^'(]*?)'? \(choose from (?P<choices>.*)\)$")


def did_you_mean(given: str, known: list[str]) -> str:
    """` (did you mean X?)` when one known word is close to `given`, else nothing."""
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class Parser(argparse.ArgumentParser):
    """A usage error is one line (not the whole usage block) and exit status 2; a misspelt command,
    choice or flag gets the closest right one."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        if (match := INVALID_CHOICE.search(message)) is not None:
            choices = [c.strip(" '") for c in match["choices"].split(",")]
            message += did_you_mean(match["given"], choices)
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def parse_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse's, but an unknown flag is checked against the flags of the command it was given
        to (argparse reports it from the top parser, which knows none of them)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._command_parser(parsed)
            known = list(command._option_string_actions) if command is not None else []
            flags = [word.partition("=")[0] for word in extras if word.startswith("-")]
            hint = did_you_mean(flags[0], known) if flags else ""
            (command or self).error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    def _command_parser(self, parsed: argparse.Namespace) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices.get(getattr(parsed, action.dest, None) or "")
        return None


def serve_here(db: Path, server_args: list[str], log_level: str) -> AbstractAsyncContextManager[Any]:
    """server/in_process.py's server, imported when a command asks for it: `run` spawns its own."""
    from autoresearch_mcp.server.in_process import serve_here as serving

    return serving(db, server_args, log_level)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=PROG, description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # The commands that look at a local database ask a server in this process (the client reads
    # `serve_here` off its arguments: it imports nothing of the server), not a spawned one.
    parser.set_defaults(serve_here=serve_here)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_cmd.configure(sub)
    inspect_cmd.configure(sub)
    export_cmd.configure(sub)
    stop_cmd.configure(sub)
    manage.configure(sub)
    import_cmd.configure(sub)
    compare.configure(sub)
    folder_cmd.configure(sub)
    apply_cmd.configure(sub)
    dashboard_cli.configure(sub)
    serve.configure(sub)
    for action in sub._choices_actions:  # each command's one-line help heads its own --help
        command = sub.choices[action.dest]
        command.description = command.description or (action.help or "").capitalize() + "."
        if action.dest in EXAMPLES and not command.epilog:
            command.epilog = "example:\n  " + EXAMPLES[action.dest]
    return parser


def user_error(exc: BaseException) -> Exception | None:
    """The user's error inside `exc` (a ResearchError, or an LLMError: its message says what to do), even
    when a task group wrapped it in exception groups."""
    from autoresearch_mcp.client.llm.base import LLMError

    if isinstance(exc, ResearchError | LLMError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := user_error(inner)) is not None:
                return found
    return None


def one_line(message: str) -> str:
    return " ".join(message.split())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of our output left (`show | head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except BaseException as exc:  # the top-level handler: a user's error is one line, a bug is not hidden
        if (error := user_error(exc)) is None:
            raise
        say(f"{PROG}: {one_line(str(error))}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
