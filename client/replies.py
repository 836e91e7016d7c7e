"""Reading a model's reply: the JSON object, code block (a whole file, or new versions of some of its
functions), SEARCH/REPLACE edits, REVERT or DONE it holds, and for the text protocol what the reply
asks the agent to do (`read_text_reply`). Code blocks are read in code_blocks.py, edits in
search_replace.py; prompt text lives in prompts.py."""

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from autoresearch_mcp.client.code_blocks import cut_off, function_versions, parse_code, part_of_file
from autoresearch_mcp.client.search_replace import parse_edits, whole_file_edit
from autoresearch_mcp.contract.edits import EDIT_FORM, EDIT_RULE
from autoresearch_mcp.contract.functions import all_functions


def says_done(reply: str) -> bool:
    """The model ends the run: DONE anywhere, or a reply that opens with "Done:" in any case (refusing
    "Done: No further changes necessary." for its spelling only brings it back)."""
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


# A revert is a line that says so (`REVERT v3`, `Revert to v3`, `**revert: 3**`): "Change the learning
# rate to 0.1 (revert... v3)", with no code, is not one: read as a revert, a reply that means a change
# would change nothing.
_REVERT_LINE = re.compile(
    r"^[\s*#>`_]*revert\b\W*(?:to\W*)?(?:version\W*)?v?(?P<version>\d+)", re.IGNORECASE | re.MULTILINE
)


def describe_reply(text: str, limit: int = 200) -> str:
    """The first line of a text reply outside its code block: what the model says the change does."""
    for line in text.split("```")[0].splitlines():
        line = line.strip().strip("*#`").strip()
        if line and not line.upper().startswith("CODE:"):
            return line[:limit]
    return "a new version (the reply said nothing about it)"


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
    if (opening := _REVERT_LINE.match(first)) is not None:
        # "REVERT v1" then the current version's function again is a revert: read as that function,
        # it would be refused as no change. "REVERT v2" then a whole new train.py while v2 is current
        # is the new file: read as a revert, it would change nothing.
        code = _code_reply(text, current, files)
        if code.action in ("source", "functions") and _changes(code, current, files):
            return code
        return TextReply("revert", version=int(opening["version"]))
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
    if (line := _REVERT_LINE.search(text)) is not None:
        return TextReply("revert", version=int(line["version"]))
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
