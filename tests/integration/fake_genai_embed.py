"""A local HTTP server speaking the embedding endpoints google-genai calls.

- Gemini API (API key): ``POST /v1beta/models/{model}:batchEmbedContents`` with
  ``{"requests": [{"model", "content": {"parts": [{"text"}]}, "taskType",
  "outputDimensionality"}, ...]}`` answered by ``{"embeddings": [{"values": [...]}, ...]}``.
- Vertex AI: ``POST /v1beta1/projects/{p}/locations/{l}/publishers/google/models/{model}:predict``
  with ``{"instances": [{"content", "task_type"}], "parameters": {"outputDimensionality",
  "autoTruncate"}}`` answered by ``{"predictions": [{"embeddings": {"values": [...]}}]}``.

Vectors are deterministic functions of the text (a seeded random direction
scaled to length 3, so the client's normalisation shows). Scripted faults are
served in order before normal answers: an HTTP status, or a raw body.
"""

from __future__ import annotations

import hashlib
import json
import threading
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
    def texts(self) -> list[str]:
        if "requests" in self.body:
            return [
                "".join(p.get("text", "") for p in r["content"]["parts"])
                for r in self.body["requests"]
            ]
        return [i["content"] for i in self.body.get("instances", [])]

    @property
    def task_types(self) -> list[str | None]:
        if "requests" in self.body:
            return [r.get("taskType") for r in self.body["requests"]]
        return [i.get("task_type") for i in self.body.get("instances", [])]

    @property
    def dimensions(self) -> list[int | None]:
        if "requests" in self.body:
            return [r.get("outputDimensionality") for r in self.body["requests"]]
        return [self.body.get("parameters", {}).get("outputDimensionality")] * len(self.texts)


def text_vector(text: str, dimension: int) -> np.ndarray:
    """The fake model's raw (length 3) vector for ``text``."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    v = np.random.default_rng(seed).standard_normal(dimension)
    return 3.0 * v / np.linalg.norm(v)


class FakeEmbeddingServer:
    """``with FakeEmbeddingServer() as server: genai.Client(api_key="test", http_options=HttpOptions(base_url=server.url))``."""

    def __init__(
        self, *, default_dimension: int = 3072, dimension_override: int | None = None
    ) -> None:
        self.requests: list[EmbedRequest] = []
        self.faults: list[Fault] = []
        self.default_dimension = default_dimension
        self.dimension_override = dimension_override  # answer with this size whatever was asked
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
                if fault is not None and fault.body is not None:
                    self._send(200, fault.body.encode())
                elif fault is not None:
                    self._send_json(
                        fault.status,
                        {
                            "error": {
                                "code": fault.status,
                                "message": "scripted fault",
                                "status": "UNAVAILABLE",
                            }
                        },
                    )
                elif self.path.endswith(":batchEmbedContents"):
                    self._send_json(
                        200,
                        {
                            "embeddings": [
                                {"values": fake._values(t, d)}
                                for t, d in zip(request.texts, request.dimensions, strict=True)
                            ]
                        },
                    )
                elif self.path.endswith(":predict"):
                    self._send_json(
                        200,
                        {
                            "predictions": [
                                {
                                    "embeddings": {
                                        "values": fake._values(t, d),
                                        "statistics": {"token_count": 1, "truncated": False},
                                    }
                                }
                                for t, d in zip(request.texts, request.dimensions, strict=True)
                            ]
                        },
                    )
                else:
                    self._send_json(
                        404,
                        {
                            "error": {
                                "code": 404,
                                "message": f"unknown path {self.path}",
                                "status": "NOT_FOUND",
                            }
                        },
                    )

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
