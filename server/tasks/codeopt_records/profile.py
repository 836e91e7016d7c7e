"""How an agent works on codeopt-records: the stateful agent's system prompt and tools, one step's words.

One tool call per reply (servers that force a tool choice allow no more): the model edits, the agent
benchmarks each accepted edit itself and shows the result. A model that cannot write code inside a JSON
string (small local ones break off at the first quote) answers in text instead: SEARCH/REPLACE edits
(or the whole file in a python block), which the agent sends as modify_train_py's edits (or source).
"""

from autoresearch_mcp.contract.edits import EDIT_FORM, EDIT_RULE
from autoresearch_mcp.contract.models import AgentProfile, StatelessWords

PROFILE = AgentProfile(
    system_prompt=(
        "You make the Python function in train.py faster autonomously; its output must stay identical. "
        "Each turn shows the run's summary and the current train.py. Reply with one modify_train_py "
        "call, with either edits (search/replace pairs, each search text copied exactly from the "
        "current code, spaces included, and occurring once) or source (the whole new file, plain "
        "Python), never both. Each accepted change is benchmarked at once: "
        "correctness on fresh inputs, then the speedup against the original. If a version was wrong or "
        "slower, call revert_train_py with the version to go back to. When no idea is left, reply "
        "DONE: <reason>."
    ),
    tools=["modify_train_py", "revert_train_py"],
    how=(
        "Change train.py with modify_train_py (prefer small search/replace edits), then call "
        "run_benchmark: it checks correctness on fresh inputs and times the function (speedup vs the "
        "original). Revert with revert_train_py when a change was wrong or slower."
    ),
    benchmark_after_edit=True,
    turn="Next?",
    text_system_prompt=(
        "You make the Python function in train.py faster autonomously; its output must stay identical. "
        "Each turn shows the run's summary and the current train.py. Reply with one line saying what "
        f"you change and why, then one or more edits. {EDIT_RULE}, for example:\n{EDIT_FORM}\n"
        "(or the whole new train.py in one ```python block). Each new version is benchmarked at once: "
        "correctness on fresh inputs, then the speedup against the original. If a version was wrong or "
        "slower, reply REVERT v<N> to go back to version N. When no idea is left, reply DONE: <reason>."
    ),
    # The paper's runner's words, line for line (DESIGN.md, "Stateless baseline").
    stateless=StatelessWords(
        intro="You are optimizing Python code for speed.",
        rule="The function must keep its name, signature and exact output.",
        not_run="Not timed yet: the first benchmark times it as the baseline.",
        headline="time={time_ms:.2f}ms, speedup={speedup:.2f}x",
        benchmark="Execution time: {time_ms:.3f} ms{runs}\nBaseline time: {baseline_ms:.3f} ms\nSpeedup: {speedup:.2f}x",
        reply="Propose the next optimized version. Reply with CODE: and the complete function.",
    ),
)
