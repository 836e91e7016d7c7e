"""The research instructions (goal, tools, rules, when to stop), served as the `autoresearch` prompt.

The text is scoped to its task: a params task is told how `params` travel and which ranges apply, a code
task to read train.py before editing it and to keep what the harness calls. It names the run to work on
(or says to start one) and asks for its run_id on every call: without a session, a call that names no
run can only mean the one running run.
"""

from typing import Annotated

from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from pydantic import Field

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import JUDGED_BY_WORDS
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tasks.base import Task
from autoresearch_mcp.server.turn import render_turn

PROMPT_NAME = "autoresearch"

PROGRAM = """You are running an autonomous research loop on the task "{task_name}": {description}

{start}

The server keeps all state: every experiment, the best result, train.py and its versions, your notes.
You never need to remember history: read the summary (get_run_summary, or the resource
autoresearch://runs/{run_ref}/summary) and, only when you need details, get_experiment_history.

Loop, until a stop condition holds:
1. Read the summary: budget used, best so far, the last experiments, notes.
2. Decide the single most informative next experiment. {how}
3. When an idea fails, record it with add_note(kind="failed") so you do not try it again; record your
   overall plan with add_note(kind="strategy") when it changes.

Rules:
- Every recorded experiment costs one unit of budget, whatever its outcome. Refusals ({refusals}) cost
  nothing; the summary counts them in its "refusals or failures in a row". Read the message and fix
  the call.
{task_rules}
The run ends by itself when its budget is used. To stop earlier (the target is reached, or no idea is
left that is likely to help), call finish_run with run_id and a one-line reason.
"""

PARAMS_RULES = """- Parameters travel inside one `params` object, e.g. {tool}(run_id=..., params={{{example}}});
  unknown keys and out-of-range values are refused. Parameters:
{params}
- {script}"""
# Whether the script may change: not where its own printout is the metric (server/train_py.py refuses).
EDITABLE_SCRIPT = (
    "{files} is the script the params are given to; you may also edit it (read it with\n"
    "  get_current_train_py first, then modify_train_py), keeping the entry point and harness calls it has."
)
FIXED_SCRIPT = "{files} is the script the params are given to; it prints its own metric, so it is not edited."

CODE_RULES = """- Read {files} with get_current_train_py before your first edit, and again when a search text was
  not found: edits must match the current version exactly.
- An edit changes the current version, which is not always the best: revert_train_py goes back to a
  version before you build on it.
- Keep what the task needs: the function the task description names (its signature and what it returns),
  the files' names and what they read and write. A module the script's Python lacks is a crash.
- The metric is {judged}."""


def render_program(task: Task, run_id: str | None = None) -> str:
    params_task = task.experiment_tool == ToolName.RUN_EXPERIMENT
    if run_id:
        start = (
            f"Your run is {run_id}: work on it, do not start another. Pass run_id={run_id!r} on every "
            "call (the server may hold other runs at the same time)."
        )
    else:
        start = (
            f'First call start_run(task="{task.name}") (optionally with budget and target) and note the '
            "run_id it returns. Pass that run_id on every later call (the server may hold other runs at "
            "the same time). To continue where an earlier run of this task left off, pass "
            'from_run (its run_id, or "latest"): its best is re-measured as your experiment #1 and the '
            "summary shows its notes."
        )
    if params_task:
        lines = task.params_help().splitlines()
        names = [line.split(":")[0].split(" ")[0] for line in lines[:2]]
        script = FIXED_SCRIPT if task.judged_by == "script" else EDITABLE_SCRIPT
        rules = PARAMS_RULES.format(
            script=script.format(files=", ".join(task.editable())),
            tool=task.experiment_tool,
            example=", ".join(f'"{name}": ...' for name in names),
            params="\n".join(f"  - {line}" for line in lines),
        )
        refused = "invalid params, an exact repeat"
    else:
        rules = CODE_RULES.format(judged=JUDGED_BY_WORDS[task.judged_by], files=", ".join(task.editable()))
        refused = f"a rejected edit, a search text that is not in {', '.join(task.editable())}"
    return PROGRAM.format(
        task_name=task.name,
        description=task.describe(),
        start=start,
        run_ref=run_id or "{run_id}",
        how=task.agent_profile().how,
        refusals=refused,
        task_rules=rules,
    )


def render_focused(task: Task, turn: str | None) -> str:
    """A server focused on one task (tools/focus.py): the words our agent gives its model, its system
    prompt and, for a run, its turn (server/turn.py), since the tools offered are the ones those words
    name."""
    profile = task.agent_profile()
    return profile.system_prompt if turn is None else f"{profile.system_prompt}\n\n{turn}"


def register(mcp: MCPServer, research: Research, focus: Task | None = None) -> None:
    @mcp.prompt(PROMPT_NAME)
    def autoresearch(
        task: Annotated[
            str, Field(description="the task to research, e.g. hpo-covertype or codeopt-records")
        ] = "hpo-covertype",
        run_id: Annotated[
            str | None,
            Field(description="a run to continue (its task applies); omitted: the prompt says to start one"),
        ] = None,
    ) -> str:
        """The research instructions for a task: start or continue a run, the loop, the rules, when to stop."""
        try:
            if run_id:
                task = research.store.get_run(run_id).task
            if focus is not None and task == focus.name:
                return render_focused(focus, render_turn(research, run_id, "small") if run_id else None)
            program = render_program(research.tasks(task), run_id)
            if run_id:  # where the run stands, in the words every reader of the turn gets
                program += f"\nThe run now:\n{render_turn(research, run_id)}"
            return program
        except ResearchError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None  # read by the client as is
