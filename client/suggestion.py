"""What the model made of the optimiser's suggestion (start_run's `suggest`): took it, changed it, or
ignored it, read from the turn's summary and the reply. The transcript records it on the call's line
(meter.py), so a run's uptake is counted from its transcript alone.

Took: the proposal gives every suggested value. Changed: at least half of them, not all (it kept the
idea and moved some values). Ignored: fewer. Values compare as the summary prints them (floats to 4
significant digits), so a value copied from the line matches, and a coincidence on one int or choice
among several params does not make a proposal "changed".
"""

from typing import Any, Literal

from autoresearch_mcp.client.llm.base import LLMRequest, LLMResponse
from autoresearch_mcp.client.replies import parse_json_object
from autoresearch_mcp.contract.tools import ToolName

PREFIX = "optimiser suggests: "  # the summary's line (server/suggest.py)
PROPOSING = (ToolName.RUN_EXPERIMENT, ToolName.SUBMIT_TRAINING_JOB)
Uptake = Literal["took", "changed", "ignored"]


def offered(request: LLMRequest) -> dict[str, str] | None:
    """The suggestion in the turn's last user message, as printed (`name=value` pairs)."""
    users = [m for m in request.messages if m.role == "user"]
    if not users:
        return None
    for line in users[-1].text.splitlines():
        if line.startswith(PREFIX):
            pairs = (word.partition("=") for word in line.removeprefix(PREFIX).split())
            return {name: value for name, sep, value in pairs if sep}
    return None


def proposed(response: LLMResponse) -> dict[str, Any] | None:
    """The params the reply proposes: a run_experiment (or job) call's, else its JSON object."""
    for call in response.tool_calls:
        if call.name in PROPOSING:
            params = call.arguments.get("params", call.arguments)
            return params if isinstance(params, dict) else None
    found = parse_json_object(response.text)
    if found is not None and set(found) == {"params"} and isinstance(found["params"], dict):
        return found["params"]
    return found


def uptake(request: LLMRequest, response: LLMResponse) -> Uptake | None:
    """took, changed or ignored; None where the turn offered nothing or the reply proposed nothing."""
    suggestion, proposal = offered(request), proposed(response)
    if not suggestion or proposal is None:
        return None
    same = sum(
        1 for name, value in suggestion.items() if name in proposal and _shown(proposal[name]) == value
    )
    if same == len(suggestion):
        return "took"
    return "changed" if 2 * same >= len(suggestion) else "ignored"


def _shown(value: Any) -> str:
    """A value as the summary prints it (Task.format_params)."""
    return f"{value:.4g}" if isinstance(value, float) else str(value)
