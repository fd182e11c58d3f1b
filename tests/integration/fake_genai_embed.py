"""A local HTTP server speaking the embedding endpoints google-genai calls.

- Gemini API (API key): ``POST /{v1,v1beta}/models/{model}:batchEmbedContents`` with
  ``{"requests": [{"model", "content": {"parts": [{"text"}]}, "taskType",
  "outputDimensionality"}, ...]}`` answered by ``{"embeddings": [{"values": [...]}, ...]}``.
- Vertex AI, ``POST /{v1,v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{model}:``
  - ``predict`` with ``{"instances": [{"content", "task_type"}], "parameters":
    {"outputDimensionality", "autoTruncate"}}`` answered by ``{"predictions": [{"embeddings": {"values"}}]}``;
  - ``embedContent`` with ``{"content": {"parts": [{"text"}]}, "embedContentConfig": {"taskType",
    "outputDimensionality", "autoTruncate"}}`` answered by ``{"embedding": {"values"}, "usageMetadata"}``
    (google-genai 3.x sends Gemini embedding models here, 2.x gemini-embedding-2 only);
  - ``batchEmbedContents`` with ``{"requests": [{"content", "embedContentConfig"}]}``.

Strict where the service is (Vertex AI "Get text embeddings", the gemini-embedding-2
model page): a Gemini embedding model on Vertex AI takes one text per online request
(more is 400 "batchSize must be 1", the error's real wording); gemini-embedding-2
takes no ``taskType`` (400) and is served from global/us/eu only (a regional path is
Vertex's 404 "Publisher Model ... was not found").

Vectors are deterministic functions of the text (a seeded random direction
scaled to length 3, so the client's normalisation shows). Scripted faults are
served in order before normal answers: an HTTP status, or a raw body. ``delay_s``
holds each answer that long, and ``max_in_flight`` records how many requests were
being answered at once.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np


@dataclass
class Fault:
    status: int = 500
    body: str | None = None  # raw reply body (status 200) when set


@dataclass
class EmbedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.path.rsplit("/", 1)[-1].split(":", 1)[0]

    @property
    def method(self) -> str:
        return self.path.rsplit(":", 1)[-1]

    @property
    def location(self) -> str | None:
        parts = self.path.split("/")
        return parts[parts.index("locations") + 1] if "locations" in parts else None

    def _items(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(content, config) per text, whatever the method."""
        if "requests" in self.body:
            return [(r.get("content") or {}, r.get("embedContentConfig") or r) for r in self.body["requests"]]
        if "content" in self.body:
            return [(self.body["content"], self.body.get("embedContentConfig") or {})]
        return []

    @property
    def texts(self) -> list[str]:
        if "instances" in self.body:
            return [i["content"] for i in self.body["instances"]]
        return ["".join(p.get("text", "") for p in content.get("parts", [])) for content, _ in self._items()]

    @property
    def task_types(self) -> list[str | None]:
        if "instances" in self.body:
            return [i.get("task_type") for i in self.body["instances"]]
        return [config.get("taskType") for _, config in self._items()]

    @property
    def dimensions(self) -> list[int | None]:
        if "instances" in self.body:
            return [self.body.get("parameters", {}).get("outputDimensionality")] * len(self.texts)
        return [config.get("outputDimensionality") for _, config in self._items()]

    @property
    def auto_truncate(self) -> list[bool | None]:
        if "instances" in self.body:
            return [self.body.get("parameters", {}).get("autoTruncate")] * len(self.texts)
        return [config.get("autoTruncate") for _, config in self._items()]


def _error(code: int, status: str, message: str) -> tuple[int, dict[str, Any]]:
    return code, {"error": {"code": code, "message": message, "status": status}}


def text_vector(text: str, dimension: int) -> np.ndarray:
    """The fake model's raw (length 3) vector for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    v = np.random.default_rng(seed).standard_normal(dimension)
    return 3.0 * v / np.linalg.norm(v)


class FakeEmbeddingServer:
    """``with FakeEmbeddingServer() as server: genai.Client(api_key="test", http_options=HttpOptions(base_url=server.url))``."""

    def __init__(
        self, *, default_dimension: int = 3072, dimension_override: int | None = None, delay_s: float = 0.0
    ) -> None:
        self.requests: list[EmbedRequest] = []
        self.faults: list[Fault] = []
        self.default_dimension = default_dimension
        self.dimension_override = dimension_override  # answer with this size whatever was asked
        self.delay_s = delay_s
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                request = EmbedRequest(self.path, body, dict(self.headers))
                with fake._lock:
                    fake.requests.append(request)
                    fault = fake.faults.pop(0) if fake.faults else None
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    time.sleep(fake.delay_s)
                    answer = fake._answer(request) if fault is None else None
                finally:
                    with fake._lock:  # answered: the client may send its next request now
                        fake.in_flight -= 1
                if fault is not None and fault.body is not None:
                    self._send(200, fault.body.encode())
                elif fault is not None:
                    self._send_json(*_error(fault.status, "UNAVAILABLE", "scripted fault"))
                else:
                    self._send_json(*answer)

            def _send_json(self, status: int, payload: dict[str, Any]) -> None:
                self._send(status, json.dumps(payload).encode())

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    def _answer(self, request: EmbedRequest) -> tuple[int, dict[str, Any]]:
        model, method, location = request.model, request.method, request.location
        gemini_2 = model.startswith("gemini-embedding-2")
        if location is not None and gemini_2 and location not in {"global", "us", "eu"}:
            resource = request.path.split("/", 2)[-1].split(":", 1)[0]
            return _error(404, "NOT_FOUND", (
                f"Publisher Model `{resource}` was not found or your project does not have access to it. "
                "Please ensure you are using a valid model version."))
        if gemini_2 and any(request.task_types):
            return _error(400, "INVALID_ARGUMENT",
                          "task_type is not supported for this model; write the task instruction into the text")
        if location is not None and "gemini" in model and len(request.texts) > 1:
            return _error(400, "INVALID_ARGUMENT", (
                "Unable to submit request because it included too many instances. Reduce the number of "
                f"instances and try again. Unable to submit request because batchSize must be 1 but the "
                f"entered value was {len(request.texts)}."))
        vectors = [self._values(t, d) for t, d in zip(request.texts, request.dimensions, strict=True)]
        if method == "batchEmbedContents":
            return 200, {"embeddings": [{"values": v} for v in vectors]}
        if method == "embedContent" and location is not None:
            return 200, {"embedding": {"values": vectors[0]},
                         "usageMetadata": {"promptTokenCount": 1}, "truncated": False}
        if method == "predict":
            return 200, {"predictions": [
                {"embeddings": {"values": v, "statistics": {"token_count": 1, "truncated": False}}}
                for v in vectors]}
        return _error(404, "NOT_FOUND", f"unknown path {request.path}")

    def _values(self, text: str, dimension: int | None) -> list[float]:
        size = self.dimension_override or dimension or self.default_dimension
        return [float(x) for x in text_vector(text, size)]

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def fail(self, status: int = 500, times: int = 1) -> None:
        self.faults.extend(Fault(status=status) for _ in range(times))

    def reply_raw(self, body: str) -> None:
        self.faults.append(Fault(status=200, body=body))

    def __enter__(self) -> FakeEmbeddingServer:  # noqa: PYI034 - a plain test helper, never subclassed
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
