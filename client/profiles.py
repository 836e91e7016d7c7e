"""Which agent profile the bundled agent works by: `small` or `neutral` (AgentConfig.profile).

`small` holds what helps a small local model (the summary names a value to change, a refusal names
one, a suggested setting of train.py after a reply that changed nothing, a DONE before the budget's
`done_from` share is questioned, a revert counted as a failure); `neutral` states facts and gives no
orders, as hosts and outside agents read the server's turn by default.

`--profile auto` (the default) picks `small` for the scripted double (it plays the small model the
committed token shape was measured with), for an OpenAI-compatible endpoint on this machine (a local
llama.cpp, vLLM or Ollama server), and for a model whose name says 3B or fewer parameters; `neutral`
for everything else (Anthropic's models, api.openai.com, a remote endpoint).
"""

import ipaddress
import os
import re
from typing import Literal
from urllib.parse import urlsplit

from autoresearch_mcp.client.check import AgentProfileName

ProfileChoice = Literal["auto", "small", "neutral"]
SMALL_PARAMS_B = 3.0  # a model of this many billion parameters or fewer gets the small profile
# `qwen2.5-coder-1.5b`, `Llama-3.2-3B-Instruct`, `phi-3-mini-3.8b`: a size in billions, ending the word.
_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*b(?![a-z])", re.IGNORECASE)


def is_loopback(url: str | None) -> bool:
    """Whether `url`'s host is this machine (localhost, 127.0.0.0/8, ::1)."""
    host = urlsplit(url or "").hostname
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def model_size_b(model: str | None) -> float | None:
    """The parameter count, in billions, a model's name gives (the last size it names); None if none."""
    found = _SIZE.findall((model or "").replace("_", "-"))
    return float(found[-1]) if found else None


def pick_profile(
    choice: ProfileChoice, llm: str, base_url: str | None = None, model: str | None = None
) -> AgentProfileName:
    """The profile `choice` names, or for `auto` the one the rule above picks."""
    if choice != "auto":
        return choice
    if llm.startswith("scripted"):
        return "small"
    if llm == "openai" and is_loopback(base_url or os.environ.get("OPENAI_BASE_URL")):
        return "small"
    size = model_size_b(model)
    return "small" if size is not None and size <= SMALL_PARAMS_B else "neutral"
