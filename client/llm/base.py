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
    # The agent's own note, never sent: the model fills this tool's arguments at the top level, and the
    # agent puts them under this one argument of the server's tool (the task's `params`).
    nest: str | None = Field(default=None, exclude=True)


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
    # Where the agent asks for a prompt-cache breakpoint: offsets into `text` at which a block ends that
    # a provider with explicit caching (Anthropic's cache_control) should cache up to. The text the
    # model reads is the same; a provider that caches by itself (OpenAI) ignores them.
    cache_points: list[int] = Field(default_factory=list)


class LLMRequest(BaseModel):
    system: str
    tools: list[ToolSpec] = Field(default_factory=list)
    messages: list[Message]
    max_tokens: int = 1024
    json_reply: bool = Field(
        default=False,
        description="the reply should be one JSON object (the stateful agent's params in text): a "
        "backend told to force the tool (--tool-choice NAME) forces JSON instead, e.g. OpenAI's "
        "response_format json_object",
    )


class Usage(BaseModel):
    """What the provider says it counted; None where it does not say. Providers split input two ways:
    Anthropic's input_tokens leaves out the cache reads and writes, OpenAI's prompt_tokens includes its
    cached tokens (`cached_in_input`)."""

    input_tokens: int | None
    output_tokens: int | None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cached_in_input: bool = False


class LLMResponse(BaseModel):
    text: str
    tool_calls: list[ToolCall]
    stop_reason: str
    usage: Usage | None
    model: str


class LLMError(Exception):
    """A provider failure that ends the run cleanly. The message says what to do about it."""


class ContextWindowError(LLMError):
    """The provider refused the prompt as longer than the model's window."""


def is_context_error(status: int, message: str) -> bool:
    """A 400 that says the prompt is too long: llama.cpp ("exceed context window"), OpenAI ("maximum
    context length"), Anthropic ("prompt is too long")."""
    text = message.lower()
    return status in (400, 413) and (
        "prompt is too long" in text or ("context" in text and ("exceed" in text or "maximum" in text))
    )


def billed_input(response: "LLMResponse") -> int | None:
    """Every input token the provider counted for a response (cached ones too), None if it did not say."""
    u = response.usage
    if u is None or u.input_tokens is None:
        return None
    if u.cached_in_input:
        return u.input_tokens
    return u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)


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


def anthropic_cache_min(model: str) -> int:
    """The shortest prefix Anthropic caches for `model`, from the providers' published rules (prices.toml)."""
    from autoresearch_mcp.client.prices import prices

    table = prices()
    listed = table.models.get(model)
    if listed is not None and listed.min_cacheable_tokens is not None:
        return listed.min_cacheable_tokens
    return table.anthropic.default_min_tokens


def openai_cache_min() -> int:
    from autoresearch_mcp.client.prices import prices

    return prices().openai.min_tokens


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
