"""A stand-in for Vertex AI Vector Search that speaks its REST shapes (v1), in memory or over HTTP.

:class:`FakeMatchingEngine` has the calls ``VertexVectorSearchIndex`` makes (those of
``shared.adapters.gcp.vector_search_rest.VectorSearchRest``) and takes and returns their JSON
bodies: ``upsert_datapoints`` (IndexDatapoint: ``datapointId``, ``featureVector``,
``sparseEmbedding {values, dimensions}``, ``restricts``, ``numericRestricts``),
``remove_datapoints`` and ``find_neighbors`` (FindNeighborsRequest.Query: ``datapoint``,
``neighborCount``, ``rrf {alpha}``; answered with ``neighbors [{datapoint {datapointId},
distance, sparseDistance}]``). :class:`FakeVectorSearchServer` serves the same engine on
127.0.0.1 at the REST paths (``/v1/{index}:upsertDatapoints``, ``:removeDatapoints``,
``GET /v1/{indexEndpoint}`` with its ``publicEndpointDomainName``, and
``/v1/{indexEndpoint}:findNeighbors``), so the real REST client is what talks to it.

Searches as the service describes them (cloud.google.com/vertex-ai/docs/vector-search/about-hybrid-search,
FindNeighborsRequest.Query.RRF): a dense query ranks by the vector (cosine here, reported as
``distance``); a sparse-only query by the dot product of sparse embeddings (``sparseDistance``),
leaving out datapoints that share no dimension; a query with both and ``rrf`` fuses the two
rankings by reciprocal rank, ``alpha`` weighing dense against sparse (1: dense only, 0: sparse
only). The RRF constant (60) is the stand-in's: Google does not publish the service's. Filters
follow cloud.google.com/vertex-ai/docs/vector-search/filtering: a datapoint matches a namespace
when it holds one of the allowed tokens and none of the denied; namespaces and numeric
conditions are ANDed; a datapoint without a restricted namespace does not match it. Malformed
bodies are refused with 400 INVALID_ARGUMENT, as the service refuses them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from tests.support import send_json

RRF_CONSTANT = 60


class InvalidArgument(ValueError):
    """A body the service would answer 400 INVALID_ARGUMENT."""


@dataclass
class Call:
    method: str
    kwargs: dict[str, Any]


@dataclass
class FakeMatchingEngine:
    dimension: int
    deployed_index_id: str = "ragbus_deployed"
    datapoints: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    # ------------------------------------------------ IndexService

    def upsert_datapoints(self, datapoints: Sequence[dict[str, Any]]) -> None:
        self.calls.append(Call("upsert_datapoints", {"datapoints": list(datapoints)}))
        for point in datapoints:
            _check_datapoint(point, self.dimension, query=False)
        for point in datapoints:
            self.datapoints[point["datapointId"]] = point

    def remove_datapoints(self, datapoint_ids: Sequence[str]) -> None:
        self.calls.append(Call("remove_datapoints", {"datapoint_ids": list(datapoint_ids)}))
        for datapoint_id in datapoint_ids:
            self.datapoints.pop(datapoint_id, None)  # removing an unknown id is not an error

    # ------------------------------------------------ MatchService

    def find_neighbors(self, deployed_index_id: str, queries: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        self.calls.append(Call("find_neighbors", {"deployed_index_id": deployed_index_id, "queries": list(queries)}))
        if deployed_index_id != self.deployed_index_id:
            raise InvalidArgument(f"no deployed index {deployed_index_id!r}")
        return [self._answer(query) for query in queries]

    def _answer(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        point = query.get("datapoint")
        if not isinstance(point, dict):
            raise InvalidArgument("a query needs its datapoint")
        _check_datapoint(point, self.dimension, query=True)
        count = int(query.get("neighborCount") or 10)
        dense = point.get("featureVector")
        sparse = point.get("sparseEmbedding")
        rrf = query.get("rrf")
        if rrf is not None:
            alpha = rrf.get("alpha") if isinstance(rrf, dict) else None
            if not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
                raise InvalidArgument("rrf.alpha must be a number between 0 and 1")
            if not dense or not sparse:
                raise InvalidArgument("rrf ranks a hybrid query: it needs a dense and a sparse embedding")
        admitted = [i for i, p in self.datapoints.items()
                    if _admitted(p, point.get("restricts"), point.get("numericRestricts"))]
        dense_scores = {i: _cosine(self.datapoints[i].get("featureVector") or [], dense) for i in admitted} if dense else {}
        sparse_scores = {i: s for i in admitted
                         if (s := _sparse_dot(self.datapoints[i].get("sparseEmbedding"), sparse)) > 0} if sparse else {}
        if dense and sparse and rrf is not None:
            order = _fused(dense_scores, sparse_scores, float(rrf["alpha"]), count)
        elif dense:
            order = sorted(dense_scores, key=lambda i: -dense_scores[i])
        else:
            order = sorted(sparse_scores, key=lambda i: -sparse_scores[i])
        out = []
        for i in order[:count]:
            neighbour: dict[str, Any] = {"datapoint": {"datapointId": i}}
            if i in dense_scores:
                neighbour["distance"] = dense_scores[i]
            if i in sparse_scores:
                neighbour["sparseDistance"] = sparse_scores[i]
            out.append(neighbour)
        return out

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]


def _fused(dense: dict[str, float], sparse: dict[str, float], alpha: float, count: int) -> list[str]:
    dense_rank = {i: r for r, i in enumerate(sorted(dense, key=lambda i: -dense[i])[:count], 1)}
    sparse_rank = {i: r for r, i in enumerate(sorted(sparse, key=lambda i: -sparse[i])[:count], 1)}
    score = {i: alpha / (RRF_CONSTANT + dense_rank[i]) if i in dense_rank else 0.0
             for i in set(dense_rank) | set(sparse_rank)}
    for i, rank in sparse_rank.items():
        score[i] += (1.0 - alpha) / (RRF_CONSTANT + rank)
    return sorted(score, key=lambda i: (-score[i], i))


def _cosine(vector: Sequence[float], query: Sequence[float]) -> float:
    v, q = np.asarray(vector, dtype=np.float64), np.asarray(query, dtype=np.float64)
    norm = float(np.linalg.norm(v) * np.linalg.norm(q))
    return float(v @ q / norm) if norm else 0.0


def _sparse_dot(point: dict[str, Any] | None, query: dict[str, Any]) -> float:
    if not point:
        return 0.0
    held = dict(zip((int(d) for d in point["dimensions"]), point["values"], strict=True))
    return float(sum(held.get(int(d), 0.0) * v for d, v in zip(query["dimensions"], query["values"], strict=True)))


def _check_datapoint(point: Any, dimension: int, *, query: bool) -> None:
    if not isinstance(point, dict):
        raise InvalidArgument("a datapoint is an object")
    if not query and not point.get("datapointId"):
        raise InvalidArgument("datapointId is required")
    dense = point.get("featureVector")
    if dense is not None and len(dense) != dimension:
        raise InvalidArgument(f"datapoint {point.get('datapointId')} has {len(dense)} values, index has {dimension}")
    sparse = point.get("sparseEmbedding")
    if sparse is not None:
        values, dims = sparse.get("values"), sparse.get("dimensions")
        if not isinstance(values, list) or not isinstance(dims, list) or len(values) != len(dims) or not dims:
            raise InvalidArgument("sparseEmbedding needs as many values as dimensions, at least one")
        if len({int(d) for d in dims}) != len(dims) or any(int(d) < 0 or int(d) >= 2**63 for d in dims):
            raise InvalidArgument("sparseEmbedding dimensions must be distinct int64 indices")
    if not dense and not sparse:
        raise InvalidArgument("a datapoint needs a featureVector or a sparseEmbedding")


_OPS = {
    "LESS": lambda a, b: a < b,
    "LESS_EQUAL": lambda a, b: a <= b,
    "EQUAL": lambda a, b: a == b,
    "GREATER_EQUAL": lambda a, b: a >= b,
    "GREATER": lambda a, b: a > b,
    "NOT_EQUAL": lambda a, b: a != b,
}


def _admitted(point: dict[str, Any], tokens: Sequence[dict[str, Any]] | None,
              numeric: Sequence[dict[str, Any]] | None) -> bool:
    held = {r["namespace"]: set(r.get("allowList") or []) for r in point.get("restricts") or []}
    for namespace in tokens or []:
        have = held.get(namespace["namespace"])
        if have is None:
            return False
        if namespace.get("allowList") and not have & set(namespace["allowList"]):
            return False
        if have & set(namespace.get("denyList") or []):
            return False
    values = {r["namespace"]: int(r["valueInt"]) for r in point.get("numericRestricts") or [] if "valueInt" in r}
    for condition in numeric or []:
        if condition.get("op") not in _OPS:
            raise InvalidArgument(f"numeric restrict op {condition.get('op')!r} is not one of {sorted(_OPS)}")
        if "valueInt" not in condition:
            raise InvalidArgument("this stand-in compares valueInt only")
        name = condition["namespace"]
        if name not in values or not _OPS[condition["op"]](values[name], int(condition["valueInt"])):
            return False
    return True


class FakeVectorSearchServer:
    """``with FakeVectorSearchServer(engine, index=..., endpoint=...) as server:`` the engine at its
    REST paths on 127.0.0.1; ``server.url`` is both the regional API and the public endpoint domain."""

    def __init__(self, engine: FakeMatchingEngine, *, index: str, endpoint: str) -> None:
        self.engine = engine
        self.index = index
        self.endpoint = endpoint
        self.requests: list[tuple[str, str, dict[str, Any] | None, dict[str, str]]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                fake.requests.append(("GET", self.path, None, dict(self.headers)))
                if self.path == f"/v1/{fake.endpoint}":
                    self._send(200, {"name": fake.endpoint, "publicEndpointDomainName": fake.url})
                else:
                    self._send(404, _error(404, f"{self.path} was not found"))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, _error(400, "Invalid JSON payload received."))
                    return
                fake.requests.append(("POST", self.path, body, dict(self.headers)))
                try:
                    self._send(200, fake._route(self.path, body))
                except InvalidArgument as exc:
                    self._send(400, _error(400, str(exc)))
                except LookupError as exc:
                    self._send(404, _error(404, str(exc)))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                send_json(self, status, payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._lock = threading.Lock()

    def _route(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if path == f"/v1/{self.index}:upsertDatapoints":
                self.engine.upsert_datapoints(body.get("datapoints") or [])
                return {}
            if path == f"/v1/{self.index}:removeDatapoints":
                self.engine.remove_datapoints(body.get("datapointIds") or [])
                return {}
            if path == f"/v1/{self.endpoint}:findNeighbors":
                queries = body.get("queries") or []
                answers = self.engine.find_neighbors(body.get("deployedIndexId", ""), queries)
                return {"nearestNeighbors": [{"id": q.get("datapoint", {}).get("datapointId", ""), "neighbors": a}
                                             for q, a in zip(queries, answers, strict=True)]}
        raise LookupError(f"{path} was not found")

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeVectorSearchServer:  # noqa: PYI034 - a plain test helper
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _error(code: int, message: str) -> dict[str, Any]:
    status = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}.get(code, "UNKNOWN")
    return {"error": {"code": code, "message": message, "status": status}}
