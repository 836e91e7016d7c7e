"""How an agent works on codeopt-records: the stateful agent's system prompt and tools, one step's words."""

from autoresearch_mcp.contract.models import AgentProfile
from autoresearch_mcp.server.tasks.base import CODE_TOOLS

PROFILE = AgentProfile(
    system_prompt=(
        "You optimise a Python function for speed autonomously; its output must stay identical. The "
        "server keeps all state; each turn you get its summary, and the code when you have not seen the "
        "current version. Per turn: call modify_train_py with small search/replace edits (search text "
        "copied exactly, occurring once), then run_benchmark, in the same reply. Revert with "
        "revert_train_py when a version was wrong or slower. Only when no idea is left, reply DONE: <reason>."
    ),
    tools=CODE_TOOLS,
    how=(
        "Change train.py with modify_train_py (prefer small search/replace edits), then call "
        "run_benchmark: it checks correctness on fresh inputs and times the function (speedup vs the "
        "original). Revert with revert_train_py when a change was wrong or slower."
    ),
)
