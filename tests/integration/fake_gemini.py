"""A local HTTP server speaking enough of the Gemini REST API for google-genai.

It answers ``POST /v1beta/models/{model}:generateContent`` with scripted
replies (text, or an HTTP error status) in order, and keeps every request so
tests can assert what the client sent.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = ""
    status: int = 200


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def prompt(self) -> str:
        return "".join(p.get("text", "") for c in self.body.get("contents", []) for p in c.get("parts", []))

    @property
    def system_instruction(self) -> str:
        parts = (self.body.get("systemInstruction") or {}).get("parts", [])
        return "".join(p.get("text", "") for p in parts)

    @property
    def generation_config(self) -> dict[str, Any]:
        return self.body.get("generationConfig") or {}


class FakeGemini:
    """``with FakeGemini() as server: genai.Client(api_key="test", http_options=HttpOptions(base_url=server.url))``."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append(RecordedRequest(self.path, body, dict(self.headers)))
                    reply = fake.replies.pop(0) if fake.replies else Reply(status=500, text="no reply scripted")
                if not self.path.endswith(":generateContent"):
                    self._send(404, {"error": {"code": 404, "message": f"unknown path {self.path}",
                                               "status": "NOT_FOUND"}})
                elif reply.status != 200:
                    self._send(reply.status, {"error": {"code": reply.status, "message": reply.text,
                                                        "status": "INTERNAL"}})
                else:
                    self._send(200, {
                        "candidates": [{"content": {"role": "model", "parts": [{"text": reply.text}]},
                                        "finishReason": "STOP", "index": 0}],
                        "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 30,
                                          "totalTokenCount": 150},
                        "modelVersion": "fake-gemini",
                    })

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(self, text: str = "", status: int = 200) -> None:
        self.replies.append(Reply(text=text, status=status))

    def __enter__(self) -> FakeGemini:  # noqa: PYI034 - a plain test helper, never subclassed
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
