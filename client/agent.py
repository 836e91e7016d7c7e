"""What the stateful agent and the baselines share: their connection, transcript and CHECK counters,
the profile's answers to a DONE, a repeat or a reply that changed nothing, and one metered LLM call."""

import math
from collections import Counter
from typing import Any

from autoresearch_mcp.client.check import (
    AgentConfig,
    ContextWindowStop,
    Progress,
    TokenBudgetStop,
    done_allowed,
)
from autoresearch_mcp.client.connect import ResearchClient, ToolOutcome
from autoresearch_mcp.client.knobs import Tried, knob_hint, record
from autoresearch_mcp.client.llm.base import ContextWindowError, LLMRequest, LLMResponse, billed_input
from autoresearch_mcp.client.meter import Transcript, input_tokens
from autoresearch_mcp.client.prompts import early_done_text, repeat_hint
from autoresearch_mcp.contract.errors import Refusal
from autoresearch_mcp.contract.models import Run

MAX_REFUSAL_CHARS = 3000


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
        # The current train.py's last run failed: the change to ask for is its fix, not a setting (a
        # setting named beside the crash is taken instead of the fix, and the crash stays).
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
