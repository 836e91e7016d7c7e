"""Text hygiene at the server's edges: what comes in from a model, and what goes back to one.

- Free text a model sends (run names, notes, descriptions, reasons) may not hold control characters: a
  NUL, an escape sequence or a bidi override stored today is a broken terminal, log line or page later.
  Multi-line fields keep newlines and tabs; nothing is stripped silently.
- Messages going back carry no absolute paths of this machine (they tell an attacker the layout and
  help nobody fix train.py): a path is shortened to `.../name`.
"""

import re
import unicodedata

from autoresearch_mcp.contract.errors import ResearchError

# Bidirectional overrides and isolates reorder how text is shown (category Cf, not Cc).
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")
_PATH = re.compile(r"(?<![\w.~-])(?:/[\w.@+~-]+)+/([\w.@+~-]+)")


def control_character(text: str, multiline: bool) -> str | None:
    """The first control character in `text` as U+XXXX, or None (newline and tab pass in multi-line)."""
    for char in text:
        if multiline and char in "\n\t":
            continue
        if unicodedata.category(char) == "Cc" or char in _BIDI:
            return f"U+{ord(char):04X}"
    return None


def check_text(text: str | None, what: str, *, multiline: bool = False) -> None:
    """Refuse `text` with a ResearchError naming the first control character in it."""
    if text is None:
        return
    found = control_character(text, multiline)
    if found is not None:
        allowed = " (newlines and tabs are fine)" if multiline else ""
        raise ResearchError(f"{what} contains a control character ({found}); send plain text{allowed}")


def scrub_paths(text: str) -> str:
    """`text` with every absolute path shortened to `.../last-part`."""
    return _PATH.sub(r".../\1", text)
