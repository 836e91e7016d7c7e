"""A task folder's editable files as the one text the artifact store versions (train.py's place);
the server packs them, `autoresearch-mcp apply` unpacks a version back into files, and `show`, the
dashboard and the report diff two versions file by file, each file under its own name (`slow.py`, not
train.py, the store's word for the artifact).

One file: its text, unchanged. Several: each file's text under a header line naming it, in the order
`edit` lists them; search/replace edits then work across the files as on one, and a whole new `source`
must keep the headers. What comes back is checked: the same files, in the same order, nothing else.
"""

import difflib
import re
from dataclasses import dataclass
from typing import Any

HEADER = "# ==== autoresearch file: {name} ===="
_HEADER = re.compile(r"^# ==== autoresearch file: (?P<name>\S+) ====$", re.M)


def pack(files: list[tuple[str, str]]) -> str:
    if len(files) == 1:
        return files[0][1]
    return "".join(
        HEADER.format(name=name) + "\n" + source + ("" if source.endswith("\n") else "\n")
        for name, source in files
    )


def unpack(text: str, names: list[str]) -> dict[str, str]:
    """The files of an artifact text; ValueError saying what is wrong with the headers."""
    if len(names) <= 1:
        return {names[0]: text} if names else {}
    found = list(_HEADER.finditer(text))
    got = [match["name"] for match in found]
    if got != names:
        raise ValueError(
            f"the files must stay under their header lines, in this order: {', '.join(names)} (each as "
            f"`{HEADER.format(name=names[0])}`); found {', '.join(got) or 'no header'}"
        )
    if text[: found[0].start()].strip():
        raise ValueError(f"text before the first header line ({HEADER.format(name=names[0])})")
    files = {}
    for index, match in enumerate(found):
        end = found[index + 1].start() if index + 1 < len(found) else len(text)
        files[match["name"]] = text[match.end() + 1 : end]
    return files


def edited_files(config: dict[str, Any]) -> list[str]:
    """The files a run's artifact holds, as its task declared them when it started (the run keeps them
    in its options, so this holds where the task folder is not registered): train.py by default."""
    return config.get("options", {}).get("files") or ["train.py"]


@dataclass(frozen=True)
class FileDiff:
    name: str
    lines: list[str]  # `--- NAME vA` and `+++ NAME vB` first, then the hunks


def file_diffs(old: str, new: str, names: list[str], a: int, b: int) -> list[FileDiff]:
    """Version a -> version b, file by file in the artifact's order; a file that did not change has none.
    The one diff that `show` prints and the dashboard and the report render."""
    before, after = unpack(old, names), unpack(new, names)
    diffs = []
    for name, text in after.items():
        lines = difflib.unified_diff(
            before.get(name, "").splitlines(), text.splitlines(), f"{name} v{a}", f"{name} v{b}", lineterm=""
        )
        if unified := list(lines):
            diffs.append(FileDiff(name, unified))
    return diffs
