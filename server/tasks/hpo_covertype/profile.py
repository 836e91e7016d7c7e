"""How an agent works on hpo-covertype: the stateful agent's system prompt and tools, one step's words.

Written for small models first: one tool, one call per reply, params sent as changes to the best (the
summary shows the best as its changes from the defaults), the search space with its defaults in the
prompt rather than in a schema the model may not read.
"""

from pydantic import BaseModel

from autoresearch_mcp.contract.models import AgentProfile, StatelessWords
from autoresearch_mcp.contract.tools import ToolName


def search_space(params: type[BaseModel]) -> str:
    """`n_estimators 10-1000 (100), max_depth 1-15 (6), ...`: bounds and defaults of the params model."""
    parts = []
    for name, field in params.model_fields.items():
        low = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None)
        high = next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None)
        span = f" {low:g}-{high:g}" if low is not None and high is not None else ""
        parts.append(f"{name}{span} ({field.default:g})")
    return ", ".join(parts)


def profile(params: type[BaseModel]) -> AgentProfile:
    return AgentProfile(
        # Every word is re-sent on every call: the summary says what is best and what to change,
        # this says only how to reply and the ranges (with the defaults the Best line is told from).
        system_prompt=(
            "Tune XGBoost: call run_experiment with only the params you change from the best; never "
            f"repeat a configuration. Ranges (default): {search_space(params)}. No idea left: reply "
            "DONE: <reason>."
        ),
        # The same words for a reply in text (the default): one JSON object, no tool definitions sent.
        # "each to a value other than the best's": told "only the params you change from the best",
        # Qwen2.5-Coder-1.5B restated the best's own values in 25% of replies (6 of 24 sampled on
        # real turns), as its exact-repeat refusals showed (37 of 82 calls); told this, in 12% (3 of 24).
        text_system_prompt=(
            "Tune XGBoost: reply with one JSON object of only the params you change, each to a value "
            "other than the best's, e.g. "
            '{"max_depth": 8}; never repeat a configuration. '
            f"Ranges (default): {search_space(params)}. No idea left: reply DONE: <reason>."
        ),
        tools=[ToolName.RUN_EXPERIMENT],
        how=(
            "Call run_experiment(params, note) with a configuration you have not tried "
            '(base="best" to send only the values you change from the best). You may also edit '
            "train.py (modify_train_py with search/replace edits) to change the model setup or features."
        ),
        fixed_arguments={ToolName.RUN_EXPERIMENT: {"base": "best"}},
        dropped_arguments={ToolName.RUN_EXPERIMENT: ["note"]},
        tool_descriptions={ToolName.RUN_EXPERIMENT: "Train the best configuration with these changes."},
        turn="Next?",
        # The paper's runner's words, line for line.
        stateless=StatelessWords(
            intro="You are optimizing hyperparameters.",
            goal="Goal: maximize macro_f1 on the held-out test split.",
            example='{"n_estimators": 200, "max_depth": 8}',
            metric_labels={"macro_f1": "F1", "precision": "precision", "recall": "recall"},
            best_label="F1",
        ),
    )
