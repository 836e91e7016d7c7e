"""The research instructions (goal, tools, rules, when to stop), served as the `autoresearch` prompt."""

from mcp.server import MCPServer

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tasks.base import Task
from autoresearch_mcp.server.text import prompt_error

PROMPT_NAME = "autoresearch"

PROGRAM = """You are running an autonomous research loop on the task "{task_name}": {description}

The server keeps all state: every experiment, the best result, train.py and its versions, your notes.
You never need to remember history: read the summary (get_run_summary or the resource
autoresearch://runs/{{run_id}}/summary) and, only when you need details, get_experiment_history.

Loop, until a stop condition holds:
1. Read the summary: budget used, best so far, the last experiments, notes.
2. Decide the single most informative next experiment. {how}
3. When an idea fails, record it with add_note(kind="failed") so you do not try it again; record your
   overall plan with add_note(kind="strategy") when it changes.

Rules:
- Every recorded experiment costs one unit of budget, whatever its outcome. Refusals (invalid params, an
  exact repeat, a rejected edit) cost nothing but count as failures in a row; read the message and fix it.
- Parameters travel in one `params` object; unknown keys and out-of-range values are refused.
{params}
- train.py must keep its required entry points; the harness owns the data, the metric and the timing.
Stop (call finish_run with a one-line reason) when the budget is used, the target is reached, or you
have no idea left that is likely to help.
"""


def render_program(task: Task) -> str:
    params = task.params_help()
    return PROGRAM.format(
        task_name=task.name,
        description=task.describe(),
        how=task.agent_profile().how,
        params="  Parameters:\n" + "\n".join(f"  - {line}" for line in params.splitlines()),
    )


def register(mcp: MCPServer, research: Research) -> None:
    @mcp.prompt(PROMPT_NAME)
    def autoresearch(task: str = "hpo-covertype") -> str:
        """The research instructions (goal, tools, rules, when to stop) for a task."""
        try:
            return render_program(research.runs.task(task))
        except ResearchError as exc:
            raise prompt_error(str(exc)) from None
