"""The agent's own words, in one file: what it answers a reply with (the nudges, the reply forms restated
for each protocol, the small profile's hints and questions), and the stateless baseline's single
message in the paper's format (the instructions, then one line per earlier HPO experiment or every
earlier version of the code in full, then the request for the next proposal). What a model reads each
turn (the summary, the code in focus, the request) and the task's system prompts are the server's
(server/turn.py, the task's profile)."""

import json
from typing import Any

from pydantic import BaseModel

from autoresearch_mcp.client.replies import says_done
from autoresearch_mcp.contract.edits import CODE_REPLY, EDIT_FORM, EDIT_RULE, WHOLE_FILE_REPLY
from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.models import JUDGED_BY_WORDS, Experiment, TaskInfo
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.contract.variety import bounds_of, change_of, least_varied_first

NUDGE_TOOL = "Call a tool for the next experiment."
NUDGE = "Call a tool for the next experiment, or reply DONE: <reason>."
NO_EXPERIMENT_YET = "No experiment has run yet: call a tool to run the first one."
# A refused text reply is not replayed: what was wrong with it is (window.py).
NOT_USED = "Your last reply was not used."
NO_JSON = "It held no JSON object of params."
# The small profile: a second REVERT before anything ran again is refused (protocol_text.py).
REVERTED_ALREADY = (
    "train.py went back to an earlier version with your last REVERT, and nothing has run since: make a "
    "change now."
)
# --batch K (batch.py): the offer, which the scripted double also reads (batch_size).
BATCH_WORDS = "You may propose up to {k} experiments at once; they run in parallel"


def revert_done(version: int, result: str) -> str:
    return f"Your REVERT v{version} is done: {result}"


def knob_text(name: str, value: object, now: object, untouched: bool) -> str:
    """The small profile's suggestion after a code reply that changed nothing (knobs.py)."""
    why = "; no version has changed it yet" if untouched else ""
    return f"For example, set {name} = {value} (it is {now}{why})."


def best_already(params: dict[str, Any], iteration: int) -> str:
    """The small profile's words for a reply whose every value is the best's own (protocol_json.py)."""
    values = " ".join(f"{name}={value}" for name, value in params.items())
    held = "these values" if len(params) > 1 else "this value"
    return f"{values} changed nothing: the best (#{iteration}) has {held} already"


def json_nudge(example: str, offer_done: bool) -> str:
    """A params task answered in text: what a usable reply is (DONE offered only where it ends the run)."""
    done = ", or DONE: <reason>" if offer_done else ""
    return f"Reply with one JSON object of the params you change, e.g. {example}{done}."


def text_format(latest_version: int, offer_done: bool, whole_file: bool = False, revert: bool = True) -> str:
    """What a text reply may be, offering only what can work now: a generic "or REVERT v<N>" invites a
    version that does not exist, and DONE before anything ran. `revert` False: the reply being answered
    was a revert, and offering another invites a chain of reverts that measures nothing."""
    # The same code form the turn asked for: asking for another form in the refusal draws replies that
    # mix both.
    options = [f"one line saying what you change, then {WHOLE_FILE_REPLY if whole_file else CODE_REPLY}"]
    if latest_version > 1 and revert:
        options.append(f"REVERT v<N> with N from 1 to {latest_version}")
    if offer_done:  # only where a DONE would end the run (check.may_finish)
        options.append("DONE: <reason>")
    return "Reply with " + "; or ".join(options) + "."


def text_nudge(
    reply: str,
    latest_version: int,
    ran_well: bool,
    whole_file: bool = False,
    offer_done: bool | None = None,
    revert: bool = True,
) -> str:
    """The answer to a text reply the agent could not use: what was wrong with it, then the format
    (DONE offered where `offer_done`, by default once something `ran_well`; REVERT where `revert`)."""
    if "SEARCH" in reply.upper() and "REPLACE" in reply.upper():
        wrong = f"Your edit was not in the form the agent reads. {EDIT_RULE}, for example:\n{EDIT_FORM}\n"
    elif "```" in reply:
        wrong = "Your code block held no function (no `def`): the reply ended early."
    elif says_done(reply) and not ran_well:
        wrong = "No version has run well yet: DONE is early."
    else:
        wrong = "Your reply held no ```python block."
    offer = ran_well if offer_done is None else offer_done
    return f"{wrong} {text_format(latest_version, offer, whole_file, revert)}"


def repeat_hint(
    tool: str,
    params: dict[str, object],
    distinct: dict[str, int],
    refusals: int,
    schema: dict[str, Any] | None = None,
) -> str:
    """Added to an exact-repeat refusal: a small model that copies an earlier configuration needs to
    be told which value to change (it ignores a general "try different params") and which way (the
    task's params `schema` gives the bounds: at one, only the other way is named). `params`: the
    configuration the refused call resolved to (the experiment it repeats); `distinct`: every param of
    the task, in schema order, with how many distinct values it took so far (both from the refusal's
    detail). The param named rotates with each refusal over the least varied ones first; capable
    models never repeat, so never see it."""
    if tool == ToolName.RUN_BENCHMARK:
        return "This version of train.py is already benchmarked: change it with modify_train_py first."
    names = least_varied_first(distinct) or sorted(params)
    if not names:
        return "Set at least one parameter to a value not tried yet."
    name = names[refusals % len(names)]
    return f"Change at least one value this time, e.g. {change_of(name, bounds_of(schema or {}, name), params.get(name))}."


# -- the stateless baseline, in the paper's format -------------------------------------------------


def _fmt_range(prop: dict[str, Any]) -> str:
    low, high = prop.get("minimum"), prop.get("maximum")
    kind = prop.get("type", "number")
    bounds = f"[{low}, {high}]" if low is not None and high is not None else ""
    return f"{kind} {bounds}, default {prop.get('default')}".strip()


class CodeVersion(BaseModel):
    """One version of the function in the stateless code history, with its benchmark text."""

    iteration: int
    code: str
    headline: str
    benchmark: str


class StatelessPrompt(BaseModel):
    """The baseline's one message, and where a careful client asks a provider to cache it: after the
    instructions, after the history the previous call held, and after the whole history. Only the
    lines after the history (the best so far, a refusal's note, the request) change from call to
    call, so each call reads the previous one's prefix from the cache and writes only its new lines."""

    text: str
    cache_points: list[int]


def _assemble(head: list[str], rows: list[str], tail: list[str]) -> StatelessPrompt:
    text = "\n".join([*head, *rows, *tail])
    points, at = [], len("\n".join(head)) + 1
    points.append(at)
    for i, row in enumerate(rows):
        at += len(row) + 1
        if i >= len(rows) - 2:
            points.append(at)
    return StatelessPrompt(text=text, cache_points=sorted({p for p in points if p < len(text)}))


def _kv(params: dict[str, Any], schema: dict[str, Any]) -> str:
    """`n_estimators=200 max_depth=8`: the params that differ from their defaults (the search space
    above lists them), in schema order, each value as JSON writes it (a whole float without `.0`)."""
    order = list(schema)
    keys = sorted(params, key=lambda k: order.index(k) if k in order else len(order))
    shown = []
    for k in keys:
        value = params[k]
        if k in schema and "default" in schema[k] and schema[k]["default"] == value:
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        shown.append(f"{k}={json.dumps(value)}")
    return " ".join(shown) or "all defaults"


def stateless_hpo(
    task: TaskInfo, history: list[Experiment], *, compact: bool = False, feedback: str | None = None
) -> StatelessPrompt:
    """One message: task, search space with ranges, output format, then every earlier experiment. The
    paper's lines by default (`Iter 3: F1=0.7712, precision=..., params={...}`); `compact`, the same
    values as `k=v`, leaving out the params at their defaults (`Iter 3: F1=0.7712 precision=...
    n_estimators=200`: from a third to two thirds fewer tokens); a
    `feedback` line says why the previous reply recorded nothing (the strong baseline's)."""
    words = task.agent.stateless
    schema = task.params_schema.get("properties", {})
    space = "\n".join(
        f"- {name}: {_fmt_range(prop)}" + (f" ({prop['description']})" if prop.get("description") else "")
        for name, prop in schema.items()
    )
    example = words.example or json.dumps(
        {name: prop.get("default") for name, prop in list(schema.items())[:2]}
    )
    head = [
        f"{words.intro or 'You are optimizing hyperparameters.'} Task: {task.description}",
        words.goal or f"Goal: {_verb(task)} {task.metric}.",
        "Search space:",
        space,
        f"Reply with one JSON object of hyperparameters, e.g. {example}.",
        "",
        "Experiment history (params at their defaults not shown):" if compact else "Experiment history:",
    ]
    rows = [] if history else ["(none yet)"]
    best: Experiment | None = None
    sep = " " if compact else ", "
    for exp in history:
        params = _kv(exp.params, schema) if compact else f"params={json.dumps(exp.params)}"
        if exp.status == "ok":
            labels = words.metric_labels or {task.metric: task.metric, **{k: k for k in exp.metrics}}
            shown = sep.join(f"{label}={exp.metrics.get(key, 0):.4f}" for key, label in labels.items())
            rows.append(f"Iter {exp.iteration}: {shown}{sep}{params}")
            if best is None or _better(exp.metric or 0, best.metric or 0, task):
                best = exp
        else:
            error = (exp.error_tail or "").strip().splitlines()[:1]
            rows.append(
                f"Iter {exp.iteration}: {exp.status.upper()} ({error[0] if error else 'no output'}){sep}{params}"
            )
    tail = []
    if best is not None:
        label = words.best_label or task.metric
        tail.append(f"Best so far: Iter {best.iteration} with {label}={(best.metric or 0):.4f}")
    if feedback:
        tail.append(feedback)
    tail.append("Propose the next configuration as JSON.")
    return _assemble(head, rows, tail)


def _verb(task: TaskInfo) -> str:
    return "maximize" if task.direction == "max" else "minimize"


def _code_rule(task: TaskInfo) -> str:
    """What decides the result: the script's own line only where the script is what judges it."""
    if task.judged_by in ("script", "self-reported"):
        return f"Keep what it prints: the {task.metric} line is the result ({_verb(task)} it)."
    return f"The {task.metric} is {JUDGED_BY_WORDS[task.judged_by]} ({_verb(task)} it)."


def _better(value: float, than: float, task: TaskInfo) -> bool:
    return value > than if task.direction == "max" else value < than


def stateless_code(
    task: TaskInfo, versions: list[CodeVersion], profile: str = "", *, feedback: str | None = None
) -> StatelessPrompt:
    """One message: the task and every earlier version in full with its result, then where the latest
    version spends its time (the same profile lines the stateful agent shows: both modes know alike
    where the time goes); a `feedback` line says why the previous reply recorded nothing (the strong
    baseline's)."""
    words = task.agent.stateless
    head = [
        f"{words.intro or 'You are improving code.'} Task: {task.description}",
        words.rule or _code_rule(task),
        "",
        "Full optimization history:",
    ]
    rows = [
        "\n".join(
            [
                f"=== Iteration {v.iteration} ({v.headline}) ===",
                "Code:",
                v.code.rstrip("\n"),
                "Benchmark:",
                v.benchmark,
            ]
        )
        for v in versions
    ]
    tail = [*([profile] if profile else []), *([feedback] if feedback else []), words.reply]
    return _assemble(head, rows, tail)


def early_done_text(left: int, budget: int) -> str:
    """The answer to a DONE sent before a DONE may end the run (Agent.early_done)."""
    return f"DONE is early: {left} of {budget} experiments are left. Try an idea you have not tried yet."


def refusal_feedback(reason: str) -> str:
    """The strong baseline's line after a reply that recorded nothing: what the stateful agent is told
    in its tool result, in the one message."""
    return f"Your last reply was not used: {reason}"


def benchmark_text(
    task: TaskInfo, status: str, metrics: dict[str, float], error: str | None, repeats: int | None
) -> tuple[str, str]:
    """The (headline, benchmark block) pair of one stateless code iteration, in the task's words."""
    if status != "ok":
        # The same line the stateful summary shows: both modes are told what went wrong alike.
        return f"{status}", f"{status.upper()}: {error_headline(error or '') or status}"
    words = task.agent.stateless
    runs = f" (median of {repeats} runs)" if repeats else ""
    values = {**metrics, "runs": runs}
    try:
        headline = (words.headline or "").format(**values)
        block = (words.benchmark or "").format(**values)
    except (KeyError, ValueError, IndexError):  # a result without the metrics the words name
        headline = block = ""
    if not headline:
        headline = f"{task.metric}={metrics.get(task.metric, 0):.4g}"
    if not block:
        block = "\n".join(f"{name}: {value:.6g}" for name, value in metrics.items())
    return headline, block
