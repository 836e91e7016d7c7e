"""Reading a model's reply: the JSON object, code block (a whole file, or new versions of some of its
functions), SEARCH/REPLACE edits, REVERT or DONE it holds, and for the text protocol what the reply
asks the agent to do (`read_text_reply`). Prompt text lives in prompts.py."""

import ast
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from autoresearch_mcp.contract.edits import EDIT_FORM, EDIT_RULE, fence_body
from autoresearch_mcp.contract.functions import all_functions, functions_in


def says_done(reply: str) -> bool:
    """The model ends the run: DONE anywhere, or a reply that opens with "Done:" in any case (after
    "Done: No further changes necessary." was refused, Qwen2.5-Coder-1.5B sent it five more times)."""
    return "DONE" in reply or re.match(r"\W*done\W*:", reply, re.IGNORECASE) is not None


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
                f"like part of it. Send the whole new {function.name}, or SEARCH/REPLACE edits."
            )
    return None


def part_of_file(code: str, current: str, files: list[str] | None = None) -> str | None:
    """Why a block taken as the whole new train.py plainly is not one (None if it may be): it lacks
    functions train.py defines, or, in a file without functions, most of its lines. Qwen2.5-Coder-1.5B
    answered a 53-line train.py with a 6-line block defining a helper of its own; taken as the file,
    it crashed, and the model reverted back and forth between the two until it gave up."""
    have = {f.name for f in all_functions(code, files)}
    lacking = [f.name for f in all_functions(current, files) if f.name not in have]
    if lacking:
        return (
            f"Your python block is not all of train.py: it lacks {', '.join(lacking)}, which train.py "
            "defines. Send the whole new train.py, or the new version of one of its functions (the same "
            "name), or SEARCH/REPLACE edits."
        )
    if not all_functions(current, files) and 3 * len(code.splitlines()) < len(current.splitlines()):
        return (
            f"Your python block has {len(code.splitlines())} lines, train.py {len(current.splitlines())}: "
            "it looks like part of it. Send the whole new train.py, or SEARCH/REPLACE edits."
        )
    return None


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def _returns_value(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(node, ast.Return) and node.value is not None for node in ast.walk(function))


def function_versions(
    code: str, current: str, files: list[str] | None = None
) -> list[tuple[str, str]] | None:
    """New versions of some of train.py's top-level functions: a code block holding only defs that
    train.py has (and import lines), but not all of them, as replace_function's (name, source) pairs,
    the imports sent with the first. None when the block is a whole file (or not code at all)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    defs = functions_in(code)
    if not defs or len(imports) + len(defs) != len(tree.body):
        return None
    existing = {f.name for f in all_functions(current, files)}
    names = [f.name for f in defs]
    if not set(names) <= existing or len(set(names)) != len(names):
        return None
    if existing <= set(names) and _only_definitions(current):
        return None  # every function of a file that holds nothing else: the whole file
    lines = code.splitlines()
    header = "".join("\n".join(lines[node.lineno - 1 : node.end_lineno]) + "\n" for node in imports)
    return [(f.name, (header if i == 0 else "") + f.source) for i, f in enumerate(defs)]


def _only_definitions(source: str) -> bool:
    """Whether a file holds only imports, functions, classes and its docstring (no code at module level:
    digits-mlp's train.py trains in a loop there, and a block with its one function is not all of it)."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    kinds = ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    docstring = (
        [0] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []
    )
    return all(isinstance(node, kinds) for i, node in enumerate(body) if i not in docstring)


CODE_MARKER = re.compile(r"^CODE:", re.MULTILINE)
PROMPT_LABEL = re.compile(r"^(?:Benchmark:|=== Iteration \d+)", re.MULTILINE)


def parse_code(text: str) -> str | None:
    """The proposed source: after `CODE:` at the start of a line (fenced or not), else the last fenced
    python block holding a `def` (small models often drop the marker and answer with a plain code block).
    A marker elsewhere is not one: the 1.5B model echoed "Reply with CODE: and the complete file." after
    its block, or opened the block with `# CODE:`, and the prose after either was taken for the code."""
    found = CODE_MARKER.search(text)
    if found is not None:
        body = text[found.end() :].strip("\n")
        if "```" in body:
            body = _fenced_blocks(body)[0] if _fenced_blocks(body) else body.replace("```", "")
    else:
        blocks = [b for b in _fenced_blocks(text) if "def " in b]
        if not blocks:
            return None
        body = blocks[-1]
    # The stateless prompt lists each version as `Code:`, the code, `Benchmark:`, its result, unfenced;
    # Qwen2.5-Coder-1.5B ended 6 of 10 whole files with "Benchmark:" (and "Not run yet."), each refused
    # as invalid syntax. No Python line is a bare label at column 0, so the code ends there.
    body = PROMPT_LABEL.split(body, maxsplit=1)[0]
    body = body.strip("\n") + "\n"
    return body if body.strip() else None


def _fenced_blocks(text: str) -> list[str]:
    """The bodies of ```-fenced blocks, without their language tag."""
    return [fence_body(block) for block in text.split("```")[1::2]]


@dataclass(frozen=True)
class TextReply:
    """What a text-protocol reply asks for: edits, a whole new file (source), a revert, DONE, or nothing
    the agent can use (refused, with why when the reply itself was wrong); "none" only inside the reader
    (no code at all)."""

    action: Literal["edits", "source", "functions", "revert", "done", "refused", "none"]
    edits: list[tuple[str, str]] | None = None
    source: str | None = None
    functions: list[tuple[str, str]] | None = None  # (name, new definition) for replace_function
    version: int | None = None
    why_not: str | None = None  # refused: what was wrong (None: the caller says what the format is)
    kind: str = ""  # refused: the refusal's kind, as results.json counts them


def read_text_reply(text: str, current: str, ran_well: bool, files: list[str] | None = None) -> TextReply:
    """One text reply against the current train.py; DONE ends the run only once an experiment `ran_well`.
    A reply that opens with REVERT is a revert, unless the code it holds would change train.py. Edits win
    over a revert; a python block (new versions of some functions, or a whole file; or one edit with an
    empty SEARCH) over edits."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if (version := parse_revert(first)) is not None and first.strip("*` ").upper().startswith("REVERT"):
        # "REVERT v1" then the current version's function again (Qwen2.5-Coder-1.5B, four times) is a
        # revert: read as that function, each was refused as no change. "REVERT v2" then a whole new
        # train.py while v2 was current (five times) is the new file: read as a revert, each changed
        # nothing, and the model gave up.
        code = _code_reply(text, current, files)
        if code.action in ("source", "functions") and _changes(code, current, files):
            return code
        return TextReply("revert", version=version)
    edits = parse_edits(text)
    if (code := _code_reply(text, current, files, edits)).action != "none":
        return code
    if edits is not None:
        if any(not search.strip() for search, _ in edits):
            # Refused here: the server's answer ("edits.0.search: String should have at least 1
            # character") read as a request to rename a variable called search, six times over.
            why_not = f"Your edit's SEARCH part was empty. {EDIT_RULE}, for example:\n{EDIT_FORM}\n"
            return TextReply("refused", why_not=why_not, kind="empty_edit")
        return TextReply("edits", edits=edits)
    version = parse_revert(text)
    if version is not None:
        return TextReply("revert", version=version)
    if says_done(text) and ran_well:
        return TextReply("done")
    return TextReply("refused", kind="unparsed_reply")


def _code_reply(
    text: str, current: str, files: list[str] | None, edits: list[tuple[str, str]] | None = None
) -> TextReply:
    """What the reply's python block is: new versions of functions, a whole file, a refusal saying why it
    is neither, or (action "none") no code at all."""
    code = whole_file_edit(edits) if edits else parse_code(text)
    if code is None:
        return TextReply("none")
    why_not = cut_off(code, current)
    if why_not is not None:
        return TextReply("refused", why_not=why_not, kind="cut_off_code")
    functions = function_versions(code, current, files)
    if functions is not None:
        return TextReply("functions", functions=functions)
    why_not = part_of_file(code, current, files)
    if why_not is not None:
        return TextReply("refused", why_not=why_not, kind="part_of_file")
    return TextReply("source", source=code)


def _changes(reply: TextReply, current: str, files: list[str] | None) -> bool:
    """Whether a whole file or new function versions differ from the current train.py."""
    if reply.source is not None:
        return _normal(reply.source) != _normal(current)
    now = {f.name: _normal(f.source) for f in all_functions(current, files)}
    return any(now.get(name) != _normal(source) for name, source in reply.functions or [])


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines() if line.strip())
