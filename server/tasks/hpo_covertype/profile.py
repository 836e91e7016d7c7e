"""How an agent works on hpo-covertype: the stateful agent's system prompt and tools, one step's words."""

from autoresearch_mcp.contract.models import AgentProfile
from autoresearch_mcp.server.tasks.base import PARAMS_TOOLS

PROFILE = AgentProfile(
    system_prompt=(
        "You tune a model autonomously. The server keeps all state; each turn you get its summary. "
        "Call run_experiment once per turn with params you have not tried (omitted ones take their "
        "defaults), chosen from what the summary shows. Use get_experiment_history only when you need "
        "details, add_note to record a strategy or a failed idea. Refusals cost no budget but count as "
        "failures. Only when many experiments have run and no promising idea is left, reply DONE: <reason>."
    ),
    tools=PARAMS_TOOLS,
    how=(
        "Call run_experiment(params, note) with a configuration you have not tried. You may also edit "
        "train.py (modify_train_py with search/replace edits) to change the model setup or features."
    ),
)
