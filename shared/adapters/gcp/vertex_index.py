"""The Index port on Vertex AI Vector Search, with a StateStore beside it.

Vector Search keeps vectors and restrict tokens, nothing else. The chunks'
texts and metadata, their vectors (for exact re-scoring) and which chunk ids
belong to which document live in the companion
:class:`~shared.contract.ports.StateStore` (Firestore in the gcp runtime):

    vector_chunks/<chunk id>        the chunk's fields and its float32 vector (base64)
    vector_documents/<document id>  chunk_ids (searchable), pending (being written), indexed

The index must be created with ``index_update_method="STREAM_UPDATE"`` (streamed
upserts and removals), deployed to a public endpoint, and its dimension must match the
embedder's. The service is called over its REST API (:mod:`shared.adapters.gcp.vector_search_rest`):
google-cloud-aiplatform is not needed.

Keyword search is corpus-wide: every datapoint carries a sparse embedding, its chunk's
BM25 term weights made at indexing with the local index's tokenisation
(:mod:`shared.adapters.gcp.sparse_terms`), and a hybrid search sends a hybrid query (the
dense vector and the query's IDF-weighted terms, fused by Vector Search with reciprocal rank
fusion), so a chunk that only keyword search finds is found as it is locally.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np
from google.api_core import exceptions as gexc

from shared.adapters.gcp import sparse_terms
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
#: rrf.alpha of a hybrid query: the candidate pool takes the dense and the sparse ranking's best
#: alike, as the local index takes two candidate lists of the same size; dense_weight then ranks
#: the pool (hybrid_scores), as it does locally.
RRF_ALPHA = 0.5
#: How long a counted document frequency (and the corpus size) is reused: a count aggregation is
#: billed one read per 1,000 index entries it counts (10,000 reads for the size of a 10M-chunk
#: corpus), and IDF barely moves in minutes. Bounded, so a stream of odd words cannot grow it.
STATISTICS_TTL_S = 600.0
STATISTICS_MAX_TERMS = 50_000
# Neighbours beyond k in dense mode: a datapoint whose chunk record is already gone
# (a replacement in flight; streamed removals take seconds to show) is skipped, not returned.
_SPARES = 8



class VectorSearchClient(Protocol):
    """What this adapter calls of Vector Search: the REST calls of
    :class:`~shared.adapters.gcp.vector_search_rest.VectorSearchRest`, in their JSON shapes."""

    def upsert_datapoints(self, datapoints: Sequence[dict[str, Any]]) -> Any: ...

    def remove_datapoints(self, datapoint_ids: Sequence[str]) -> Any: ...

    def find_neighbors(self, deployed_index_id: str, queries: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        ...


def encode_vector(vector: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


class VertexVectorSearchIndex:
    """:class:`~shared.contract.ports.Index` on Vertex AI Vector Search (vectors) and a StateStore (the rest).

    Pass the Vector Search client (:class:`~shared.adapters.gcp.vector_search_rest.VectorSearchRest`,
    or :meth:`connect` to build it), the deployed index id, and the state store.

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

    Scores and keyword search. Vector Search finds the candidates: ``dense`` by the
    vector alone, ``hybrid`` by a hybrid query (the vector and the query's sparse BM25
    embedding, fused by reciprocal rank, :data:`RRF_ALPHA`), ``bm25``
    by the sparse embedding alone (alpha 0). The candidates are then scored as the local
    index scores its own: the cosine recomputed exactly from the vectors kept in the chunk
    records, BM25 with corpus-wide document frequencies (counted on the chunk records'
    ``terms``), fused by the local index's formula
    (:func:`shared.adapters.local.scoring.hybrid_scores`). A chunk whose words match the
    query is found wherever it ranks by vector.
    """

    def __init__(
        self,
        service: VectorSearchClient,
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
        self.service = service
        self.deployed_index_id = deployed_index_id
        self.state = state
        self.dimension = dimension
        self.dense_weight = dense_weight
        self.datapoints_per_request = max(1, datapoints_per_request)
        self.max_neighbors = max(1, max_neighbors)
        self._statistics: dict[str, tuple[float, int]] = {}  # term (or "" for the corpus size) -> (when, count)
        self._statistics_lock = threading.Lock()

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
        """The index and endpoint (resource names or ids) over REST, with Application Default Credentials."""
        from shared.adapters.gcp.vector_search_rest import VectorSearchRest

        with calling("Vertex AI Vector Search", "connection", transient=VERTEX_TRANSIENT,
                     refused=(gexc.InvalidArgument,), refused_hint="set GOOGLE_CLOUD_LOCATION and the resource names"):
            service = VectorSearchRest.connect(index_name=index_name, endpoint_name=endpoint_name,
                                               project=project, location=location)
        return cls(service, deployed_index_id, state, dimension=dimension, **options)

    def _calling(self, what: str) -> AbstractContextManager[None]:
        # Over REST an error is the class of its HTTP status (400 BadRequest, 403 Forbidden, 504
        # GatewayTimeout), the parents of the gRPC-named ones (InvalidArgument, PermissionDenied, ...).
        return calling(
            "Vertex AI Vector Search", what, transient=(*VERTEX_TRANSIENT, gexc.GatewayTimeout, gexc.BadGateway),
            refused=(gexc.NotFound, gexc.Forbidden, gexc.Unauthorized, gexc.BadRequest),
            refused_hint="check the index, endpoint and deployed index id, that the index uses "
                         "STREAM_UPDATE, and its dimension",
        )

    # ------------------------------------------------------------- writes

    def datapoint(self, chunk: Chunk, vector: np.ndarray) -> dict[str, Any]:
        """The REST ``IndexDatapoint`` of a chunk: its id, dense vector, sparse BM25 embedding, and the
        restricts its filters query (document, kind, source prefixes, metadata; the published time
        as a numeric restrict)."""
        restricts = [{"namespace": DOCUMENT_NAMESPACE, "allowList": [chunk.document_id]}]
        if chunk.source:
            restricts.append({"namespace": KIND_NAMESPACE, "allowList": [chunk.source]})
        tokens = sorted(set(source_tokens(chunk.origin)) | set(source_tokens(chunk.url)))
        if tokens:
            restricts.append({"namespace": SOURCE_NAMESPACE, "allowList": tokens})
        for key, value in sorted(chunk.metadata.items()):
            values = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
            restricts.append({"namespace": METADATA_NAMESPACE + key, "allowList": values})
        point: dict[str, Any] = {
            "datapointId": chunk.chunk_id,
            "featureVector": [float(x) for x in vector],
            "restricts": restricts,
        }
        dims, values = sparse_terms.document_sparse(chunk.title, chunk.text)
        if dims:
            point["sparseEmbedding"] = {"values": values, "dimensions": dims}
        published = published_at(chunk.published)
        if published is not None:
            point["numericRestricts"] = [{"namespace": PUBLISHED_NAMESPACE, "valueInt": int(published.timestamp())}]
        return point

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
                self.service.upsert_datapoints(datapoints[start : start + self.datapoints_per_request])

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
                self.service.remove_datapoints(chunk_ids[start : start + self.datapoints_per_request])
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
        terms = sparse_terms.query_terms(text) if mode != "dense" else []
        frequencies = self._counted(terms) if terms else {}
        total = self._counted([""])[""] if terms else 0
        dims, weights = sparse_terms.query_sparse(terms, frequencies, total)
        if mode == "bm25" and not dims:
            return []  # no query term is in the corpus: nothing can match
        datapoint: dict[str, Any] = {"datapointId": "query"}
        if mode != "bm25":
            datapoint["featureVector"] = [float(x) for x in query]
        if dims:
            datapoint["sparseEmbedding"] = {"values": weights, "dimensions": dims}
        if filters is not None and not filters.is_empty:
            datapoint.update(self.restricts(filters))
        request: dict[str, Any] = {"datapoint": datapoint, "neighborCount": pool}
        if dims and mode != "bm25":
            # a hybrid query: Vector Search fuses the dense and the sparse ranking by reciprocal rank
            request["rrf"] = {"alpha": RRF_ALPHA}
        with self._calling("query"):
            results = self.service.find_neighbors(self.deployed_index_id, [request])
        neighbours = results[0] if results else []
        ids = list(dict.fromkeys(n["datapoint"]["datapointId"] for n in neighbours))
        # One batched read of every neighbour's record (Firestore get_all), not one per neighbour.
        records = self.state.get_many(CHUNKS, ids)
        filtered = filters is not None and not filters.is_empty
        candidates: list[tuple[Chunk, float]] = []
        for chunk_id in ids:
            record = records.get(chunk_id)
            if record is None:
                continue  # removed since (or never fully written): not searchable
            if filtered and not filters.matches(record):
                continue
            candidates.append((Chunk.from_fields(record), float(decode_vector(record["vector"]) @ query)))
        lexical = [sparse_terms.bm25_score(dims, weights, c.title, c.text) for c, _ in candidates]
        return rank_candidates(text, candidates, k, mode, dense_weight=self.dense_weight, lexical=lexical)

    def document_frequency(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks hold each term (corpus-wide: counted on the chunk records' ``terms``; a
        count is reused for :data:`STATISTICS_TTL_S`, as searches reuse it)."""
        counted = self._counted([t for t in dict.fromkeys(terms) if t])
        return {term: counted.get(term, 0) for term in dict.fromkeys(terms)}

    def _count_term(self, term: str) -> int:
        return self.state.count(CHUNKS, {f"{sparse_terms.TERMS_FIELD}.{sparse_terms.term_key(term)}": 1})

    def _counted(self, terms: Sequence[str]) -> dict[str, int]:
        """Document frequencies (``""``: the corpus size) for search, counted at most every
        :data:`STATISTICS_TTL_S` per term (a term found in no chunk, every time)."""
        now = time.monotonic()
        with self._statistics_lock:
            known = {t: c for t in terms if (hit := self._statistics.get(t)) and now - hit[0] < STATISTICS_TTL_S
                     for c in (hit[1],)}
        missing = [t for t in dict.fromkeys(terms) if t not in known]
        counted = {t: self.count_chunks() if t == "" else self._count_term(t) for t in missing}
        with self._statistics_lock:
            if len(self._statistics) + len(counted) > STATISTICS_MAX_TERMS:
                self._statistics.clear()
            # a term no chunk holds yet is counted again next time: a new document's new identifier
            # must be searchable by keyword as soon as it is indexed
            self._statistics.update({t: (now, c) for t, c in counted.items() if c > 0})
        return {**known, **counted}

    @staticmethod
    def restricts(filters: Filters) -> dict[str, Any]:
        """The query datapoint's ``restricts`` and ``numericRestricts`` for ``filters``."""
        tokens: list[dict[str, Any]] = []
        if filters.kind is not None:
            tokens.append({"namespace": KIND_NAMESPACE, "allowList": [filters.kind]})
        if filters.source is not None:
            tokens.append({"namespace": SOURCE_NAMESPACE, "allowList": [source_token(filters.source)]})
        for key, value in filters.where:
            if key == "document_id":
                tokens.append({"namespace": DOCUMENT_NAMESPACE, "allowList": [value]})
            elif key not in WHERE_FIELDS:
                tokens.append({"namespace": METADATA_NAMESPACE + key, "allowList": [value]})
        numeric: list[dict[str, Any]] = []
        if filters.since is not None:
            numeric.append({"namespace": PUBLISHED_NAMESPACE, "valueInt": int(filters.since.timestamp()),
                            "op": "GREATER_EQUAL"})
        if filters.until is not None:
            numeric.append({"namespace": PUBLISHED_NAMESPACE, "valueInt": int(filters.until.timestamp()), "op": "LESS"})
        out: dict[str, Any] = {}
        if tokens:
            out["restricts"] = tokens
        if numeric:
            out["numericRestricts"] = numeric
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
    # terms: each distinct BM25 term's key, so the corpus's document frequencies can be counted
    return {**chunk.fields(), "vector": encode_vector(vector),
            sparse_terms.TERMS_FIELD: sparse_terms.record_terms(chunk.title, chunk.text)}
