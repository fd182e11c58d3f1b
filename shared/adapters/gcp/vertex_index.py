"""The Index port on Vertex AI Vector Search, with a StateStore beside it.

Vector Search keeps vectors and restrict tokens, nothing else. The chunks'
texts and metadata, their vectors (for exact re-scoring) and which chunk ids
belong to which document live in the companion
:class:`~shared.contract.ports.StateStore` (Firestore in the gcp runtime):

    vector_chunks/<chunk id>        the chunk's fields and its float32 vector (base64)
    vector_documents/<document id>  chunk_ids (searchable), pending (being written), indexed

The index must be created with ``index_update_method="STREAM_UPDATE"`` (streamed
upserts and removals), deployed to an endpoint, and its dimension must match the
embedder's.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np
from google.api_core import exceptions as gexc

from shared.adapters.gcp.calls import VERTEX_TRANSIENT, calling
from shared.adapters.gcp.candidate_rescoring import candidate_pool, rank_candidates
from shared.contract.errors import ConfigError
from shared.contract.filters import WHERE_FIELDS, Filters, published_at, source_token, source_tokens
from shared.contract.ports import (
    Chunk,
    Doc,
    ScoredChunk,
    SearchMode,
    StateStore,
    checked_query,
    checked_vectors,
)

log = logging.getLogger("ragbus.index.vertex")

CHUNKS = "vector_chunks"
DOCUMENTS = "vector_documents"
#: The restrict namespace every datapoint carries, so a query could be limited to documents.
DOCUMENT_NAMESPACE = "document_id"
#: Restrict namespaces behind filters (cloud.google.com/vertex-ai/docs/vector-search/filtering: tokens
#: within a namespace are ORed, namespaces ANDed; a datapoint without a queried namespace is left out).
KIND_NAMESPACE = "kind"
SOURCE_NAMESPACE = "source"
METADATA_NAMESPACE = "meta."  # + the metadata key
#: The numeric restrict holding the published time, in seconds since the epoch.
PUBLISHED_NAMESPACE = "published"
#: Datapoints per upsert or remove request (our choice: keeps each request well under the API's size limit).
DATAPOINTS_PER_REQUEST = 500
#: Neighbours asked for at most in one query.
MAX_NEIGHBORS = 1000
# Neighbours beyond k in dense mode: a datapoint whose chunk record is already gone
# (a replacement in flight; streamed removals take seconds to show) is skipped, not returned.
_SPARES = 8



class VectorSearchIndexClient(Protocol):
    """What this adapter uses of ``aiplatform.MatchingEngineIndex``."""

    def upsert_datapoints(self, datapoints: Sequence[Any]) -> Any: ...

    def remove_datapoints(self, datapoint_ids: Sequence[str]) -> Any: ...


class VectorSearchEndpointClient(Protocol):
    """What this adapter uses of ``aiplatform.MatchingEngineIndexEndpoint``."""

    def find_neighbors(
        self, *, deployed_index_id: str, queries: Any, num_neighbors: int,
        filter: Any = None, numeric_filter: Any = None,  # noqa: A002 - the SDK's name
    ) -> Any: ...


def encode_vector(vector: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


class VertexVectorSearchIndex:
    """:class:`~shared.contract.ports.Index` on Vertex AI Vector Search (vectors) and a StateStore (the rest).

    Pass the ``aiplatform.MatchingEngineIndex`` and ``MatchingEngineIndexEndpoint``
    (or :meth:`connect` to build them), the deployed index id, and the state store.

    Ordering and atomicity. Vector Search and the state store share no
    transaction, so nothing here is atomic; the order of the steps makes every
    intermediate state safe to search and every interrupted upsert repaired by
    the next upsert or delete of the same document:

    1. the document's record gains ``pending`` = the new chunk ids (a transaction);
    2. the new chunk records are written, then the datapoints upserted;
    3. the record's ``chunk_ids`` become the new ids, ``pending`` empties;
    4. stale datapoints are removed, then their chunk records deleted.

    A search keeps only neighbours whose chunk record exists, so it never returns a
    chunk without its text; while a replacement is in flight it may return chunks of
    the old and the new version together. Streamed updates reach search results
    within seconds (Vector Search is eventually consistent), and counts follow the
    state store, so they can run ahead of search.

    Scores and keyword search. Vector Search finds the candidates; their cosine is
    recomputed exactly from the vectors kept in the chunk records, so scores do not
    depend on the index's distance type or on ANN approximation. ``hybrid`` and
    ``bm25`` re-score a dense candidate pool with BM25 over the pool
    (:mod:`shared.adapters.gcp.candidate_rescoring`): a chunk that only matches the
    query's words, outside the pool, is not found.
    """

    def __init__(
        self,
        index: VectorSearchIndexClient,
        endpoint: VectorSearchEndpointClient,
        deployed_index_id: str,
        state: StateStore,
        *,
        dimension: int,
        dense_weight: float = 0.7,
        datapoints_per_request: int = DATAPOINTS_PER_REQUEST,
        max_neighbors: int = MAX_NEIGHBORS,
    ) -> None:
        if not deployed_index_id:
            raise ConfigError(
                "VertexVectorSearchIndex needs the deployed index id (RAGBUS_VERTEX_DEPLOYED_INDEX)"
            )
        if dimension <= 0:
            raise ConfigError(f"dimension={dimension} must be positive")
        if not 0.0 <= dense_weight <= 1.0:
            raise ConfigError(f"dense_weight={dense_weight} must be between 0 and 1")
        self.index = index
        self.endpoint = endpoint
        self.deployed_index_id = deployed_index_id
        self.state = state
        self.dimension = dimension
        self.dense_weight = dense_weight
        self.datapoints_per_request = max(1, datapoints_per_request)
        self.max_neighbors = max(1, max_neighbors)

    @classmethod
    def connect(
        cls,
        *,
        index_name: str,
        endpoint_name: str,
        deployed_index_id: str,
        state: StateStore,
        dimension: int,
        project: str | None = None,
        location: str | None = None,
        **options: Any,
    ) -> VertexVectorSearchIndex:
        """Look up the index and endpoint (resource names or ids) with google-cloud-aiplatform."""
        from google.cloud import aiplatform

        index = aiplatform.MatchingEngineIndex(
            index_name=index_name, project=project, location=location
        )
        endpoint = aiplatform.MatchingEngineIndexEndpoint(
            index_endpoint_name=endpoint_name, project=project, location=location
        )
        return cls(index, endpoint, deployed_index_id, state, dimension=dimension, **options)

    def _calling(self, what: str) -> AbstractContextManager[None]:
        return calling(
            "Vertex AI Vector Search", what, transient=VERTEX_TRANSIENT,
            refused=(gexc.NotFound, gexc.PermissionDenied, gexc.InvalidArgument, gexc.FailedPrecondition),
            refused_hint="check the index, endpoint and deployed index id, that the index uses "
                         "STREAM_UPDATE, and its dimension",
        )

    # ------------------------------------------------------------- writes

    def datapoint(self, chunk: Chunk, vector: np.ndarray) -> Any:
        """The SDK's ``IndexDatapoint`` for a chunk: its id, vector, and the restricts its filters
        query (document, kind, source prefixes, metadata; the published time as a numeric restrict)."""
        from google.cloud.aiplatform_v1.types import IndexDatapoint

        restricts = [IndexDatapoint.Restriction(namespace=DOCUMENT_NAMESPACE, allow_list=[chunk.document_id])]
        if chunk.source:
            restricts.append(IndexDatapoint.Restriction(namespace=KIND_NAMESPACE, allow_list=[chunk.source]))
        tokens = sorted(set(source_tokens(chunk.origin)) | set(source_tokens(chunk.url)))
        if tokens:
            restricts.append(IndexDatapoint.Restriction(namespace=SOURCE_NAMESPACE, allow_list=tokens))
        for key, value in sorted(chunk.metadata.items()):
            values = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
            restricts.append(IndexDatapoint.Restriction(namespace=METADATA_NAMESPACE + key, allow_list=values))
        numeric = []
        published = published_at(chunk.published)
        if published is not None:
            numeric.append(IndexDatapoint.NumericRestriction(
                namespace=PUBLISHED_NAMESPACE, value_int=int(published.timestamp())))
        return IndexDatapoint(
            datapoint_id=chunk.chunk_id,
            feature_vector=[float(x) for x in vector],
            restricts=restricts,
            numeric_restricts=numeric,
        )

    def upsert(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Replace every chunk of ``document_id`` with ``chunks`` (ordered, not atomic: see the class)."""
        vectors = self._checked(document_id, chunks, vectors)
        new_ids = [c.chunk_id for c in chunks]
        if len(set(new_ids)) != len(new_ids):
            raise ValueError(f"upsert of {document_id}: chunk ids are not unique")

        def mark_pending(current: Doc | None) -> Doc:
            current = current or {
                "document_id": document_id,
                "chunk_ids": [],
                "pending": [],
                "indexed": False,
            }
            pending = sorted(set(current.get("pending", [])) | set(new_ids))
            return {**current, "pending": pending}

        before = self.state.update(DOCUMENTS, document_id, mark_pending) or {}
        for chunk, vector in zip(chunks, vectors, strict=True):
            self.state.put(CHUNKS, chunk.chunk_id, _chunk_record(chunk, vector))
        datapoints = [self.datapoint(c, v) for c, v in zip(chunks, vectors, strict=True)]
        with self._calling(f"upsert of {document_id}"):
            for start in range(0, len(datapoints), self.datapoints_per_request):
                self.index.upsert_datapoints(
                    datapoints=datapoints[start : start + self.datapoints_per_request]
                )

        def commit(current: Doc | None) -> Doc:
            current = current or {"document_id": document_id}
            # Another upsert may have started meanwhile: its pending ids stay pending.
            still_pending = sorted(
                set(current.get("pending", [])) - set(new_ids) - set(before.get("pending", []))
            )
            return {
                **current,
                "chunk_ids": new_ids,
                "pending": still_pending,
                "indexed": bool(new_ids),
            }

        self.state.update(DOCUMENTS, document_id, commit)
        stale = (set(before.get("chunk_ids", [])) | set(before.get("pending", []))) - set(new_ids)
        self._remove(document_id, sorted(stale))
        if not new_ids:
            record = self.state.get(DOCUMENTS, document_id)
            if record is not None and not record.get("pending"):
                self.state.delete(DOCUMENTS, document_id)

    def delete_document(self, document_id: str) -> int:
        """Remove the document's datapoints, chunk records and record; how many chunks it had."""
        record = self.state.get(DOCUMENTS, document_id)
        if record is None:
            return 0
        ids = sorted(set(record.get("chunk_ids", [])) | set(record.get("pending", [])))
        removed = self._remove(document_id, ids)
        self.state.delete(DOCUMENTS, document_id)
        return removed

    def _remove(self, document_id: str, chunk_ids: list[str]) -> int:
        """Datapoints first, then records: a search never meets a datapoint without its text."""
        if not chunk_ids:
            return 0
        with self._calling(f"removal of {document_id}'s datapoints"):
            for start in range(0, len(chunk_ids), self.datapoints_per_request):
                self.index.remove_datapoints(
                    datapoint_ids=chunk_ids[start : start + self.datapoints_per_request]
                )
        return sum(1 for chunk_id in chunk_ids if self.state.delete(CHUNKS, chunk_id))

    def _checked(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> np.ndarray:
        return checked_vectors(document_id, chunks, vectors, self.dimension)

    # -------------------------------------------------------------- reads

    def search(
        self, text: str, vector: np.ndarray, k: int, mode: SearchMode = "hybrid",
        filters: Filters | None = None,
    ) -> list[ScoredChunk]:
        """The ``k`` best chunks for the query among those ``filters`` admits; ``mode`` is hybrid,
        dense or bm25 (see the class). Filters become restricts, applied by Vector Search during
        the neighbour search, and are checked again on each record (a Cloud Storage prefix that
        ends mid-name, a ``where`` on a chunk field, records written before restricts existed)."""
        query = checked_query(vector, k, mode, self.dimension)
        if query is None:
            return []
        pool = candidate_pool(k, mode, cap=self.max_neighbors)
        if mode == "dense":
            pool = min(pool + _SPARES, self.max_neighbors)
        restricts: dict[str, Any] = {}
        if filters is not None and not filters.is_empty:
            restricts = self.restricts(filters)
        with self._calling("query"):
            results = self.endpoint.find_neighbors(
                deployed_index_id=self.deployed_index_id,
                queries=[[float(x) for x in query]],
                num_neighbors=pool,
                **restricts,
            )
        neighbours = results[0] if results else []
        ids = list(dict.fromkeys(n.id for n in neighbours))
        # One batched read of every neighbour's record (Firestore get_all), not one per neighbour.
        records = self.state.get_many(CHUNKS, ids)
        candidates: list[tuple[Chunk, float]] = []
        for chunk_id in ids:
            record = records.get(chunk_id)
            if record is None:
                continue  # removed since (or never fully written): not searchable
            if restricts and not filters.matches(record):
                continue
            candidates.append((Chunk.from_fields(record), float(decode_vector(record["vector"]) @ query)))
        return rank_candidates(text, candidates, k, mode, dense_weight=self.dense_weight)

    @staticmethod
    def restricts(filters: Filters) -> dict[str, Any]:
        """``find_neighbors``'s ``filter`` and ``numeric_filter`` arguments for ``filters``."""
        from google.cloud.aiplatform.matching_engine.matching_engine_index_endpoint import (
            Namespace,
            NumericNamespace,
        )

        tokens: list[Any] = []
        if filters.kind is not None:
            tokens.append(Namespace(KIND_NAMESPACE, allow_tokens=[filters.kind]))
        if filters.source is not None:
            tokens.append(Namespace(SOURCE_NAMESPACE, allow_tokens=[source_token(filters.source)]))
        for key, value in filters.where:
            if key == "document_id":
                tokens.append(Namespace(DOCUMENT_NAMESPACE, allow_tokens=[value]))
            elif key not in WHERE_FIELDS:
                tokens.append(Namespace(METADATA_NAMESPACE + key, allow_tokens=[value]))
        numeric: list[Any] = []
        if filters.since is not None:
            numeric.append(NumericNamespace(PUBLISHED_NAMESPACE, value_int=int(filters.since.timestamp()),
                                            op="GREATER_EQUAL"))
        if filters.until is not None:
            numeric.append(NumericNamespace(PUBLISHED_NAMESPACE, value_int=int(filters.until.timestamp()), op="LESS"))
        out: dict[str, Any] = {}
        if tokens:
            out["filter"] = tokens
        if numeric:
            out["numeric_filter"] = numeric
        return out

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are skipped."""
        records = self.state.get_many(CHUNKS, list(chunk_ids))
        return [Chunk.from_fields(records[chunk_id]) for chunk_id in chunk_ids if chunk_id in records]

    def document_chunk_ids(self, document_id: str) -> list[str]:
        """The searchable chunk ids of the document, in order (empty when not indexed)."""
        record = self.state.get(DOCUMENTS, document_id)
        return list(record.get("chunk_ids", [])) if record else []

    def count_chunks(self) -> int:
        return self.state.count(CHUNKS)

    def count_documents(self) -> int:
        return self.state.count(DOCUMENTS, {"indexed": True})


def _chunk_record(chunk: Chunk, vector: np.ndarray) -> Doc:
    return {**chunk.fields(), "vector": encode_vector(vector)}
