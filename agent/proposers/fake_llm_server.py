"""A real local LLM server for tests and replay studies: OpenAI chat completions and Anthropic messages over HTTP.

`FakeLLMServer` is a `ThreadingHTTPServer` on 127.0.0.1 (an OS-chosen port) that answers
  POST /v1/chat/completions   (OpenAI shape; JSON, or SSE when the request asks to stream)
  POST /v1/messages           (Anthropic shape; JSON, or SSE when the request asks to stream)
from a scripted queue of `Scripted` replies (a status code, a text, token counts, a delay, extra
headers such as Retry-After), and
records every request it received (path, headers, parsed JSON body), so tests can check what the
SDKs really sent: the prompt, the corrective turn, cache_control, and that no API key leaked
into a body. Nothing is mocked: the official SDKs and litellm talk to it over real sockets.
Tests import it as tests/agent/fake_llm_server.py; agent/studies/llm_path.py replays a fixed script of
kernels through `aka optimize` with it.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Scripted:
    """One scripted answer. A status >= 400 sends an error body in the endpoint's shape."""

    text: str = ""
    status: int = 200
    prompt_tokens: int = 100
    completion_tokens: int = 50
    cache_creation_tokens: int = 0      # Anthropic only
    cache_read_tokens: int = 0          # Anthropic only
    delay_s: float = 0.0                # sleep before answering (to trigger client timeouts)
    error_message: str = "scripted error"
    usage_in_stream: bool = True        # OpenAI streams: send the usage chunk when asked for it
    headers: dict = field(default_factory=dict)   # extra response headers, e.g. {"Retry-After": "2"}


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: str = field(repr=False, default="")


def refused_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then closed): connecting to it is refused at once."""
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeLLMServer:
    """Start with `with FakeLLMServer() as srv:`; `srv.base_url` is http://127.0.0.1:PORT."""

    def __init__(self, replies: list[Scripted] | None = None):
        self.queue: deque[Scripted] = deque(replies or [])
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    # --- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> "FakeLLMServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base(self) -> str:
        return self.base_url + "/v1"

    # --- script ----------------------------------------------------------------------------
    def push(self, *replies: Scripted) -> None:
        with self._lock:
            self.queue.extend(replies)

    def _next(self) -> Scripted | None:
        with self._lock:
            return self.queue.popleft() if self.queue else None

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)

    def bodies_text(self) -> str:
        """Every request body, concatenated: for 'never contains X' assertions."""
        return "\n".join(r.raw for r in self.requests)


def _make_handler(server: FakeLLMServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:   # keep pytest output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8") if length else ""
            try:
                body = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                body = {}
            server._record(RecordedRequest(self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw))
            if self.path.rstrip("/").endswith("/chat/completions"):
                kind = "openai"
            elif self.path.rstrip("/").endswith("/messages"):
                kind = "anthropic"
            else:
                return self._json(404, {"error": {"message": f"no route {self.path}"}})
            reply = server._next()
            if reply is None:
                # 400, not 5xx: an exhausted script must fail the test, not be retried forever.
                return self._error(kind, 400, "fake server: script exhausted")
            if reply.delay_s:
                time.sleep(reply.delay_s)
            try:
                if reply.status >= 400:
                    return self._error(kind, reply.status, reply.error_message, reply.headers)
                model = body.get("model", "fake-model")
                if kind == "openai":
                    if body.get("stream"):
                        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                        return self._openai_stream(reply, model, include_usage and reply.usage_in_stream)
                    return self._json(200, _openai_body(reply, model))
                if body.get("stream"):
                    return self._anthropic_stream(reply, model)
                return self._json(200, _anthropic_body(reply, model))
            except (BrokenPipeError, ConnectionResetError):
                pass   # the client gave up (timeout test): nothing to answer

        # --- writers -----------------------------------------------------------------------
        def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, kind: str, status: int, message: str, headers: dict | None = None) -> None:
            if kind == "openai":
                payload = {"error": {"message": message, "type": "fake_error", "code": status}}
            else:
                kinds = {429: "rate_limit_error", 401: "authentication_error", 400: "invalid_request_error"}
                payload = {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}
            self._json(status, payload, headers)

        def _sse_start(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

        def _sse(self, data: str, event: str | None = None) -> None:
            head = f"event: {event}\n" if event else ""
            self.wfile.write(f"{head}data: {data}\n\n".encode())
            self.wfile.flush()

        def _openai_stream(self, reply: Scripted, model: str, include_usage: bool) -> None:
            self._sse_start()
            base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}
            self._sse(json.dumps({**base, "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}))
            for piece in _pieces(reply.text):
                self._sse(json.dumps({**base, "choices": [
                    {"index": 0, "delta": {"content": piece}, "finish_reason": None}]}))
            # The last content-free chunk carries finish_reason (litellm needs it), then usage, then [DONE].
            self._sse(json.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
            if include_usage:
                self._sse(json.dumps({**base, "choices": [], "usage": _openai_usage(reply)}))
            self._sse("[DONE]")

        def _anthropic_stream(self, reply: Scripted, model: str) -> None:
            self._sse_start()
            usage = _anthropic_usage(reply)
            start_usage = {**usage, "output_tokens": 1}
            self._sse(json.dumps({"type": "message_start", "message": {
                "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": start_usage}}), "message_start")
            self._sse(json.dumps({"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "text", "text": ""}}), "content_block_start")
            for piece in _pieces(reply.text):
                self._sse(json.dumps({"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "text_delta", "text": piece}}), "content_block_delta")
            self._sse(json.dumps({"type": "content_block_stop", "index": 0}), "content_block_stop")
            self._sse(json.dumps({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                  "usage": {"output_tokens": reply.completion_tokens}}), "message_delta")
            self._sse(json.dumps({"type": "message_stop"}), "message_stop")

    return Handler


def _pieces(text: str, size: int = 40) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _openai_usage(reply: Scripted) -> dict:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens}


def _openai_body(reply: Scripted, model: str) -> dict:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text},
                         "finish_reason": "stop"}],
            "usage": _openai_usage(reply)}


def _anthropic_usage(reply: Scripted) -> dict:
    return {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens,
            "cache_creation_input_tokens": reply.cache_creation_tokens,
            "cache_read_input_tokens": reply.cache_read_tokens}


def _anthropic_body(reply: Scripted, model: str) -> dict:
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": reply.text}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": _anthropic_usage(reply)}
