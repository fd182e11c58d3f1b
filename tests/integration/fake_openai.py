"""A local HTTP server speaking the OpenAI chat completions API, with scripted replies.

For what the real llama.cpp server cannot be made to do on demand: answer 404 for
an unknown model (llama-cpp-python's server answers any model name with the model
it has loaded, see ``test_openai_llama_cpp.py``), refuse a key, be overloaded, or
return broken JSON. Where a lenient stand-in would hide a production failure it
behaves like the services it stands for:

- ``GET /v1/models`` lists the served models (``{"object": "list", "data": [{"id"}]}``);
- a model it does not serve gets 404 with OpenAI's error shape
  ``{"error": {"message", "type", "param", "code": "model_not_found"}}``;
- a ``response_format`` type it does not support is refused as the server named in
  ``refuse_format_as`` refuses it: ``"openai"`` 400 with OpenAI's error shape, ``"fastapi"``
  422 with a ``detail`` list naming ``response_format`` (FastAPI's validation error, vLLM),
  ``"llama-cpp-python"`` 500 with OpenAI's error shape holding that validation error (what
  llama-cpp-python 0.3.36's server answers for ``json_schema``);
- with ``api_key`` set, a request without ``Authorization: Bearer <key>`` gets 401.

Scripted replies are used in order: a ``Reply`` with ``text`` is the assistant
message's content, ``status`` an error status, ``raw`` a body sent as it is. With
``responder`` set, each chat completion's reply is instead what it returns for the
request's body (for runs whose number of calls a test does not fix).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    raw: str | None = None  # the whole HTTP body, as it is
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def response_format(self) -> dict[str, Any] | None:
        return self.body.get("response_format")

    @property
    def prompt(self) -> str:
        return "\n".join(m["content"] for m in self.body.get("messages", []) if m.get("role") == "user")


def openai_error(status: int, message: str, *, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class FakeOpenAI:
    def __init__(
        self,
        served: tuple[str, ...] = ("tiny-model",),
        *,
        formats: tuple[str, ...] = ("json_schema", "json_object"),
        refuse_format_as: str = "openai",
        api_key: str | None = None,
        list_models: bool = True,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
    ) -> None:
        self.responder = responder
        self.served = served
        self.formats = formats
        self.refuse_format_as = refuse_format_as
        self.api_key = api_key
        self.list_models = list_models
        self.requests: list[RecordedRequest] = []
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if fake.api_key and self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    self._send(401, openai_error(401, "Incorrect API key provided.", code="invalid_api_key"))
                    return False
                return True

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake._record("GET", self.path, {}, dict(self.headers))
                if not self._authorised():
                    return
                if self.path != "/v1/models" or not fake.list_models:
                    self._send(404, openai_error(404, f"Invalid URL (GET {self.path})"))
                    return
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in fake.served]})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake._record("POST", self.path, body, dict(self.headers))
                if not self._authorised():
                    return
                if self.path != "/v1/chat/completions":
                    self._send(404, openai_error(404, f"Invalid URL (POST {self.path})"))
                    return
                model = body.get("model")
                if model not in fake.served and f"{model}:latest" not in fake.served:  # Ollama's default tag
                    self._send(404, openai_error(404, f"The model `{model}` does not exist or you do not have "
                                                      "access to it.", code="model_not_found", param="model"))
                    return
                kind = (body.get("response_format") or {}).get("type")
                if kind and kind != "text" and kind not in fake.formats:
                    invalid = {"type": "literal_error", "loc": ["body", "response_format", "type"],
                               "msg": "Input should be 'text' or 'json_object'", "input": kind}
                    if fake.refuse_format_as == "fastapi":
                        self._send(422, {"detail": [invalid]})
                    elif fake.refuse_format_as == "llama-cpp-python":
                        self._send(500, {"error": {"message": f"1 validation error:\n  {invalid}", "type": "internal_server_error",
                                                   "param": None, "code": None}})
                    else:
                        self._send(400, openai_error(400, f"Invalid parameter: 'response_format' of type '{kind}' "
                                                          "is not supported with this model.", param="response_format"))
                    return
                reply = fake.responder(body) if fake.responder else fake._next()
                if reply.raw is not None:
                    self._send(reply.status, reply.raw, reply.headers)
                elif reply.status != 200:
                    self._send(reply.status, openai_error(reply.status, f"scripted failure {reply.status}"), reply.headers)
                else:
                    self._send(200, {
                        "id": "chatcmpl-1", "object": "chat.completion", "model": model,
                        "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                                     "message": {"role": "assistant", "content": reply.text}}],
                        "usage": {"prompt_tokens": len(json.dumps(body["messages"])) // 4,
                                  "completion_tokens": max(1, len(reply.text) // 4)},
                    })

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reply(self, *replies: Reply | str) -> None:
        with self._lock:
            self._script.extend(r if isinstance(r, Reply) else Reply(text=r) for r in replies)

    def _next(self) -> Reply:
        with self._lock:
            if not self._script:
                return Reply(status=500, raw=json.dumps(openai_error(500, "the test scripted no reply for this call")))
            return self._script.pop(0)

    def _record(self, method: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, body, {k.lower(): v for k, v in headers.items()}))

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
