"""CHECK: the decisions that end a run, made without the LLM, and what a finished agent reports."""

import math
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from autoresearch_mcp.client.connect import ResearchClient, ToolOutcome
from autoresearch_mcp.client.knobs import Tried, knob_hint, record
from autoresearch_mcp.client.llm.base import ContextWindowError, LLMRequest, LLMResponse, billed_input
from autoresearch_mcp.client.meter import Transcript, input_tokens
from autoresearch_mcp.client.prompts import early_done_text, repeat_hint
from autoresearch_mcp.contract.arguments import FinishRunArgs
from autoresearch_mcp.contract.errors import Refusal
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


class Agent:
    """What both agents share: their connection, transcript and CHECK counters, and one metered LLM call."""

    def __init__(
        self,
        rc: ResearchClient,
        transcript: Transcript,
        run_id: str,
        config: AgentConfig,
        progress: Progress | None = None,
    ) -> None:
        self.rc, self.transcript, self.run_id, self.config = rc, transcript, run_id, config
        self.progress = progress or (lambda event: None)
        self.failures = 0
        self.calls = 0
        self.repeats = 0  # exact-repeat refusals so far: the hint after each names another param
        # Code tasks: train.py as it is now (each agent keeps it current), the values of its settings
        # that any version seen has had, and the change suggestions made so far (knobs.py).
        self._code_now = ""
        self.tried: Tried = {}
        self.ideas = 0
        # The current train.py's last run failed: the change to ask for is its fix, not a setting (told
        # "fix that ... For example, set HIDDEN = 64", the 1.5B model set HIDDEN and kept the crash).
        self.code_broken = False
        self.provider_ratio = 1.0  # the provider's input count over the meter's, on the last call
        self.last_refusal: Refusal | None = None  # the server's, of the latest refused call
        # Why calls recorded nothing: the server's refusal kinds, and the agent's own (a reply with no
        # call or no parsable proposal, arguments that are not JSON, a tool not offered).
        self.refusals: Counter[str] = Counter()

    @property
    def small(self) -> bool:
        """The small-model profile: its hints, and its refusals of an early DONE and of reverts."""
        return self.config.profile == "small"

    @property
    def code_now(self) -> str:
        return self._code_now

    @code_now.setter
    def code_now(self, source: str) -> None:
        # every version the agent sees counts as tried: a hint never names a value a version ran with
        self._code_now = source
        record(self.tried, source)

    def early_done(self, run: Run) -> str | None:
        """What the model is told of a DONE sent before the share `done_from` of the budget is spent;
        None: the DONE ends the run. An autoresearch loop keeps going while its owner is away: the
        budget is what the owner asked for, the failure streak (--max-failures) what ends a model that only says DONE.
        Counted as an "early_done" refusal and a failure."""
        left = run.budget - run.used
        if not self.small or done_allowed(run, self.config.done_from):
            return None  # the neutral profile takes a model's DONE as its decision
        self.failures += 1
        self.refused(kind="early_done")
        return self.with_idea(early_done_text(left, run.budget))

    def with_idea(self, text: str) -> str:
        """`text`, and for a code reply that changed nothing (an early DONE, train.py resent as it is, a
        revert to the version it is on) one change to make: "For example, set HIDDEN = 64 (it is 32;
        ...)", naming the next setting of train.py each time (knobs.py). Unchanged for a params task or
        a file without settings, and while the current version's last run failed."""
        broken_or_none = self.code_broken or not self.code_now or not self.small
        hint = None if broken_or_none else knob_hint(self.code_now, self.tried, self.ideas)
        if hint is None:
            return text
        self.ideas += 1
        return f"{text}{'' if text.endswith('.') else '.'} {hint}"

    def may_finish(self, run: Run) -> bool:
        """Whether a DONE would end the run now, so the model may be offered it: something ran well (a
        DONE before that is a misfire) and the share `done_from` of the budget is spent."""
        return run.best is not None and (not self.small or done_allowed(run, self.config.done_from))

    def refusal_text(self, tool: str, outcome: ToolOutcome, sent: dict[str, Any]) -> str:
        """What the model is told of a refused call: the server's message, and after an exact repeat a
        value to change. The refusal says what the call resolved to (the experiment it repeats, not only
        what it sent: with base="best" a param left out is the best's, which may sit on a bound) and how
        varied each param is: no history to read. An edit that changed nothing is answered with a change
        to make (with_idea). Both agents tell it alike."""
        text = outcome.text[:MAX_REFUSAL_CHARS]
        if outcome.refusal is not None and outcome.refusal.kind == "no_change":
            return self.with_idea(text)
        if not self.small or outcome.refusal is None or outcome.refusal.kind != "exact_repeat":
            return text  # the neutral profile: the server's facts, no order
        detail = outcome.refusal.detail
        params = detail.get("params")
        if not isinstance(params, dict):
            params = sent
        counts = detail.get("distinct")
        known = counts if isinstance(counts, dict) else {}
        names = list(self.config.task.params_schema.get("properties", {}))
        # Every param of the task (schema order) with the distinct values it took so far, as the
        # server counted them (a param it has not counted took none).
        distinct = {name: int(known.get(name, 0)) for name in names}
        hint = repeat_hint(tool, params, distinct, self.repeats, self.config.task.params_schema)
        self.repeats += 1
        return f"{text} {hint}"

    def refused(self, outcome: ToolOutcome | None = None, kind: str | None = None) -> None:
        """Count one refusal: the kind the server gave the outcome, else `kind`."""
        self.last_refusal = outcome.refusal if outcome is not None else None
        if outcome is not None and outcome.refusal is not None:
            self.refusals[outcome.refusal.kind] += 1
        elif kind is not None or outcome is not None:
            self.refusals[kind or "error"] += 1

    async def ask(self, request: LLMRequest, run: Run) -> LLMResponse:
        """One LLM call toward the run's next experiment, recorded and shown; LLMError passes through.
        Raises TokenBudgetStop instead of a call whose input and longest reply could exceed the budget,
        ContextWindowStop instead of one that would not fit the model's window (or that the provider
        refused as too long: never a silent truncation)."""
        budget, window = self.config.token_budget, self.config.context_window
        sending = input_tokens(request, self.transcript.llm)
        if budget is not None:
            spent = self.transcript.full_tokens
            if spent + sending + request.max_tokens > budget:
                raise TokenBudgetStop(
                    f"token budget reached: {spent:,} of {budget:,} spent, and the next call could"
                    f" cost {sending + request.max_tokens:,} ({sending:,} to send, up to"
                    f" {request.max_tokens:,} back)"
                )
        if window is not None:
            # The provider counts with its own tokenizer and chat template: scale the meter's count by
            # what it made of the previous prompt (1.0 before any, and for the scripted double).
            estimate = math.ceil(sending * self.provider_ratio)
            if estimate + request.max_tokens > window:
                raise ContextWindowStop(
                    f"the next prompt would not fit the model's {window:,}-token window: about"
                    f" {estimate:,} tokens by the provider's count ({sending:,} by cl100k_base, x"
                    f"{self.provider_ratio:.2f} as on the last call) plus up to {request.max_tokens:,}"
                    " for the reply"
                )
        try:
            response, counts = await self.transcript.complete(request, iteration=run.used + 1)
        except ContextWindowError as exc:
            raise ContextWindowStop(f"the provider refused the prompt as too long: {exc}") from exc
        billed = billed_input(response)
        if billed is not None and counts.full > counts.output:
            self.provider_ratio = billed / (counts.full - counts.output)
        self.calls += 1
        self.progress({"run": run, "calls": self.calls, "tokens": counts.model_dump()})
        return response
