"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp, Ollama) via the real `openai` SDK."""

import json
import os
from typing import Any

import openai
from openai.types.chat import ChatCompletion

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
    is_context_error,
    is_transient_status,
    openai_cache_min,
    openai_wire_tools,
    retry_after_seconds,
    with_retries,
)

NO_ENDPOINT_HELP = (
    "--llm openai needs an endpoint: --base-url URL for an OpenAI-compatible server (a local one needs no"
    " key, e.g. --base-url http://127.0.0.1:8080/v1), or OPENAI_API_KEY for api.openai.com"
)
PREFLIGHT_TIMEOUT_S = 10.0

# finish_reason -> the neutral (Messages API) stop_reason vocabulary.
_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


def to_api_messages(
    system: str, messages: list[Message], *, results_as_text: bool = False
) -> list[dict[str, Any]]:
    """Neutral messages -> chat messages. Tool results become `tool` messages, placed before any user
    text so they directly follow the assistant turn that called the tools. With `results_as_text`
    they become one user message instead ("Result of run_experiment: ..."), for servers whose chat
    template drops `tool` messages (the model would never see a refusal or a result)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    names: dict[str, str] = {}
    for msg in messages:
        names.update({c.id: c.name for c in msg.tool_calls})
        results = []
        for r in msg.tool_results:
            # The chat format has no error flag; say it in the content so the model sees it.
            content = f"ERROR: {r.content}" if r.is_error else r.content
            if results_as_text:
                results.append(f"Result of {names.get(r.tool_call_id, 'the tool call')}: {content}")
            else:
                out.append({"role": "tool", "tool_call_id": r.tool_call_id, "content": content})
        if results:
            out.append({"role": "user", "content": "\n".join(results)})
        if msg.role == "assistant":
            # "" rather than null: llama.cpp's server (and other strict ones) reject a null content.
            turn: dict[str, Any] = {"role": "assistant", "content": msg.text}
            if msg.tool_calls:
                turn["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in msg.tool_calls
                ]
            out.append(turn)
        elif msg.text:
            out.append({"role": "user", "content": msg.text})
    return out


def parse_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """(arguments, parse_error). Small models emit broken or non-object JSON; that must reach the loop as
    a reportable error, not an exception."""
    if not raw or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        snippet = raw if len(raw) <= 300 else raw[:300] + "..."
        return (
            {},
            f"the tool arguments were not valid JSON ({exc.msg}): {snippet}. "
            "Call the tool again with a JSON object.",
        )
    if not isinstance(value, dict):
        return {}, f"the tool arguments must be a JSON object, got {type(value).__name__}. Call it again."
    return value, None


def from_completion(completion: ChatCompletion) -> LLMResponse:
    if not completion.choices:
        raise LLMError("the endpoint returned no choices")
    choice = completion.choices[0]
    calls: list[ToolCall] = []
    for i, tc in enumerate(choice.message.tool_calls or []):
        if tc.type != "function":
            continue
        args, error = parse_arguments(tc.function.arguments)
        # Some servers omit ids; the loop needs one to pair the result with the call.
        calls.append(
            ToolCall(id=tc.id or f"call_{i}", name=tc.function.name, arguments=args, parse_error=error)
        )
    usage = None
    if completion.usage is not None:
        details = completion.usage.prompt_tokens_details
        usage = Usage(
            input_tokens=completion.usage.prompt_tokens,
            output_tokens=completion.usage.completion_tokens,
            cache_read_input_tokens=details.cached_tokens if details is not None else None,
            cached_in_input=True,  # prompt_tokens counts the cached tokens too
        )
    reason = choice.finish_reason or "stop"
    return LLMResponse(
        text=choice.message.content or "",
        tool_calls=calls,
        stop_reason="tool_use" if calls else _STOP.get(reason, reason),
        usage=usage,
        model=completion.model,
    )


class OpenAILLM:
    scripted = False
    # OpenAI caches prompts from 1024 tokens; a local server may cache any prefix, but what users
    # pay for is the hosted API's rule.
    cache_min_tokens: int | None = openai_cache_min()

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return openai_wire_tools(tools)

    def __init__(
        self,
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        seed: int | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 120.0,
        tool_choice: str | None = None,
        temperature: float | None = None,
        tool_results_as_text: bool = False,
    ) -> None:
        self.model = model
        self.tool_results_as_text = (
            tool_results_as_text  # None: ask the server (/v1/models) on the first call
        )
        # "auto" (None) lets the model choose; a tool name forces that call every turn, for small local
        # models, which given a choice tend to answer in prose.
        self.tool_choice = tool_choice
        self.name = f"openai:{model or 'auto'}"
        self.max_tokens = max_tokens
        self.seed = seed
        self.temperature = temperature
        self._calls = 0
        self.retry = retry or RetryPolicy()
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if base_url is None and key is None:
            raise LLMError(NO_ENDPOINT_HELP)
        # Local servers need no key, but the SDK refuses to start without one.
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=key or "not-needed", max_retries=0, timeout=timeout
        )

    async def preflight(self) -> None:
        """One quick look at the endpoint (its model list) before a run is started: a server that is not
        there is one clear error now, not a minute of retries and then a run with no experiment."""
        where = self._client.base_url
        quick = self._client.with_options(timeout=PREFLIGHT_TIMEOUT_S)
        try:
            try:
                page = await self._call(quick.models.list())
            except TransientLLMError as exc:
                if not isinstance(exc.__cause__, openai.APITimeoutError):
                    raise
                # Something answers there but is busy: a one-request-at-a-time local server still
                # generating for another client. The run's own calls wait for it (--llm-timeout); so
                # does the model list where it names the model (a second `compare` beside a first).
                if self.model is not None:
                    return
                page = await self._call(self._client.models.list())
        except TransientLLMError as exc:
            raise LLMError(f"cannot reach {where} ({exc}); is the server running? Check --base-url") from exc
        except LLMError as exc:
            if self.model is None or "refused the key" in str(exc):
                raise
            return  # an endpoint without a model list still serves the model it was given
        if self.model is None:
            models = [m.id for m in page.data]
            if not models:
                raise LLMError(f"{where} serves no models; pass --model")
            self.model, self.name = models[0], f"openai:{models[0]}"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if self.model is None:
            self.model = await with_retries(self._first_model, self.retry, label=self.name)
            self.name = f"openai:{self.model}"
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_api_messages(
                request.system, request.messages, results_as_text=self.tool_results_as_text
            ),
            "max_tokens": self.max_tokens or request.max_tokens,
        }
        if request.tools:
            params["tools"] = openai_wire_tools(request.tools)
            if self.tool_choice in {t.name for t in request.tools}:
                params["tool_choice"] = {"type": "function", "function": {"name": self.tool_choice}}
        elif request.json_reply and self.tool_choice not in (None, "auto"):
            # Forcing the tool, where the model writes the tool's arguments as text: force JSON (a
            # grammar on llama.cpp, nothing added to the prompt): words alone do not keep a small model
            # from wrapping its reply in prose, or from ending the run early.
            params["response_format"] = {"type": "json_object"}
        if self.seed is not None:
            # One seed per call, derived from the run's (runs with nearby seeds do not share a
            # sequence; in llama.cpp's range): reproducible, yet a retry after a refusal is a fresh draw. A fixed seed made a sampling model answer a near-identical prompt identically,
            # so it re-sent a refused exact repeat until CHECK stopped the run.
            params["seed"] = (self.seed * 1_000_003 + self._calls) % 2**31
        if self.temperature is not None:
            params["temperature"] = self.temperature
        self._calls += 1
        completion = await with_retries(
            lambda: self._call(self._client.chat.completions.create(**params)), self.retry, label=self.name
        )
        return from_completion(completion)

    async def _first_model(self) -> str:
        page = await self._call(self._client.models.list())
        models = [m.id for m in page.data]
        if not models:
            raise LLMError(f"{self._client.base_url} serves no models; pass --model")
        return models[0]

    async def _call(self, awaitable: Any) -> Any:
        where = self._client.base_url
        try:
            return await awaitable
        except openai.APIConnectionError as exc:  # APITimeoutError is a subclass
            raise TransientLLMError(f"{type(exc).__name__} talking to {where}: {exc}") from exc
        except openai.APIStatusError as exc:
            reason = f"HTTP {exc.status_code}: {exc.message}"
            if is_context_error(exc.status_code, exc.message):
                raise ContextWindowError(f"{where}: {reason}") from exc
            if is_transient_status(exc.status_code):
                raise TransientLLMError(reason, retry_after_seconds(exc.response.headers)) from exc
            if exc.status_code in (401, 403):
                raise LLMError(
                    f"{where} refused the key ({reason}). Check OPENAI_API_KEY, or use --llm scripted."
                ) from exc
            if exc.status_code == 404:
                raise LLMError(
                    f"{where}: not found ({reason}). Check --base-url (it usually ends in /v1) and --model."
                ) from exc
            raise LLMError(f"{where} rejected the request ({reason})") from exc

    async def aclose(self) -> None:
        await self._client.close()
