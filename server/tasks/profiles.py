"""A profile from what a task's harness measured: seconds by line of the artifact's files, sampled over
whole calls and traced line by line in the hottest function (sandbox/profiler.py), turned here, in the
server, into time by top-level function and the hottest function's slowest lines.

The harness's rows are untrusted (candidate code ran in the process that measured them): they are
checked for shape and size, and lines that are not in the files are dropped. A profile is advice, never
a verdict, so a candidate that forges one only misleads itself.
"""

import ast
import math
import re
import sys
from collections.abc import Collection
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.contract.functions import MODULE, split_files
from autoresearch_mcp.contract.profile import MAX_FUNCTIONS, FunctionTime, LineTime, Profile

MAX_ROWS = 20_000
LINES_SHOWN = 5
LINE_FLOOR = 0.05  # a line under this share of its function is not worth naming
Row = tuple[str, int, float, int]  # file, line, seconds, line events (0 where sampled)


class Measured(BaseModel):
    """What a harness reports of a profile run."""

    model_config = ConfigDict(extra="forbid")
    sampled: list[tuple[str, int, float, int]] = Field(max_length=MAX_ROWS)
    traced: list[tuple[str, int, float, int]] | None = Field(default=None, max_length=MAX_ROWS)
    other_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    calls: int = Field(default=1, ge=1, le=100_000)


def _spans(files: dict[str, str]) -> list[tuple[str, str, int, int]]:
    """(file, name, first, last) of every top-level def, then of each file's module-level code."""
    spans = []
    for file, source in files.items():
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                spans.append((file, node.name, first, node.end_lineno or node.lineno))
        spans.append((file, MODULE, 1, max(source.count("\n") + 1, 1)))
    return spans


def _owner(spans: list[tuple[str, str, int, int]], file: str, line: int) -> tuple[str, str] | None:
    for span_file, name, first, last in spans:  # defs come before their file's module span
        if span_file == file and first <= line <= last:
            return span_file, name
    return None


def build_profile(
    text: str, names: list[str] | None, sha256: str, measured: dict[str, Any], how: str
) -> Profile | None:
    """The profile of the artifact `text` (its files `names`) from a harness's report; None when the
    report holds no time in the files."""
    report = Measured.model_validate(measured)
    files = split_files(text, names)
    spans = _spans(files)
    several = len(files) > 1
    per_function: dict[tuple[str, str], float] = {}
    for file, line, seconds, _ in report.sampled:
        owner = _owner(spans, file, line)
        if owner is not None and math.isfinite(seconds) and seconds > 0:
            per_function[owner] = per_function.get(owner, 0.0) + seconds
    total = sum(per_function.values())
    if total <= 0:
        return None
    ranked = sorted(per_function.items(), key=lambda kv: -kv[1])[:MAX_FUNCTIONS]
    bounds = {(file, name): (first, last) for file, name, first, last in spans}

    def label(file: str, name: str) -> str:
        return f"{file}:{name}" if several else name

    functions = [
        FunctionTime(
            name=label(file, name),
            file=file,
            first_line=bounds[(file, name)][0],
            last_line=bounds[(file, name)][1],
            share=round(seconds / total, 4),
            ms=round(seconds / report.calls * 1000, 3),
        )
        for (file, name), seconds in ranked
    ]
    hot_file, hot_name = ranked[0][0]
    lines = _hot_lines(
        report.traced or report.sampled, files[hot_file], hot_file, bounds[(hot_file, hot_name)]
    )
    if hot_name == MODULE:  # module-level code: only its own lines, not the defs inside its span
        lines = [line for line in lines if _owner(spans, hot_file, line.line) == (hot_file, MODULE)]
    other = report.other_s / (report.other_s + total)
    return Profile(
        sha256=sha256,
        how=how,
        functions=functions,
        hot=label(hot_file, hot_name),
        lines=lines,
        other_share=round(other, 4),
    )


def _hot_lines(rows: list[Row], source: str, file: str, span: tuple[int, int]) -> list[LineTime]:
    """The function's slowest lines, with their share of its time (at least LINE_FLOOR each)."""
    within = {}
    for row_file, line, seconds, _ in rows:
        if row_file == file and span[0] <= line <= span[1] and math.isfinite(seconds) and seconds > 0:
            within[line] = within.get(line, 0.0) + seconds
    total = sum(within.values())
    if total <= 0:
        return []
    text = source.splitlines()
    found = []
    for line, seconds in sorted(within.items(), key=lambda kv: -kv[1])[:LINES_SHOWN]:
        if seconds / total < LINE_FLOOR or line > len(text):
            continue
        found.append(LineTime(line=line, share=round(seconds / total, 4), text=text[line - 1].strip()[:200]))
    return found


_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<name>\S+))?\s*$')


def failing_line(traceback: str, files: tuple[str, ...]) -> str | None:
    """`line 70 (count_people): skill_counts[skill_names.index(skill)] += 1`: the innermost frame of a
    traceback in one of `files` (matched by the end of the path) and the line it quotes; None without
    one. A crash answered with the candidate's own failing line, not only the exception."""
    lines = traceback.splitlines()
    found = None
    for index, text in enumerate(lines):
        match = _FRAME.match(text)
        if match and any(match["file"] == f or match["file"].endswith("/" + f) for f in files):
            quoted = lines[index + 1].strip() if index + 1 < len(lines) else ""
            if quoted.startswith(("File ", "Traceback")) or not quoted:
                quoted = ""
            name = match["name"]
            where = f"line {match['line']}" + (f" ({name})" if name and name != "<module>" else "")
            found = f"{where}: {quoted[:160]}" if quoted else where
    return found


_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Iteration|Warning)(?::.*)?$")


_UNBOUND = re.compile(r"^UnboundLocalError: cannot access local variable '(?P<name>\w+)'")
_UNDEFINED = re.compile(r"^NameError: name '(?P<name>\w+)' is not defined")


def exception_line(traceback: str, modules: Collection[str] = ()) -> str | None:
    """`ModuleNotFoundError: No module named 'keras'`: the last line of `traceback` that names an
    exception, clipped, with what it means where Python's words leave a model guessing; None without
    one. `modules` are the names the script's own folder can import (`prepare` for prepare.py). The
    exception, not just the failing line: `from keras.models import Sequential` alone does not say the
    module is missing, and a model told only that line tends to import it again."""
    for text in reversed(traceback.splitlines()):
        if _EXCEPTION.match(text.strip()):
            return text.strip()[:200] + _meaning(text.strip(), modules)
    return None


# The usual short names of modules, as a script imports them.
_ALIASES = {"np": "numpy", "pd": "pandas", "plt": "matplotlib.pyplot", "sk": "sklearn"}


def _meaning(exception: str, modules: Collection[str] = ()) -> str:
    """What Python's words leave a small model guessing.

    An UnboundLocalError means the function assigns the name somewhere (`W2 -= ...`), which makes it
    local in the whole function; Python's message names the symptom, not that cause, so a fix guessed
    from it repeats the assignment. A NameError on a module's name means a missing import, which
    "name 'json' is not defined" does not say, least of all for the folder's own modules
    (`import prepare`)."""
    if (unbound := _UNBOUND.match(exception)) is not None:
        name = unbound["name"]
        return f" (the function assigns {name}, so {name} is local in all of it: `global {name}` for the module's)"
    if (undefined := _UNDEFINED.match(exception)) is not None:
        name = undefined["name"]
        if name in _ALIASES:
            statement = f"import {_ALIASES[name]} as {name}"
        elif name in sys.stdlib_module_names or name in modules:
            statement = f"import {name}"
        else:
            return (
                f" (no line that runs before this one defines {name}: define it, or use a name the file has)"
            )
        return f" (the file uses {name} without importing it: add `{statement}` at the top)"
    return ""
