"""How a run's stamps and direction read wherever a person sees them (the CLI, the dashboard, the
report): one wording on both sides of the wire; and how a command says a line on stderr."""

import shutil
import sys
import textwrap
from datetime import UTC, datetime
from typing import TextIO


def utc_minute(stamp: str | None, missing: str = "-") -> str:
    """A stored ISO timestamp to the minute, in UTC and saying so; `missing` where there is none."""
    if not stamp:
        return missing
    moment = datetime.fromisoformat(stamp)
    moment = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def better_way(direction: str) -> str:
    """ "higher is better" for a metric to maximise, else "lower is better"."""
    return "higher is better" if direction == "max" else "lower is better"


def say(message: str, stream: TextIO | None = None) -> None:
    """A message on stderr: one line in a pipe or a log; on a terminal, wrapped between words, so that
    no id, path or command is broken across two lines."""
    stream = stream or sys.stderr
    if stream.isatty():
        width = shutil.get_terminal_size().columns
        message = textwrap.fill(message, width=width, break_long_words=False, break_on_hyphens=False)
    print(message, file=stream)
