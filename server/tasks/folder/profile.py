"""How an agent works on a task folder: the words the model reads, built from the folder's own.

Written like the built-in tasks' profiles (small models first: one tool call per reply, params sent as
changes to the best, the search space in the prompt), with the task's description, metric and files
in place of the built-in ones. Params work: run_experiment with the params that change. Code work, as
codeopt-records: each turn shows where the script spends its time (the folder's command run under the
profiler) and the hottest function of the `edit` files; the model sends a function's new version or
edits, and each accepted change is run at once (run_benchmark, with the best's params).
"""

from pydantic import BaseModel

from autoresearch_mcp.contract.edits import EDIT_FORM, EDIT_RULE
from autoresearch_mcp.contract.models import AgentProfile, StatelessWords
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.tasks.folder.spec import FolderSpec


def search_space(params: type[BaseModel]) -> str:
    """`lr 0.001-1 (0.1), depth 1-12 (6), loss one of squared, huber (squared)`."""
    parts = []
    for name, field in params.model_fields.items():
        low = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None)
        high = next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None)
        choices = getattr(field.annotation, "__args__", None)
        if low is not None and high is not None:
            span = f" {low:g}-{high:g}"
        elif field.annotation is bool:
            span = " true/false"
        elif choices:
            span = " one of " + ", ".join(str(c) for c in choices)
        else:
            span = ""
        parts.append(f"{name}{span} ({field.default})")
    return ", ".join(parts)


# Who decides the metric, as the model reads it: what it may and may not expect to move the number.
JUDGED = {
    "script": "the script prints it",
    "self-reported": "the script prints it",
    "evaluator": "an evaluator scores what the script leaves, after it ends (what the script prints does "
    "not count)",
    "benchmark": "the harness times the function beside the original's on fresh inputs and checks its "
    "output (what the script prints does not count)",
}


def profile(spec: FolderSpec, params: type[BaseModel], editable: list[str]) -> AgentProfile:
    task = spec.task
    judged = JUDGED[spec.judged_by]
    goal = "lower" if task.direction == "minimize" else "higher"
    about = " ".join(task.description.split()) or f"the task {task.name}"
    if spec.work == "params":
        intro = (
            f"You tune the parameters of a training script, one experiment per reply. The task: "
            f"{about} The metric is {task.metric} ({goal} is better). Each turn shows the run's "
            "summary: the best configuration in full, how recent experiments differed from it, and "
            "a change to make. "
        )
        rest = (
            "only what you change from the best (the rest keep the best's values): at least the change "
            "the summary names, and others if you like. Never resend a configuration already tried. "
            "First experiment: the defaults, {first}. Ranges (default): " + search_space(params) + "."
            " When no idea is left, reply DONE: <reason>."
        )
        return AgentProfile(
            system_prompt=f"{intro}Reply with one run_experiment call whose params hold "
            + rest.replace("{first}", "params {}"),
            text_system_prompt=f"{intro}Reply with one JSON object of params that holds "
            + rest.replace("{first}", "{}"),
            tools=[ToolName.RUN_EXPERIMENT],
            how="Call run_experiment(params, note) with a configuration you have not tried "
            '(base="best" to send only the values you change from the best).',
            fixed_arguments={ToolName.RUN_EXPERIMENT: {"base": "best"}},
            dropped_arguments={ToolName.RUN_EXPERIMENT: ["note"]},
            tool_descriptions={
                ToolName.RUN_EXPERIMENT: "Run the script with the best configuration, changed by `params` "
                "(one unit of budget)."
            },
            turn="Next?",
        )
    files = ", ".join(editable)
    shown = "train.py" if editable == ["train.py"] else f"train.py (here: {files})"
    if spec.task.profile:
        turn_shows = (
            f"Each turn shows the run's summary, where the script spends its time, and the code to work "
            f"on (the hottest function of {shown}, or the one that just failed; a short file whole)."
        )
        text_reply = (
            "Reply with one line saying what you change and why, then a function's whole new version in "
            "one ```python block (one def, the same name and parameters; import lines above it go to the "
            f"top of its file), or edits. {EDIT_RULE}, for example:\n{EDIT_FORM}\n(or the whole new file "
            "in one ```python block)."
        )
    else:
        # Nothing singles out a function (no profile): the file is the unit. Asked for the whole file
        # only, a reply has one form to follow; offered functions, edits and whole files at once, a
        # reply may mix them. Edits still work.
        turn_shows = (
            f"Each turn shows the run's summary and the code to work on ({shown} whole while it is "
            "short, or the function that just failed)."
        )
        text_reply = (
            "Reply with one line saying what you change and why, then the whole new train.py in one "
            "```python block (or, when a turn shows one function, its whole new version)."
        )
    look = (
        "Call profile_train_py to see where the script spends its time, change"
        if spec.task.profile
        else "Change"
    )
    return AgentProfile(
        system_prompt=(
            f"You improve a training script autonomously, one change per reply. The task: {about} The "
            f"metric is {task.metric} ({goal} is better); {judged}. You may change {files}. "
            f"{turn_shows} Reply with one replace_function call (a function's whole new def, same name "
            "and parameters) or one modify_train_py call, with either edits (search/replace pairs, each "
            "search text copied exactly from the code shown and occurring once) or source (the whole new "
            "file), never both. Each accepted change is run at once. If a version crashed or was worse, "
            "call revert_train_py with the version to go back to. When no idea is left, reply DONE: "
            "<reason>."
        ),
        tools=[ToolName.REPLACE_FUNCTION, ToolName.MODIFY_TRAIN_PY, ToolName.REVERT_TRAIN_PY],
        how=f"{look} {files} with replace_function or modify_train_py (small search/replace "
        "edits), then call run_benchmark: it runs the new version and records its metric. Revert with "
        "revert_train_py when a change crashed or was worse.",
        benchmark_after_edit=True,
        turn="Next?",
        text_system_prompt=(
            f"You improve a training script autonomously. The task: {about} The metric is {task.metric} "
            f"({goal} is better); {judged}. {turn_shows} {text_reply} "
            "Each new version is run at once. If a version crashed or was worse, reply REVERT v<N> to go "
            "back to version N. When no idea is left, reply DONE: <reason>."
        ),
        stateless=StatelessWords(
            intro="You are improving a script.",
            reply="Propose the next version. Reply with CODE: and the complete "
            + ("file." if len(editable) == 1 else "text, every file under its header line."),
        ),
    )
