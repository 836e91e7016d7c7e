"""The provider-neutral LLM interface the agent loops code against, and the shared retry policy.

A request is a system prompt, tool specs and a list of neutral messages; a response is text plus tool
calls. `stop_reason` uses the Messages API vocabulary ("end_turn", "tool_use", "max_tokens", ...) for
every backend, so a loop never branches on the provider.
"""

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, Field

from autoresearch_mcp.contract.models import ScriptedPlan, TaskInfo

log = logging.getLogger(__name__)

T = TypeVar("T")

LLMKind = Literal["anthropic", "openai", "scripted", "scripted-sloppy"]


class ToolSpec(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any]
    # Set when the model's arguments could not be parsed (small models emit broken JSON). The loop must
    # not run the tool; it sends this text back as an error ToolResult so the model can retry.
    parse_error: str | None = None


class ToolResult(BaseModel):
    tool_call_id: str
    content: str
    is_error: bool = False


class Message(BaseModel):
    role: Literal["user", "assistant"]
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_results: list[ToolResult] = Field(default_factory=list)


class LLMRequest(BaseModel):
    system: str
    tools: list[ToolSpec] = Field(default_factory=list)
    messages: list[Message]
    max_tokens: int = 1024


class Usage(BaseModel):
    """What the provider says it counted; None where it does not say."""

    input_tokens: int | None
    output_tokens: int | None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class LLMResponse(BaseModel):
    text: str
    tool_calls: list[ToolCall]
    stop_reason: str
    usage: Usage | None
    model: str


class LLMError(Exception):
    """A provider failure that ends the run cleanly. The message says what to do about it."""


class TransientLLMError(LLMError):
    """A failure worth retrying (rate limit, overload, timeout, lost connection)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLM(Protocol):
    name: str
    scripted: bool
    # The shortest fixed prefix (tools + system) the provider caches, in tokens; None: no prompt cache.
    cache_min_tokens: int | None

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        """The tool definitions as this backend puts them in the request body (what is paid for)."""
        ...

    async def complete(self, request: LLMRequest) -> LLMResponse: ...

    async def aclose(self) -> None: ...


def anthropic_wire_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [t.model_dump() for t in tools]


def openai_wire_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for t in tools
    ]


# Minimum cacheable prompt lengths (tokens) in the providers' prompt-caching documentation: Anthropic
# caches nothing shorter than 4096 tokens on Claude Haiku 4.5 (1024 on Sonnet and Opus); OpenAI caches
# prompts from 1024 tokens.
ANTHROPIC_CACHE_MIN = {"claude-haiku-4-5": 4096}
ANTHROPIC_CACHE_MIN_DEFAULT = 1024
OPENAI_CACHE_MIN = 1024


class RetryPolicy(BaseModel):
    """Exponential backoff with jitter. Tests shrink the delays; the defaults suit a shared API."""

    attempts: int = Field(default=6, ge=1, description="total tries, the first included")
    base_delay: float = Field(default=2.0, ge=0.0, description="seconds before the first retry")
    max_delay: float = Field(default=60.0, ge=0.0, description="cap on any single wait")

    def delay(self, retry: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (1-based): full jitter over the exponential step,
        but never less than what the server asked for in retry-after."""
        step = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        wait = step / 2 + rng.uniform(0, step / 2)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.max_delay)


async def with_retries(
    call: Callable[[], Awaitable[T]], policy: RetryPolicy, *, label: str, rng: random.Random | None = None
) -> T:
    """Run `call`, retrying TransientLLMError per `policy`; any other LLMError passes straight through."""
    rng = rng or random.Random()
    for attempt in range(1, policy.attempts + 1):
        try:
            return await call()
        except TransientLLMError as exc:
            if attempt == policy.attempts:
                raise LLMError(
                    f"{label}: still failing after {policy.attempts} attempts ({exc}). "
                    "The provider is overloaded or unreachable; try again later, or use --llm scripted."
                ) from exc
            wait = policy.delay(attempt, rng, exc.retry_after)
            log.warning("%s: %s; retry %d/%d in %.1fs", label, exc, attempt, policy.attempts - 1, wait)
            await asyncio.sleep(wait)
    raise AssertionError("unreachable: the loop returns or raises")


def is_transient_status(status: int) -> bool:
    """Worth retrying, as the providers' own SDKs judge it: timeout, conflict, rate limit, any 5xx
    (incl. Anthropic's 529 overloaded)."""
    return status in (408, 409, 429) or status >= 500


def retry_after_seconds(headers: Any) -> float | None:
    """The server's retry-after header in seconds, if it sent a number."""
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date; the backoff is good enough


def temperature_problem(kind: str, temperature: float | None) -> str | None:
    """Why this backend cannot take a temperature, if it cannot: anthropic 2.x's Messages API has no
    sampling temperature, and scripted does not sample."""
    if temperature is not None and kind != "openai":
        return f"--temperature applies to the openai backend only, not to {kind}"
    return None


def make_llm(
    kind: LLMKind,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    seed: int = 42,
    task: TaskInfo | None = None,
    plan: ScriptedPlan | None = None,
    original: str = "",
    prompt_caching: bool = False,
    retry: RetryPolicy | None = None,
    timeout: float = 120.0,
    tool_choice: str | None = None,
    temperature: float | None = None,
    tool_results_as_text: bool = False,
) -> LLM:
    """Build the backend the CLI asked for. `max_tokens`, when given, overrides each request's own."""
    retry = retry or RetryPolicy()
    if (problem := temperature_problem(kind, temperature)) is not None:
        raise LLMError(problem)
    if kind == "anthropic":
        from autoresearch_mcp.client.llm.anthropic_backend import AnthropicLLM

        return AnthropicLLM(
            model=model,
            max_tokens=max_tokens,
            base_url=base_url,
            api_key=api_key,
            prompt_caching=prompt_caching,
            retry=retry,
            timeout=timeout,
        )
    if kind == "openai":
        from autoresearch_mcp.client.llm.openai_backend import OpenAILLM

        return OpenAILLM(
            model=model,
            max_tokens=max_tokens,
            base_url=base_url,
            api_key=api_key,
            seed=seed,
            tool_results_as_text=tool_results_as_text,
            retry=retry,
            timeout=timeout,
            tool_choice=tool_choice,
            temperature=temperature,
        )
    if kind in ("scripted", "scripted-sloppy"):
        from autoresearch_mcp.client.llm.scripted import ScriptedLLM
        from autoresearch_mcp.client.llm.sloppy import SloppyLLM

        if task is None:
            raise LLMError("the scripted backend needs the task as the server describes it")
        scripted = ScriptedLLM(task=task, plan=plan, original=original, seed=seed)
        return SloppyLLM(scripted) if kind == "scripted-sloppy" else scripted
    raise LLMError(f"unknown LLM backend {kind!r}: use anthropic, openai, scripted or scripted-sloppy")
