"""The Anthropic Messages API backend (the real `anthropic` SDK, AsyncAnthropic)."""

from typing import Any

import anthropic

from autoresearch_mcp.client.llm.base import (
    ContextWindowError,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    RetryPolicy,
    ToolCall,
    ToolSpec,
    TransientLLMError,
    Usage,
    anthropic_cache_min,
    anthropic_wire_tools,
    is_context_error,
    is_transient_status,
    retry_after_seconds,
    with_retries,
)
from autoresearch_mcp.client.prices import prices

DEFAULT_MODEL = "claude-haiku-4-5"
PREFLIGHT_TIMEOUT_S = 10.0
_EPHEMERAL = {"type": "ephemeral"}

NO_KEY_HELP = (
    "no Anthropic API key: the default backend is the paid Anthropic API; set ANTHROPIC_API_KEY,"
    " or run offline with --llm scripted, or use a local OpenAI-compatible server with"
    " --llm openai --base-url URL"
)


def _text_blocks(msg: Message, caching: bool) -> list[dict[str, Any]]:
    """The message's text as one block, or, with caching, cut at its cache points with a breakpoint on
    each block that ends at one (the text the model reads is the same)."""
    if not msg.text:
        return []
    points = sorted(p for p in set(msg.cache_points) if 0 < p < len(msg.text)) if caching else []
    blocks: list[dict[str, Any]] = []
    start = 0
    for point in points:
        blocks.append({"type": "text", "text": msg.text[start:point], "cache_control": dict(_EPHEMERAL)})
        start = point
    blocks.append({"type": "text", "text": msg.text[start:]})
    if caching and len(msg.text) in msg.cache_points:
        blocks[-1]["cache_control"] = dict(_EPHEMERAL)
    return blocks


def to_api_messages(messages: list[Message], *, caching: bool = False) -> list[dict[str, Any]]:
    """Neutral messages -> Messages API turns. Consecutive turns of one role merge into one, so every
    tool_result answering an assistant turn lands in ONE user message, ahead of any text (the API
    requires the results to come first). With caching, a message's cache points become breakpoints."""
    turns: list[dict[str, Any]] = []
    for msg in messages:
        blocks: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": r.tool_call_id,
                "content": r.content,
                "is_error": r.is_error,
            }
            for r in msg.tool_results
        ]
        blocks += _text_blocks(msg, caching)
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in msg.tool_calls
        ]
        if not blocks:
            continue  # an empty text block is a 400
        if turns and turns[-1]["role"] == msg.role:
            merged = turns[-1]["content"] + blocks
            # Keep results first within the merged user turn.
            merged.sort(key=lambda b: b["type"] != "tool_result")
            turns[-1]["content"] = merged
        else:
            turns.append({"role": msg.role, "content": blocks})
    return turns


def _cap_breakpoints(params: dict[str, Any], cap: int) -> None:
    """The API takes at most `cap` cache_control markers: keep the fixed prefix's and the latest."""
    marked = [b for turn in params["messages"] for b in turn["content"] if "cache_control" in b]
    fixed = int("tools" in params and "cache_control" in params["tools"][-1])
    fixed += int(isinstance(params.get("system"), list) and "cache_control" in params["system"][-1])
    for block in marked[: max(0, len(marked) - (cap - fixed))]:
        del block["cache_control"]


def build_params(request: LLMRequest, *, model: str, max_tokens: int | None, caching: bool) -> dict[str, Any]:
    """The keyword arguments for messages.create. With caching, breakpoints go on the last tool and on
    the system block (the fixed prefix, tools then system, is identical on every call of a run) and at
    the cache points the agent put in its messages (where the stateless prompt's history ends)."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens or request.max_tokens,
        "messages": to_api_messages(request.messages, caching=caching),
    }
    if request.system:
        if caching:
            params["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
        else:
            params["system"] = request.system
    if request.tools:
        tools = anthropic_wire_tools(request.tools)
        if caching:
            tools[-1]["cache_control"] = _EPHEMERAL
        params["tools"] = tools
    if caching:
        _cap_breakpoints(params, prices().anthropic.max_breakpoints)
    return params


def from_api_message(msg: anthropic.types.Message) -> LLMResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in msg.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args = block.input if isinstance(block.input, dict) else {}
            error = (
                None if isinstance(block.input, dict) else f"tool input was not an object: {block.input!r}"
            )
            calls.append(ToolCall(id=block.id, name=block.name, arguments=args, parse_error=error))
    u = msg.usage
    usage = Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_creation_input_tokens=u.cache_creation_input_tokens,
        cache_read_input_tokens=u.cache_read_input_tokens,
    )
    return LLMResponse(
        text="".join(texts),
        tool_calls=calls,
        stop_reason=msg.stop_reason or "end_turn",
        usage=usage,
        model=msg.model,
    )


class AnthropicLLM:
    scripted = False

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return anthropic_wire_tools(tools)

    def __init__(
        self,
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        prompt_caching: bool = False,
        retry: RetryPolicy | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.model = model or DEFAULT_MODEL
        self.name = f"anthropic:{self.model}"
        self.cache_min_tokens: int | None = anthropic_cache_min(self.model)
        self.max_tokens = max_tokens
        self.prompt_caching = prompt_caching
        self.retry = retry or RetryPolicy()
        # The SDK resolves credentials itself (argument, ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN, profiles);
        # max_retries=0 because with_retries owns backoff and tells the user when it gives up.
        try:
            self._client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout
            )
        except anthropic.CredentialsError as exc:  # a profile the user configured is broken
            raise LLMError(f"{exc} Or: {NO_KEY_HELP}") from exc
        c = self._client
        if c.api_key is None and c.auth_token is None and c.credentials is None:
            raise LLMError(NO_KEY_HELP)

    async def preflight(self) -> None:
        """One cheap request (the first entry of the model list, free) before a run is started: an API
        that cannot be reached is one clear error now, not a minute of retries and then a stored run
        with no experiment. Any answer but a refused key counts as there (a proxy may not list models)."""
        where = self._client.base_url
        quick = self._client.with_options(timeout=PREFLIGHT_TIMEOUT_S)
        try:
            await quick.models.list(limit=1)
        except anthropic.APIConnectionError as exc:  # APITimeoutError is a subclass
            raise LLMError(
                f"cannot reach the Anthropic API at {where} ({type(exc).__name__}: {exc}); check the"
                " network, or --base-url / ANTHROPIC_BASE_URL, or run offline with --llm scripted"
            ) from exc
        except anthropic.AuthenticationError as exc:
            raise LLMError(
                f"{self.name}: the API refused the key (HTTP {exc.status_code}: {_reason(exc)}). "
                "Check ANTHROPIC_API_KEY, or use --llm scripted or --llm openai."
            ) from exc
        except anthropic.APIStatusError:
            return
        except TypeError as exc:
            if "authentication" in str(exc):  # the SDK's "Could not resolve authentication method"
                raise LLMError(NO_KEY_HELP) from exc
            raise

    async def complete(self, request: LLMRequest) -> LLMResponse:
        params = build_params(
            request, model=self.model, max_tokens=self.max_tokens, caching=self.prompt_caching
        )
        return await with_retries(lambda: self._create(params), self.retry, label=self.name)

    async def _create(self, params: dict[str, Any]) -> LLMResponse:
        try:
            msg = await self._client.messages.create(**params)
        except anthropic.APIConnectionError as exc:  # APITimeoutError is a subclass
            raise TransientLLMError(f"{type(exc).__name__}: {exc}") from exc
        except anthropic.APIStatusError as exc:
            reason = f"HTTP {exc.status_code}: {_reason(exc)}"
            if is_context_error(exc.status_code, reason):
                raise ContextWindowError(f"{self.name}: {reason}") from exc
            if is_transient_status(exc.status_code):
                raise TransientLLMError(reason, retry_after_seconds(exc.response.headers)) from exc
            if exc.status_code in (401, 403):
                raise LLMError(
                    f"{self.name}: the API refused the key ({reason}). "
                    "Check ANTHROPIC_API_KEY, or use --llm scripted or --llm openai."
                ) from exc
            raise LLMError(f"{self.name}: request rejected ({reason})") from exc
        except TypeError as exc:
            if "authentication" in str(exc):  # the SDK's "Could not resolve authentication method"
                raise LLMError(NO_KEY_HELP) from exc
            raise
        return from_api_message(msg)

    async def aclose(self) -> None:
        await self._client.close()


def _reason(exc: anthropic.APIStatusError) -> str:
    """The error message from the API's JSON body, else the SDK's."""
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return f"{err.get('type', 'error')}: {err['message']}"
    return str(exc)
