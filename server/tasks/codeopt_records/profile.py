"""How an agent works on codeopt-records: the stateful agent's system prompt and tools, one step's words.

The way people who are good at this work: the profile says which function is slow and which of its
lines, the model rewrites that one function, the new version is checked on a small input and then
timed. Each turn shows the time by function and the hottest function's source (client/focus.py), not
the whole file. One tool call per reply (servers that force a tool choice allow no more): the model
sends a function's new version (replace_function) or search/replace edits (modify_train_py), and the
agent benchmarks each accepted change itself. A model that cannot write code inside a JSON string
(small local ones break off at the first quote) answers in text instead: the function's new version in
a python block, or SEARCH/REPLACE edits.
"""

from autoresearch_mcp.contract.edits import EDIT_FORM, EDIT_RULE
from autoresearch_mcp.contract.models import AgentProfile, StatelessWords
from autoresearch_mcp.contract.tools import ToolName

_TURN = (
    "Each turn shows the run's summary, where train.py spends its time, and the function to speed up "
    "(the hottest, or the one that just failed)."
)
_CHECKED = (
    "Each change is checked on a small input at once (a wrong output shows its first difference), then timed."
)

PROFILE = AgentProfile(
    system_prompt=(
        "You make the Python functions in train.py faster autonomously; the output must stay identical. "
        f"{_TURN} Reply with one call: replace_function (the function's whole new def) or modify_train_py "
        f"(search texts copied exactly from the code shown). {_CHECKED} If a version was wrong or "
        "slower, revert_train_py. When no idea is left, reply DONE: <reason>."
    ),
    tools=[ToolName.REPLACE_FUNCTION, ToolName.MODIFY_TRAIN_PY, ToolName.REVERT_TRAIN_PY],
    how=(
        "Call profile_train_py to see which function is slow, then replace that function with "
        "replace_function (or change train.py with modify_train_py), then call run_benchmark: it checks "
        "correctness on a small input, then on fresh inputs, and times the function (speedup vs the "
        "original). Revert with revert_train_py when a change was wrong or slower."
    ),
    benchmark_after_edit=True,
    dropped_arguments={ToolName.MODIFY_TRAIN_PY: ["source"]},
    tool_descriptions={
        ToolName.REPLACE_FUNCTION: "Replace a function of train.py with a new def.",
        ToolName.MODIFY_TRAIN_PY: "Change train.py with search/replace edits.",
        ToolName.REVERT_TRAIN_PY: "Restore an earlier version of train.py.",
    },
    turn="Next?",
    text_system_prompt=(
        "You make the Python functions in train.py faster autonomously; the output must stay identical. "
        f"{_TURN} Reply with one line saying what you change and why, then the function's whole new "
        "version in one ```python block (one def, the same name and parameters; import lines above it "
        f"go to the top of the file), or edits. {EDIT_RULE}, for example:\n{EDIT_FORM}\n{_CHECKED} If a "
        "version was wrong or slower, reply REVERT v<N> to go back to version N. When no idea is left, "
        "reply DONE: <reason>."
    ),
    # The paper's runner's words (DESIGN.md, "Stateless baseline"), with the function form beside the file.
    stateless=StatelessWords(
        intro="You are optimizing Python code for speed.",
        rule="Every function must keep its name, signature and exact output.",
        not_run="Not timed yet: the first benchmark times it as the baseline.",
        headline="time={time_ms:.2f}ms, speedup={speedup:.2f}x",
        benchmark="Execution time: {time_ms:.3f} ms{runs}\nBaseline time: {baseline_ms:.3f} ms\nSpeedup: {speedup:.2f}x",
        reply="Propose the next optimized version. Reply with CODE: and the complete function to replace "
        "(or the complete file).",
    ),
)
