"""Prompt text: the stateful agent's per-turn message and hints (its system prompt comes with the task
from the server), and the stateless baseline's single message in the paper's format (the instructions,
then one line per earlier HPO experiment or every earlier version of the code in full, then the request
for the next proposal)."""

import ast
import json
import re
from typing import Any

from pydantic import BaseModel

from autoresearch_mcp.contract.edits import EDIT_FORM, EDIT_RULE, fence_body
from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.models import Experiment
from autoresearch_mcp.contract.variety import least_varied_first

NUDGE = "Call a tool for the next experiment, or reply DONE: <reason>."
# The request that ends a turn under the text protocol: "Next?" alone drew status reports ("Done: the
# sorting was replaced...") from Qwen2.5-Coder-1.5B instead of code.
TEXT_TURN = "Next? One line on what you change, then SEARCH/REPLACE edits (or the whole new train.py)."
# Text replies take edits (EDIT_FORM): copying the whole 148-line train.py, the 1.5B model dropped
# lines in most replies and spent 50-110 s a call on it.
# For a code task whose profile has no text protocol of its own.
TEXT_SYSTEM_PROMPT = (
    "You improve train.py autonomously. Each turn shows the run's summary and the current train.py. "
    f"Reply with one line saying what you change and why, then one or more edits. {EDIT_RULE}, for "
    f"example:\n{EDIT_FORM}\n"
    "(or the whole new train.py in one ```python block). Each new version is run and measured at once. "
    "To go back to version N, reply REVERT v<N>. When no idea is left, reply DONE: <reason>."
)
NO_EXPERIMENT_YET = "No experiment has run yet: call a tool to run the first one."


def says_done(reply: str) -> bool:
    """The model ends the run: DONE anywhere, or a reply that opens with "Done:" in any case (after
    "Done: No further changes necessary." was refused, Qwen2.5-Coder-1.5B sent it five more times)."""
    return "DONE" in reply or re.match(r"\W*done\W*:", reply, re.IGNORECASE) is not None


def text_format(latest_version: int, used: int) -> str:
    """What a text reply may be, offering only what can work now: Qwen2.5-Coder-1.5B answered a generic
    "or REVERT v<N>" with `REVERT v3` when only v1 existed, and DONE before anything ran."""
    options = [
        "one line saying what you change, then SEARCH/REPLACE edits (or the whole new train.py in one "
        "```python block)"
    ]
    if latest_version > 1:
        options.append(f"REVERT v<N> with N from 1 to {latest_version}")
    if used > 0:
        options.append("DONE: <reason>")
    return "Reply with " + "; or ".join(options) + "."


def text_nudge(reply: str, latest_version: int, used: int) -> str:
    """The answer to a text reply the agent could not use: what was wrong with it, then the format."""
    if "SEARCH" in reply.upper() and "REPLACE" in reply.upper():
        wrong = f"Your edit was not in the form the agent reads. {EDIT_RULE}, for example:\n{EDIT_FORM}\n"
    elif "```" in reply:
        wrong = "Your code block held no whole train.py (no `def`): the reply ended early."
    elif says_done(reply) and used == 0:
        wrong = "No version has been benchmarked yet: DONE is early."
    else:
        wrong = "Your reply held no ```python block."
    return f"{wrong} {text_format(latest_version, used)}"


def repeat_hint(tool: str, params: dict[str, object], tried: dict[str, list[object]], refusals: int) -> str:
    """Added to an exact-repeat refusal: a small model that copies an earlier configuration needs to
    be told which value to change (it ignores a general "try different params") and which values that
    param already took (else it picks one of them again). `tried`: every param of the task, in schema
    order, with the values it took so far. The param named rotates with each refusal over the least
    varied ones first; capable models never repeat, so never see it."""
    if tool == "run_benchmark":
        return "This version of train.py is already benchmarked: change it with modify_train_py first."
    names = least_varied_first({n: len(values) for n, values in tried.items()}) or sorted(params)
    if not names:
        return "Set at least one parameter to a value not tried yet."
    name = names[refusals % len(names)]
    sent = f"you sent {params[name]!r}; " if name in params else ""
    values = ", ".join(repr(v) for v in tried.get(name, [])[:8])
    return f"Change at least one value this time, e.g. {name} ({sent}tried so far: {values})."


def stateful_turn(summary: str, request: str, code: str | None = None) -> str:
    """The per-turn message: the summary, the current train.py in a code task, the request."""
    shown = f"\ntrain.py (current):\n```python\n{code.rstrip()}\n```" if code is not None else ""
    return f"{summary}{shown}\n{request}"


# -- the stateless baseline, in the paper's format -------------------------------------------------


def _fmt_range(prop: dict[str, Any]) -> str:
    low, high = prop.get("minimum"), prop.get("maximum")
    kind = prop.get("type", "number")
    bounds = f"[{low}, {high}]" if low is not None and high is not None else ""
    return f"{kind} {bounds}, default {prop.get('default')}".strip()


class CodeVersion(BaseModel):
    """One version of the function in the stateless code history, with its benchmark text."""

    iteration: int
    code: str
    headline: str
    benchmark: str


def stateless_hpo(
    task_description: str, params_schema: dict[str, Any], metric: str, history: list[Experiment]
) -> str:
    """One message: task, search space with ranges, output format, then every earlier experiment."""
    space = "\n".join(
        f"- {name}: {_fmt_range(prop)}" + (f" ({prop['description']})" if prop.get("description") else "")
        for name, prop in params_schema.get("properties", {}).items()
    )
    lines = [
        f"You are optimizing hyperparameters. Task: {task_description}",
        f"Goal: maximize {metric} on the held-out test split.",
        "Search space:",
        space,
        'Reply with one JSON object of hyperparameters, e.g. {"n_estimators": 200, "max_depth": 8}.',
        "",
        "Experiment history:",
    ]
    if not history:
        lines.append("(none yet)")
    best: Experiment | None = None
    for exp in history:
        m = exp.metrics
        if exp.status == "ok":
            lines.append(
                f"Iter {exp.iteration}: F1={m.get(metric, 0):.4f}, precision={m.get('precision', 0):.4f}, "
                f"recall={m.get('recall', 0):.4f}, params={json.dumps(exp.params)}"
            )
            if best is None or (exp.metric or 0) > (best.metric or 0):
                best = exp
        else:
            error = (exp.error_tail or "").strip().splitlines()[:1]
            lines.append(
                f"Iter {exp.iteration}: {exp.status.upper()} ({error[0] if error else 'no output'}), "
                f"params={json.dumps(exp.params)}"
            )
    if best is not None:
        lines.append(f"Best so far: Iter {best.iteration} with F1={(best.metric or 0):.4f}")
    lines.append("Propose the next configuration as JSON.")
    return "\n".join(lines)


def stateless_code(task_description: str, versions: list[CodeVersion]) -> str:
    """One message: the task and every earlier version in full with its benchmark."""
    lines = [
        f"You are optimizing Python code for speed. Task: {task_description}",
        "The function must keep its name, signature and exact output.",
        "",
        "Full optimization history:",
    ]
    for v in versions:
        lines.append(f"=== Iteration {v.iteration} ({v.headline}) ===")
        lines.append("Code:")
        lines.append(v.code.rstrip("\n"))
        lines.append("Benchmark:")
        lines.append(v.benchmark)
    lines.append("Propose the next optimized version. Reply with CODE: and the complete function.")
    return "\n".join(lines)


def benchmark_text(
    status: str, metrics: dict[str, float], error: str | None, repeats: int | None
) -> tuple[str, str]:
    """The (headline, benchmark block) pair of one stateless code iteration."""
    if status != "ok":
        # The same line the stateful summary shows: both modes are told what went wrong alike.
        return f"{status}", f"{status.upper()}: {error_headline(error or '') or status}"
    time_ms, base_ms, speedup = (
        metrics.get("time_ms", 0.0),
        metrics.get("baseline_ms", 0.0),
        metrics.get("speedup", 0.0),
    )
    runs = f" (median of {repeats} runs)" if repeats else ""
    return (
        f"time={time_ms:.2f}ms, speedup={speedup:.2f}x",
        f"Execution time: {time_ms:.3f} ms{runs}\nBaseline time: {base_ms:.3f} ms\nSpeedup: {speedup:.2f}x",
    )


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a reply (models wrap it in prose or code fences)."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char != "{":
            continue
        try:
            value, _ = decoder.raw_decode(text[start:])
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_revert(text: str) -> int | None:
    """`REVERT v3` (or `Revert to v3`, `revert: 3`) in a text reply: the version to go back to."""
    match = re.search(r"\brevert\b\W*(?:to\W*)?(?:version\W*)?v?(\d+)", text, re.IGNORECASE)
    return int(match.group(1)) if match else None


def describe_reply(text: str, limit: int = 200) -> str:
    """The first line of a text reply outside its code block: what the model says the change does."""
    for line in text.split("```")[0].splitlines():
        line = line.strip().strip("*#`").strip()
        if line and not line.upper().startswith("CODE:"):
            return line[:limit]
    return "a new version (the reply said nothing about it)"


# Edits in the forms Qwen2.5-Coder-1.5B wrote when asked for aider's: the search lines end at a
# ======= line and start after a SEARCH line (with or without <<<<<<<) or an opening ``` fence; the
# replacement runs to >>>>>>> REPLACE, a closing fence or the end. Or SEARCH and REPLACE labels over
# fenced blocks (the SEARCH label sometimes left out), or `Search: ...` / `Replace with: ...` on one line
# each, or "Replace `...` with `...`" in prose.
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_SEARCH_LINE = re.compile(r"^[\s<*#`]*SEARCH\b[^:\n]*:?[\s*`]*$", re.IGNORECASE)  # a label alone on its line
_FENCE = re.compile(r"^\s*```")
_REPLACE_END = re.compile(r"^\s*>{5,9}|^[\s*#`]*REPLACE\W*$", re.IGNORECASE)
_LABELLED_EDIT = re.compile(
    r"(?:^[^\w\n]*SEARCH\b[^\n]*\n\s*)?```[^\n]*\n(.*?)```[^\n]*\n\s*[^\w\n]*REPLACE\b[^\n]*\n\s*```[^\n]*\n(.*?)```",
    re.DOTALL | re.MULTILINE | re.IGNORECASE,
)
_INLINE_EDIT = re.compile(
    r"^[^\w\n]*SEARCH[ \t]*:?[ \t]*(`?)([^`\n]+)\1[ \t]*\n[^\w\n]*REPLACE(?:[ \t]+WITH)?[ \t]*:?[ \t]*(`?)([^`\n]*)\3[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)
# "Replace `a` with `b`." or "Change `a` to `b`" in prose, quoted with backticks or quotes (its first
# reply on seed 42 held five; seed 123 wrote the second).
_PROSE_EDIT = re.compile(
    r"\b(?:replace|change)\s+(?:the\s+line\s+)?([`'\"])(.+?)\1\s+(?:with|to)\s+([`'\"])(.*?)\3", re.IGNORECASE
)


def parse_edits(text: str) -> list[tuple[str, str]] | None:
    """SEARCH/REPLACE edits in a text reply, in order, as modify_train_py's (search, replace) pairs;
    None when the reply holds none. The agent sends them as written (an empty search is refused
    before that): the server applies them or says why not."""
    edits = _divided_edits(text.split("\n"))
    if not edits:
        edits = [(a, b) for a, b in _LABELLED_EDIT.findall(text)]
    if not edits:
        edits = [(f"{a}\n", f"{b}\n") for _, a, _, b in _INLINE_EDIT.findall(text)]
    if not edits and parse_code(text) is None:  # with a whole file beside it, the prose describes it
        edits = [(a, b) for _, a, _, b in _PROSE_EDIT.findall(text)]
    return edits or None


def whole_file_edit(edits: list[tuple[str, str]]) -> str | None:
    """One edit with an empty SEARCH whose replacement holds a function: a whole new file, as aider reads
    an empty SEARCH. Qwen2.5-Coder-1.5B answered "SEARCH/REPLACE edits:", "=======", then the file."""
    if len(edits) == 1 and not edits[0][0].strip() and "def " in edits[0][1]:
        return edits[0][1]
    return None


def _divided_edits(lines: list[str]) -> list[tuple[str, str]]:
    edits: list[tuple[str, str]] = []
    done = 0  # lines before this belong to an earlier edit
    for divider in range(len(lines)):
        if divider < done or not _DIVIDER.match(lines[divider]):
            continue
        start = next(
            (i for i in range(divider - 1, done - 1, -1) if _SEARCH_LINE.match(lines[i])),
            None,
        )
        if start is None:  # no SEARCH line: the search lines open with a fence
            start = next(
                (
                    i
                    for i in range(divider - 1, done - 1, -1)
                    if _FENCE.match(lines[i]) and any(line.strip() for line in lines[i + 1 : divider])
                ),
                None,
            )
        prose = start is None
        if start is None:  # prose, then the divider: an empty search (a whole file may follow)
            start = divider - 1
        end = next(
            (
                i
                for i in range(divider + 1, len(lines))
                if _REPLACE_END.match(lines[i])
                or _DIVIDER.match(lines[i])
                or (_FENCE.match(lines[i]) and any(line.strip() for line in lines[divider + 1 : i]))
            ),
            len(lines),
        )
        search, replace = (
            _unfenced("\n".join(lines[start + 1 : divider])),
            _unfenced("\n".join(lines[divider + 1 : end])),
        )
        if prose and not replace:
            continue  # a line of = signs under prose, not an edit
        edits.append((search, replace))
        done = end + 1
    return edits


def _unfenced(part: str) -> str:
    """An edit part without the ``` lines some models put around it, and without blank edge lines."""
    lines = part.split("\n")
    while lines and (lines[0].strip().startswith("```") or not lines[0].strip()):
        lines.pop(0)
    while lines and (lines[-1].strip().startswith("```") or not lines[-1].strip()):
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def cut_off(code: str, current: str) -> str | None:
    """Why a whole-file reply is plainly the start of one (None if it is not): a function that returns
    a value in the current train.py and, in the reply, never does. Taken as the whole file, the 1.5B
    model's first 11 lines of a 148-line function became train.py v3, every later version built on it."""
    try:
        new, old = ast.parse(code), ast.parse(current)
    except SyntaxError:
        return None  # the server's check says what is wrong with it
    returning = {f.name for f in _functions(old) if _returns_value(f)}
    for function in _functions(new):
        if function.name in returning and not _returns_value(function):
            return (
                f"Your python block's {function.name} never returns a value (train.py's does): it looks "
                "like part of the file. Send the part you change as SEARCH/REPLACE edits, or the whole file."
            )
    return None


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def _returns_value(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(node, ast.Return) and node.value is not None for node in ast.walk(function))


def parse_code(text: str) -> str | None:
    """The proposed source: after `CODE:` (fenced or not), else the last fenced python block holding a
    `def` (small models often drop the marker and answer with a plain code block)."""
    marker = text.find("CODE:")
    if marker >= 0:
        body = text[marker + len("CODE:") :].strip("\n")
        if "```" in body:
            body = _fenced_blocks(body)[0] if _fenced_blocks(body) else body.replace("```", "")
    else:
        blocks = [b for b in _fenced_blocks(text) if "def " in b]
        if not blocks:
            return None
        body = blocks[-1]
    body = body.strip("\n") + "\n"
    return body if body.strip() else None


def _fenced_blocks(text: str) -> list[str]:
    """The bodies of ```-fenced blocks, without their language tag."""
    return [fence_body(block) for block in text.split("```")[1::2]]
