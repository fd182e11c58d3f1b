"""An in-memory stand-in for Vertex AI Vector Search's two client objects.

:class:`FakeMatchingEngine` has the methods ``VertexVectorSearchIndex`` calls on
``aiplatform.MatchingEngineIndex`` (``upsert_datapoints``, ``remove_datapoints``)
and on ``MatchingEngineIndexEndpoint`` (``find_neighbors``), with the SDK's
argument names. It keeps the ``IndexDatapoint`` objects it receives, answers
with the SDK's ``MatchNeighbor`` (exact cosine search, most similar first, the
similarity as ``distance`` like a DOT_PRODUCT_DISTANCE index), and records
every call so tests can assert what the adapter sent.

``filter`` (token restricts) and ``numeric_filter`` are applied as
cloud.google.com/vertex-ai/docs/vector-search/filtering describes them: a
datapoint matches a namespace when it has one of the allowed tokens and none of
the denied ones; namespaces and numeric conditions are ANDed; a datapoint
without a restricted namespace (token or numeric) does not match it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Call:
    method: str
    kwargs: dict[str, Any]


@dataclass
class FakeMatchingEngine:
    dimension: int
    deployed_index_id: str = "ragbus_deployed"
    datapoints: dict[str, Any] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    # ------------------------------------------------ MatchingEngineIndex

    def upsert_datapoints(
        self, datapoints: Sequence[Any], update_mask: Sequence[str] | None = None
    ) -> FakeMatchingEngine:
        self.calls.append(
            Call("upsert_datapoints", {"datapoints": list(datapoints), "update_mask": update_mask})
        )
        for point in datapoints:
            if len(point.feature_vector) != self.dimension:
                raise ValueError(
                    f"datapoint {point.datapoint_id} has {len(point.feature_vector)} values, index has {self.dimension}"
                )
            self.datapoints[point.datapoint_id] = point
        return self

    def remove_datapoints(self, datapoint_ids: Sequence[str]) -> FakeMatchingEngine:
        self.calls.append(Call("remove_datapoints", {"datapoint_ids": list(datapoint_ids)}))
        for datapoint_id in datapoint_ids:
            self.datapoints.pop(datapoint_id, None)  # removing an unknown id is not an error
        return self

    # ---------------------------------------- MatchingEngineIndexEndpoint

    def find_neighbors(
        self,
        *,
        deployed_index_id: str,
        queries: list[list[float]] | None = None,
        num_neighbors: int = 10,
        **options: Any,
    ) -> list[list[Any]]:
        from google.cloud.aiplatform.matching_engine.matching_engine_index_endpoint import (
            MatchNeighbor,
        )

        self.calls.append(
            Call(
                "find_neighbors",
                {
                    "deployed_index_id": deployed_index_id,
                    "queries": queries,
                    "num_neighbors": num_neighbors,
                    **options,
                },
            )
        )
        if deployed_index_id != self.deployed_index_id:
            raise ValueError(f"no deployed index {deployed_index_id!r}")
        ids = [i for i in self.datapoints
               if _admitted(self.datapoints[i], options.get("filter"), options.get("numeric_filter"))]
        out: list[list[Any]] = []
        for query in queries or []:
            if not ids:
                out.append([])
                continue
            matrix = np.array(
                [list(self.datapoints[i].feature_vector) for i in ids], dtype=np.float64
            )
            q = np.asarray(query, dtype=np.float64)
            norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(q) or 1.0)
            cosine = matrix @ q / np.where(norms == 0, 1.0, norms)
            order = np.argsort(-cosine, kind="stable")[:num_neighbors]
            out.append([MatchNeighbor(id=ids[i], distance=float(cosine[i])) for i in order])
        return out

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]


_OPS = {
    "LESS": lambda a, b: a < b,
    "LESS_EQUAL": lambda a, b: a <= b,
    "EQUAL": lambda a, b: a == b,
    "GREATER_EQUAL": lambda a, b: a >= b,
    "GREATER": lambda a, b: a > b,
    "NOT_EQUAL": lambda a, b: a != b,
}


def _admitted(point: Any, tokens: Sequence[Any] | None, numeric: Sequence[Any] | None) -> bool:
    held = {r.namespace: set(r.allow_list) for r in point.restricts}
    for namespace in tokens or []:
        have = held.get(namespace.name)
        if have is None:
            return False
        if namespace.allow_tokens and not have & set(namespace.allow_tokens):
            return False
        if have & set(namespace.deny_tokens or []):
            return False
    values = {r.namespace: r.value_int for r in point.numeric_restricts}
    for condition in numeric or []:
        if condition.op not in _OPS:
            raise ValueError(f"numeric filter op {condition.op!r} is not one of {sorted(_OPS)}")
        if condition.value_int is None:
            raise ValueError("this stand-in compares value_int only")
        if condition.name not in values or not _OPS[condition.op](values[condition.name], condition.value_int):
            return False
    return True
