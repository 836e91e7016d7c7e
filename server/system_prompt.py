"""The system prompt and tool words of every task, for the two kinds of work: written once, here.

A task gives its facts (what it is, its metric, who measures it, its params or the files it may change);
these words are the same for every task of a kind: the built-ins, a user's folder, a plugin. They state
what the model may do and how the server answers, and they hold for every profile (client/profiles.py):
what helps a small model only (a change the summary names, a refused early DONE) is in its turn, not
here. Each prompt is re-sent on every call of a run, so every word here is paid for on every turn.

A folder's agent.json may still replace any of these fields for its own task (FolderTask.agent_profile).
"""

from typing import Any, Literal, NamedTuple

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from autoresearch_mcp.contract.edits import EDIT_FORM, EDIT_RULE
from autoresearch_mcp.contract.models import AgentProfile, JudgedBy, StatelessWords
from autoresearch_mcp.contract.tools import ToolName


class TaskFacts(NamedTuple):
    """What the words need to know of a task."""

    work: Literal["params", "code"]
    about: str  # the task's title: one sentence in its own words
    description: str  # all of it: code work keeps to its contract (input sizes, tolerances)
    metric: str
    direction: Literal["max", "min"]
    judged_by: JudgedBy
    params: type[BaseModel]
    log_scaled: frozenset[str]
    editable: list[str]
    profiled: bool  # code work: each turn shows where the script spends its time


# Who decides the metric, as a model doing code work reads it: what it may expect to move the number.
JUDGED = {
    "script": "the script prints it",
    "self-reported": "the edited script prints it",
    "evaluator": "an evaluator scores what the script leaves, after it ends (what the script prints does "
    "not count)",
    "benchmark": "the harness times the function beside the original's on fresh inputs and checks each "
    "output against the original's (what the script prints does not count)",
}


def _bounds(field: FieldInfo) -> tuple[Any, Any]:
    """A field's `ge` and `le`, None where it has none."""
    low = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None)
    high = next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None)
    return low, high


def search_space(params: type[BaseModel], log_scaled: frozenset[str] = frozenset()) -> str:
    """`lr 0.001-1 log (0.1), depth 1-12 (6), loss one of squared, huber (squared)`."""
    parts = []
    for name, field in params.model_fields.items():
        low, high = _bounds(field)
        choices = getattr(field.annotation, "__args__", None)
        if low is not None and high is not None:
            span = f" {low:g}-{high:g}" + (" log" if name in log_scaled else "")
        elif field.annotation is bool:
            span = " true/false"
        elif choices:
            span = " one of " + ", ".join(str(c) for c in choices)
        else:
            span = ""
        default = field.default
        if isinstance(default, bool):
            default = str(default).lower()
        elif isinstance(default, float):
            default = f"{default:g}"
        parts.append(f"{name}{span} ({default})")
    return ", ".join(parts)


def example(params: type[BaseModel]) -> str:
    """`{"max_depth": 8}`: the int param of the narrowest range, a quarter of the way from its default to
    its high bound (a small number, not a value to copy), for the JSON reply's form."""
    ints = []
    for name, field in params.model_fields.items():
        low, high = _bounds(field)
        if field.annotation is int and isinstance(field.default, int) and high is not None:
            ints.append(
                (int(high) - int(low if low is not None else field.default), name, field.default, int(high))
            )
    if not ints:
        return '{"name": value}'
    _, name, default, high = min(ints)
    return f'{{"{name}": {min(high, default + max(1, (high - default) // 4))}}}'


def agent_profile(facts: TaskFacts, stateless: StatelessWords | None = None) -> AgentProfile:
    """The words of `facts`'s kind of work, filled with its facts."""
    words = params_profile(facts) if facts.work == "params" else code_profile(facts)
    return words if stateless is None else words.model_copy(update={"stateless": stateless})


def _task(facts: TaskFacts) -> str:
    """The task's title. Its metric and which way is better open every turn's summary, not repeated here."""
    return " ".join(facts.about.split()).rstrip(".") + "."


def params_profile(facts: TaskFacts) -> AgentProfile:
    space = search_space(facts.params, facts.log_scaled)
    # A value sent as the best's own changes nothing: said once here, for every model, rather than refused
    # as an exact repeat afterwards.
    other = "each to a value other than the best's"
    rule = (
        "never repeat a configuration. Ranges (default): " + space + ". No idea left: reply DONE: <reason>."
    )
    # A script that prints its own metric is never edited (server/train_py.py refuses it).
    edits = (
        f" You may also edit {', '.join(facts.editable)} (modify_train_py with search/replace edits) to "
        "change the model setup or features."
        if facts.editable and facts.judged_by != "script"
        else ""
    )
    return AgentProfile(
        system_prompt=f"{_task(facts)} Call run_experiment with only the params you change, {other}; {rule}",
        text_system_prompt=f"{_task(facts)} Reply with one JSON object of only the params you change, {other}, "
        f"e.g. {example(facts.params)}; {rule}",
        tools=[ToolName.RUN_EXPERIMENT],
        how="Call run_experiment(params, note) with a configuration you have not tried "
        f'(base="best" to send only the values you change from the best).{edits}',
        fixed_arguments={ToolName.RUN_EXPERIMENT: {"base": "best"}},
        dropped_arguments={ToolName.RUN_EXPERIMENT: ["note"]},
        tool_descriptions={ToolName.RUN_EXPERIMENT: "Run the best configuration with these changes."},
        turn="Next?",
    )


def code_profile(facts: TaskFacts) -> AgentProfile:
    files = ", ".join(facts.editable)
    about = " ".join(facts.description.split()).rstrip(".") + "."
    task = f"{about} The metric ({facts.metric}): {JUDGED[facts.judged_by]}. You may change {files}."
    edit_rule = EDIT_RULE.replace("the current train.py", f"the current {files}")
    if facts.profiled:
        turn_shows = (
            "Each turn shows the run's summary, where the script spends its time, and the code to work on "
            f"(the hottest function of {files}, or the one that just failed; a short file whole)."
        )
        text_reply = (
            "Reply with one line saying what you change and why, then a function's whole new version in "
            "one ```python block (one def, the same name and parameters; import lines above it go to the "
            f"top of its file), or edits. {edit_rule}, for example:\n{EDIT_FORM}\n(or the whole new file "
            "in one ```python block)."
        )
    else:
        # Nothing singles out a function (no profile): the file is the unit. Asked for the whole file
        # only, a reply has one form to follow; offered functions, edits and whole files at once, a
        # reply may mix them. Edits still work.
        turn_shows = (
            f"Each turn shows the run's summary and the code to work on ({files} whole while it is "
            "short, or the function that just failed)."
        )
        text_reply = (
            f"Reply with one line saying what you change and why, then the whole new {files} in one "
            "```python block (or, when a turn shows one function, its whole new version)."
        )
    look = (
        "Call profile_train_py to see where the script spends its time, change"
        if facts.profiled
        else "Change"
    )
    return AgentProfile(
        system_prompt=(
            f"{task} {turn_shows} Reply with one call: replace_function (a function's whole new def, the "
            "same name and parameters) or modify_train_py, with either edits (search texts copied exactly "
            "from the code shown, each occurring once) or source (the whole new file), never both. Each "
            "accepted change is run at once. If a version crashed or was not kept, call revert_train_py with "
            "the version to go back to. No idea left: reply DONE: <reason>."
        ),
        text_system_prompt=(
            f"{task} {turn_shows} {text_reply} Each new version is run at once. If a version crashed or "
            "was not kept, reply REVERT v<N> to go back to version N. No idea left: reply DONE: <reason>."
        ),
        tools=[ToolName.REPLACE_FUNCTION, ToolName.MODIFY_TRAIN_PY, ToolName.REVERT_TRAIN_PY],
        how=f"{look} {files} with replace_function or modify_train_py (small search/replace edits), then "
        f"call run_benchmark: it runs the new version and records its metric ({JUDGED[facts.judged_by]}). "
        "Revert with revert_train_py when a change crashed or was not kept.",
        benchmark_after_edit=True,
        turn="Next?",
        stateless=StatelessWords(
            intro="You are improving a script.",
            reply="Propose the next version. Reply with CODE: and the complete "
            + ("file." if len(facts.editable) == 1 else "text, every file under its header line."),
        ),
    )
