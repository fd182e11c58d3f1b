"""A hostile OpenAI-compatible server on 127.0.0.1: each chat completion's raw reply is written by
a function the test gives, so it can dribble, stall, flood, echo the key or lie about its body."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.support import loopback_http

MODEL = "tiny-model"
Behaviour = Callable[[http.server.BaseHTTPRequestHandler, dict[str, Any]], None]


def completion(content: Any, **extra: Any) -> dict[str, Any]:
    """A chat completion holding ``content``; ``extra`` replaces top-level keys (usage, model)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1", "object": "chat.completion", "model": MODEL,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    body.update(extra)
    return body


def send(h: http.server.BaseHTTPRequestHandler, status: int, body: Any, **headers: str) -> None:
    data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    if h.command == "POST":  # the server closes after each completion (do_POST): it says so, as real servers do,
        h.send_header("Connection", "close")  # or a client's retry may go out on the socket it is closing
    for name, value in headers.items():
        h.send_header(name.replace("_", "-"), value)
    h.end_headers()
    h.wfile.write(data)


def answer(content: Any, **extra: Any) -> Behaviour:
    return lambda h, body: send(h, 200, completion(content, **extra))


def dribble(every_s: float, *, headers_first: bool = True, total_s: float = 60.0) -> Behaviour:
    """Headers (or, with ``headers_first=False``, the header bytes themselves) then one byte every
    ``every_s`` seconds, for up to ``total_s``: each read gets something, so a per-read timeout never fires."""
    def behave(h: http.server.BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        payload = json.dumps(completion("x")).encode()
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode())
        stream = payload if headers_first else head + payload
        if headers_first:
            h.wfile.write(head)
            h.wfile.flush()
        end = time.monotonic() + total_s
        for byte in stream:
            if time.monotonic() > end:
                return
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
            time.sleep(every_s)
    return behave


def flood(total_bytes: int, *, chunk: int = 1 << 20) -> Behaviour:
    """A 200 whose body is ``total_bytes`` long (a JSON string that never ends): what was sent is
    counted in ``server.sent``."""
    def behave(h: http.server.BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(total_bytes))
        h.end_headers()
        block = b'{"choices": [{"message": {"content": "' + b"a" * (chunk - 40)
        sent = 0
        while sent < total_bytes:
            piece = block[: min(chunk, total_bytes - sent)]
            h.wfile.write(piece)
            sent += len(piece)
            h.server.sent += len(piece)  # type: ignore[attr-defined]
            block = b"a" * chunk
    return behave


class ModelServer:
    def __init__(self) -> None:
        self.behaviours: list[Behaviour] = []
        self.default: Behaviour | None = None
        self.prompts: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.base = ""
        self.httpd: Any = None
        self.models: Any = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}  # GET /v1/models

    @property
    def url(self) -> str:
        return self.base + "/v1"

    @property
    def sent(self) -> int:
        return self.httpd.sent

    def then(self, *behaviours: Behaviour) -> ModelServer:
        with self.lock:
            self.behaviours.extend(behaviours)
        return self

    def next(self) -> Behaviour:
        with self.lock:
            if self.behaviours:
                return self.behaviours.pop(0)
        if self.default is None:
            return lambda h, body: send(h, 500, {"error": {"message": "the test scripted no reply"}})
        return self.default


@contextmanager
def model_server(default: Behaviour | None = None) -> Iterator[ModelServer]:
    site = ModelServer()
    site.default = default

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            send(self, 200, site.models)

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            with site.lock:
                site.prompts.append("\n".join(m.get("content", "") for m in body.get("messages", [])))
                site.headers.append({k.lower(): v for k, v in self.headers.items()})
            try:
                site.next()(self, body)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    with loopback_http(Handler) as server:
        server.sent = 0  # type: ignore[attr-defined]
        site.httpd = server
        site.base = f"http://127.0.0.1:{server.server_address[1]}"
        yield site
