"""CHECK: the decisions that end a run, made without the LLM, and what a finished agent reports."""

from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.contract.arguments import FinishRunArgs
from autoresearch_mcp.contract.models import Experiment, Run, TaskInfo

# "stopped": something other than this agent finished the run (a host's finish_run, the dashboard).
# "context-window": the next prompt would not fit the model's window (--context-window).
StopReason = Literal[
    "budget",
    "target",
    "llm-done",
    "stopped",
    "failures",
    "call-limit",
    "llm-error",
    "token-budget",
    "context-window",
]
Mode = Literal["stateful", "stateless", "stateless-strong"]
AgentProfileName = Literal["small", "neutral"]
Progress = Callable[[dict[str, Any]], None]
MAX_REFUSAL_CHARS = 3000


class AgentConfig(BaseModel):
    task: TaskInfo = Field(description="the task as the server describes it (autoresearch://tasks/{name})")
    iterations: int = Field(ge=1)
    max_failures: int = Field(
        default=5, ge=1, description="consecutive failures (refusals, crashes) before stopping"
    )
    window: int | None = Field(
        default=None,
        description="stateful: last N messages kept; None = only those since the last experiment",
    )
    done_from: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="the share of the budget spent from which a DONE ends the run; before it the model is "
        "told how many experiments are left (1: never, the whole budget as karpathy's NEVER STOP)",
    )
    max_tokens: int = 1024
    profile: AgentProfileName = Field(
        default="small",
        description="whose words and habits: `small` (a small local model: the summary names a value to "
        "change, a refusal names one, a DONE before `done_from` is questioned, a revert counts as a "
        "failure) or `neutral` (facts, no orders: what hosts and outside agents read)",
    )
    batch: int = Field(
        default=1,
        ge=1,
        description="stateful, params tasks: experiments the model may propose in one reply, measured at once",
    )
    code_replies: Literal["tool", "text"] = Field(
        default="tool",
        description="stateful, code tasks: the model changes train.py with a modify_train_py call (tool) or "
        "answers with the whole file in a python block that the agent sends as that call (text): small "
        "models cannot write code inside a JSON string",
    )
    param_replies: Literal["tool", "text"] = Field(
        default="text",
        description="stateful, params tasks: the model answers with one JSON object of the params it "
        "changes, which the agent sends as run_experiment (text), or makes that call itself (tool): "
        "tool definitions and the provider's tool-use preamble are billed on every request",
    )
    token_budget: int | None = Field(
        default=None,
        ge=1,
        description="full tokens the run's LLM calls may spend in all (TokenCounts.full); None = no cap",
    )
    context_window: int | None = Field(
        default=None,
        ge=1,
        description="the model's window in its own tokens: a call whose prompt (as the provider counted "
        "the last one) plus max_tokens would not fit ends the run instead; None = not checked",
    )

    @property
    def max_calls(self) -> int:
        """A hard cap on LLM calls, so a model that never runs an experiment cannot loop forever."""
        return self.iterations * 4 + 10


class AgentStop(Exception):
    """CHECK's decision, taken in `Agent.ask` once the request is built: the call is not made."""

    reason: StopReason

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.stop: tuple[StopReason, str] = (self.reason, detail)


class TokenBudgetStop(AgentStop):
    """The call could take the run past its token budget."""

    reason = "token-budget"


class ContextWindowStop(AgentStop):
    """The prompt and the longest reply would not fit the model's window (or the provider said so)."""

    reason = "context-window"


class AgentResult(BaseModel):
    run_id: str
    mode: Mode
    stop_reason: StopReason
    detail: str
    experiments: int
    llm_calls: int
    best_metric: float | None
    transcript: str
    scripted: bool
    full_tokens: int = Field(default=0, description="full tokens spent by this agent's LLM calls")
    refusals: dict[str, int] = Field(
        default_factory=dict, description="calls that recorded nothing, by refusal kind"
    )
    token_budget: int | None = None
    run: Run | None = Field(default=None, description="the run as the server had it at the end")
    history: list[Experiment] = Field(default_factory=list, description="its experiments, in order")


def check(run: Run, failures: int, config: AgentConfig, calls: int) -> tuple[StopReason, str] | None:
    """Stop when the budget is used, the target is reached, failures pile up or calls run out."""
    if run.status == "exhausted" or run.used >= run.budget:
        return "budget", f"budget used ({run.used}/{run.budget})"
    if run.status == "converged":
        return "target", f"target reached ({run.best.metric:.4f})" if run.best else "target reached"
    if run.status == "stopped":
        return "stopped", f"finished outside this agent: {run.finish_reason or 'no reason given'}"
    if failures >= config.max_failures:
        return "failures", f"{failures} failures in a row"
    if calls >= config.max_calls:
        return "call-limit", f"{calls} LLM calls without using the budget"
    return None


async def finish(
    rc: ResearchClient,
    run_id: str,
    mode: Mode,
    stop: tuple[StopReason, str] | None,
    calls: int,
    transcript: Transcript,
    refusals: Counter[str] | None = None,
) -> AgentResult:
    """End the run on the server (if CHECK, not the server, stopped it) and report."""
    assert stop is not None
    run = await rc.run(run_id)
    if run.status == "running":
        await rc.call(FinishRunArgs(run_id=run_id, reason=f"{stop[0]}: {stop[1]}"[:500]))
        run = await rc.run(run_id)
    return AgentResult(
        run_id=run_id,
        mode=mode,
        stop_reason=stop[0],
        detail=stop[1],
        experiments=run.used,
        llm_calls=calls,
        best_metric=run.best.metric if run.best else None,
        transcript=str(transcript.path),
        scripted=transcript.llm.scripted,
        full_tokens=transcript.full_tokens,
        refusals=dict(sorted((refusals or Counter()).items())),
    )


def done_allowed(run: Run, done_from: float) -> bool:
    """Whether the share `done_from` of the budget is spent: from then on a DONE ends the run (at 1,
    only once the budget itself has ended it)."""
    return run.used >= done_from * run.budget
