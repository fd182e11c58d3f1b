"""A local HTTP server speaking the Gemini REST API as strictly as the real one, for google-genai.

It answers ``POST /{v1,v1beta}/models/{model}:generateContent`` (Gemini API) and
``POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{model}:generateContent``
(Vertex AI) with scripted replies (text, or an HTTP error status) in order, and
keeps every request so tests can assert what the client sent. Where a lenient stand-in would hide a production
failure, it behaves like the service (public REST reference: GenerateContentResponse
with ``candidates[].finishReason`` and ``usageMetadata.thoughtsTokenCount``):

- a model id that is retired or unknown gets 404 NOT_FOUND, before any script is
  consumed, as the real API answers for a shut-down model;
- on Vertex AI, a model served only from the global endpoint and the multi-regions
  (every Gemini 3.x) asked at a regional location gets Vertex's 404 NOT_FOUND
  "Publisher Model `projects/.../locations/<region>/...` was not found or your
  project does not have access to it" (the shape reported in
  GoogleCloudPlatform/generative-ai#3004 and googleapis/java-genai#705);
- every error body has Google's shape ``{"error": {"code", "message", "status"}}``
  with the canonical status name of the HTTP code;
- Gemini 3 models think before answering and the thinking tokens count against
  ``maxOutputTokens``: a limit that thinking uses up yields an empty reply with
  ``finishReason: MAX_TOKENS``, a limit that leaves too little room a cut one;
  a ``thinkingLevel`` the model does not offer is 400 INVALID_ARGUMENT, and so is
  any thinking config for a model that does not think.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support import send_json

#: Text models the service serves today: the thinking levels each offers (empty: it does not
#: think and refuses a thinking config), its default level, and whether regional Vertex AI
#: endpoints serve it (Gemini 3.x: global, us and eu only).
GEMINI_3_LEVELS = {"LOW", "MEDIUM", "HIGH"}
SERVED: dict[str, tuple[set[str], str, bool]] = {
    "gemini-3.8-flash": (GEMINI_3_LEVELS, "MEDIUM", False),
    "gemini-3.7-flash": (GEMINI_3_LEVELS, "MEDIUM", False),
    "gemini-3.6-flash": (GEMINI_3_LEVELS | {"MINIMAL"}, "MEDIUM", False),
    "gemini-3.5-flash": (GEMINI_3_LEVELS | {"MINIMAL"}, "MEDIUM", False),
    "gemini-3.5-flash-lite": (GEMINI_3_LEVELS | {"MINIMAL"}, "MINIMAL", False),
    "gemini-3.1-flash-lite": (GEMINI_3_LEVELS | {"MINIMAL"}, "MINIMAL", False),
    # of no family ragbus knows: one that thinks by default (at MEDIUM, so an answer-sized cap
    # ends empty), served globally; one that does not think at all, served regionally too
    "gemini-4-argon": (GEMINI_3_LEVELS, "MEDIUM", False),
    "gemma-4-26b-it": (set(), "", True),
}
MULTI_REGIONS = frozenset({"global", "us", "eu"})
#: Shut down: the service answers 404 for these as for any id it does not know.
RETIRED = frozenset({
    "gemini-1.5-flash", "gemini-1.5-pro", "gemini-2.0-flash", "gemini-2.0-flash-001",
    "gemini-2.0-flash-lite", "gemini-2.0-flash-lite-001", "gemini-2.5-flash", "gemini-2.5-pro",
    "gemini-2.5-flash-lite",
})
#: Thinking tokens a reply spends at each level (the real counts vary with the question; these are
#: the stand-in's fixed sizes, so a cost measured on it is a model of the lever, not of the service).
THINKING_TOKENS = {"MINIMAL": 0, "LOW": 400, "MEDIUM": 1500, "HIGH": 6000}
CHARS_PER_TOKEN = 4

STATUS_NAMES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": STATUS_NAMES.get(code, "UNKNOWN")}}


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    thinking_tokens: int | None = None  # None: what the requested level spends


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.path.split("/models/", 1)[-1].split(":", 1)[0]

    @property
    def location(self) -> str | None:
        """The Vertex AI location in the path, None on the Gemini API."""
        parts = self.path.split("/")
        return parts[parts.index("locations") + 1] if "locations" in parts else None

    @property
    def response_schema(self) -> dict[str, Any] | None:
        """The JSON schema asked for (``responseJsonSchema``, or the older ``responseSchema``)."""
        config = self.generation_config
        return config.get("responseJsonSchema") or config.get("responseSchema")

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
    """``with FakeGemini() as server: genai.Client(api_key="test", http_options=HttpOptions(base_url=server.url))``.

    ``refuse_every_model=True`` answers 404 for every model, like an endpoint or
    project where the configured model does not exist.
    """

    def __init__(self, *, refuse_every_model: bool = False) -> None:
        self.replies: list[Reply] = []
        self.requests: list[RecordedRequest] = []
        self.refuse_every_model = refuse_every_model
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                request = RecordedRequest(self.path, body, dict(self.headers))
                with fake._lock:
                    fake.requests.append(request)
                status, payload = fake._answer(request)
                self._send(status, payload)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                send_json(self, status, payload)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def _answer(self, request: RecordedRequest) -> tuple[int, dict[str, Any]]:
        if not request.path.split("?", 1)[0].endswith(":generateContent"):
            return 404, error_body(404, f"unknown path {request.path}")
        model, location = request.model, request.location
        regional = location is not None and location not in MULTI_REGIONS
        if self.refuse_every_model or model in RETIRED or model not in SERVED or (regional and not SERVED[model][2]):
            if location is not None:
                resource = request.path.split("/", 2)[-1].split(":", 1)[0]
                return 404, error_body(404, (
                    f"Publisher Model `{resource}` was not found or your project does not have access to it. "
                    "Please ensure you are using a valid model version. For more information, see: "
                    "https://cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions"))
            return 404, error_body(404, (
                f"models/{model} is not found for API version v1beta, or is not supported for "
                "generateContent. Call ListModels to see the list of available models and their "
                "supported methods."))
        levels, default_level, _ = SERVED[model]
        thinking = request.generation_config.get("thinkingConfig") or {}
        if thinking and not levels:
            return 400, error_body(400, f"Thinking is not supported for models/{model}.")
        # proto3 JSON accepts a field's lowerCamelCase and its original name (the SDK sends the latter)
        level = thinking.get("thinkingLevel") or thinking.get("thinking_level") or default_level
        if levels and level not in levels:
            return 400, error_body(400, f"Thinking level {level} is not supported for models/{model}.")
        with self._lock:
            reply = self.replies.pop(0) if self.replies else Reply(status=500, text="no reply scripted")
        if reply.status != 200:
            return reply.status, error_body(reply.status, reply.text)
        limit = int(request.generation_config.get("maxOutputTokens") or 65_536)
        thoughts = THINKING_TOKENS.get(level, 0) if reply.thinking_tokens is None else reply.thinking_tokens
        text, finish = reply.text, "STOP"
        answer_tokens = math.ceil(len(text) / CHARS_PER_TOKEN)
        if thoughts >= limit:  # thinking used the whole limit: nothing of the answer is written
            thoughts, text, answer_tokens, finish = limit, "", 0, "MAX_TOKENS"
        elif thoughts + answer_tokens > limit:
            answer_tokens = limit - thoughts
            text, finish = text[: answer_tokens * CHARS_PER_TOKEN], "MAX_TOKENS"
        content: dict[str, Any] = {"role": "model", "parts": [{"text": text}] if text else []}
        # the prompt's tokens at the same rough rate as the answer's (the service's tokenizer differs)
        prompt_tokens = math.ceil(len(request.system_instruction + request.prompt) / CHARS_PER_TOKEN)
        usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": answer_tokens,
                 "totalTokenCount": prompt_tokens + answer_tokens + thoughts}
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        return 200, {
            "candidates": [{"content": content, "finishReason": finish, "index": 0}],
            "usageMetadata": usage,
            "modelVersion": model,
        }

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(self, text: str = "", status: int = 200, *, thinking_tokens: int | None = None) -> None:
        self.replies.append(Reply(text=text, status=status, thinking_tokens=thinking_tokens))

    def __enter__(self) -> FakeGemini:  # noqa: PYI034 - a plain test helper, never subclassed
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
