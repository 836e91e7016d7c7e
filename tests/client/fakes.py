"""Local fakes of the Anthropic Messages API and an OpenAI-compatible chat endpoint, for the real SDKs.

Each is a context manager serving on a free 127.0.0.1 port in a thread. It records every request
(path, headers, JSON body) and answers from a queue of scripted replies, then from `handler` (a function
of the request body) when the queue is empty; with neither it answers 400, which no backend retries.
"""

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


@dataclass
class FakeReply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering, to provoke client timeouts


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


Reply = FakeReply | dict[str, Any]
Handler = Callable[[dict[str, Any]], Reply]


class _FakeServer:
    """The HTTP plumbing; subclasses name the routes and the default model."""

    api_prefix = ""

    def __init__(self, replies: list[Reply] | None = None, handler: Handler | None = None) -> None:
        self.replies: deque[Reply] = deque(replies or [])
        self.handler = handler
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- what the subclasses provide ---
    def route(self, method: str, path: str, body: dict[str, Any] | None) -> FakeReply:
        raise NotImplementedError

    # --- plumbing ---
    @property
    def port(self) -> int:
        assert self._httpd is not None, "use the fake as a context manager"
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's base_url."""
        return self.root_url + self.api_prefix

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def bodies(self, path_suffix: str = "") -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.body is not None and r.path.endswith(path_suffix)]

    def next_reply(self, body: dict[str, Any]) -> FakeReply:
        with self._lock:
            reply = self.replies.popleft() if self.replies else None
        if reply is None and self.handler is not None:
            reply = self.handler(body)
        if reply is None:
            return error_reply(
                400, "invalid_request_error", "fake server: no reply scripted for this request"
            )
        return reply if isinstance(reply, FakeReply) else FakeReply(body=reply)

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> FakeReply:
        body = json.loads(raw) if raw else None
        with self._lock:
            self.requests.append(RecordedRequest(method, path, headers, body))
        return self.route(method, path.split("?", 1)[0], body)

    def __enter__(self) -> Self:
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs expect

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                reply = fake._handle(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, raw
                )
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # don't wait on keep-alive connections a client left open
        # A short poll interval: shutdown() waits up to one, and every test opens a server.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def error_reply(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> FakeReply:
    """An error in the shape both APIs use: {"type": "error", "error": {"type", "message"}}."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return FakeReply(status=status, body=body, headers=headers or {})


# --- Anthropic ---

_ids = itertools.count(1)


def anthropic_message(
    text: str = "",
    tool_uses: list[tuple[str, dict[str, Any]]] | None = None,
    *,
    stop_reason: str | None = None,
    model: str = "claude-haiku-4-5",
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_creation_input_tokens: int | None = None,
    cache_read_input_tokens: int | None = None,
) -> dict[str, Any]:
    """A Messages API response body: optional text, then tool_use blocks given as (name, input)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for name, args in tool_uses or []:
        content.append({"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": args})
    return {
        "id": f"msg_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_creation_input_tokens,
            "cache_read_input_tokens": cache_read_input_tokens,
        },
    }


class FakeAnthropicServer(_FakeServer):
    """POST /v1/messages and GET /v1/models. Point AsyncAnthropic(base_url=fake.base_url) at it; any
    api_key works, unless `models_reply` answers the model list otherwise (a refused key)."""

    models_reply: FakeReply | None = None

    def route(self, method: str, path: str, body: dict[str, Any] | None) -> FakeReply:
        if method == "POST" and path == "/v1/messages" and body is not None:
            return self.next_reply(body)
        if method == "GET" and path == "/v1/models":
            if self.models_reply is not None:
                return self.models_reply
            model = {
                "type": "model",
                "id": "claude-haiku-4-5",
                "display_name": "Claude Haiku 4.5",
                "created_at": "2025-10-01T00:00:00Z",
            }
            return FakeReply(
                body={"data": [model], "has_more": False, "first_id": model["id"], "last_id": model["id"]}
            )
        return error_reply(404, "not_found_error", f"fake Anthropic API: no route {method} {path}")


# --- OpenAI-compatible ---


def chat_completion(
    text: str | None = None,
    tool_calls: list[tuple[str, dict[str, Any] | str]] | None = None,
    *,
    finish_reason: str | None = None,
    model: str = "qwen2.5-coder",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    cached_tokens: int | None = None,
) -> dict[str, Any]:
    """A chat.completions response body. Tool arguments given as a str are sent verbatim (broken JSON)."""
    calls = [
        {
            "id": f"call_{next(_ids):04d}",
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for name, args in tool_calls or []
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return {
        "id": f"chatcmpl-{next(_ids):04d}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": usage,
    }


class FakeOpenAIServer(_FakeServer):
    """POST /v1/chat/completions and GET /v1/models. base_url ends in /v1, as the SDK expects."""

    api_prefix = "/v1"

    def __init__(
        self,
        replies: list[Reply] | None = None,
        handler: Handler | None = None,
        models: tuple[str, ...] = ("qwen2.5-coder",),
    ) -> None:
        super().__init__(replies, handler)
        self.models = models

    def route(self, method: str, path: str, body: dict[str, Any] | None) -> FakeReply:
        if method == "POST" and path == "/v1/chat/completions" and body is not None:
            return self.next_reply(body)
        if method == "GET" and path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "local"} for m in self.models]
            return FakeReply(body={"object": "list", "data": data})
        return error_reply(404, "not_found_error", f"fake OpenAI API: no route {method} {path}")
