"""The Index port on Firestore vector search (``find_nearest``).

Every chunk is one document of the collection ``chunks`` (namespaced like the
state store: ``<ns>_chunks``) holding its text, metadata, ``document_id`` and
its embedding as a Firestore :class:`~google.cloud.firestore_v1.vector.Vector`.
One record per document in ``index_documents`` lists the document's chunk ids
(``documents`` is taken by the indexer's own state).

Deploying it needs a vector index on the embedding field, for example::

    gcloud firestore indexes composite create --collection-group=chunks \\
        --query-scope=COLLECTION \\
        --field-config=field-path=embedding,vector-config='{"dimension":"768","flat":"{}"}'

(the emulator needs none); filtered searches need the composite indexes of infra/firestore.tf
(``chunks_embedding_filtered``: one per shape :func:`prefilter_index` gives, each combination of
kind, one array condition (source prefix or a metadata key) and published range, with the vector field).
Firestore caps vectors at 2048 dimensions and one
``find_nearest`` at 1000 results.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal

import numpy as np
from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter
from google.cloud.firestore_v1.base_vector_query import DistanceMeasure
from google.cloud.firestore_v1.vector import Vector

from shared.adapters.gcp.calls import FIRESTORE_TRANSIENT, calling
from shared.adapters.gcp.candidate_rescoring import candidate_pool, rank_candidates
from shared.adapters.gcp.firestore_state import FirestoreStateStore, encode_key
from shared.contract.errors import ConfigError, PermanentError
from shared.contract.filters import (
    Filters,
    firestore_prefilter_refusal,
    published_at,
    source_token,
    source_tokens,
)
from shared.contract.ports import Chunk, ScoredChunk, SearchMode, checked_query, checked_vectors

log = logging.getLogger("ragbus.index.firestore")

CHUNKS = "chunks"
DOCUMENTS = "index_documents"
EMBEDDING_FIELD = "embedding"
_DISTANCE_FIELD = "_ragbus_distance"
#: What a chunk's document holds of it, read back by searches and get_chunks: every field of
#: :class:`Chunk` (a hand-kept list here once left out ``position``, so cloud citations lost their pages).
_CHUNK_FIELDS = tuple(f.name for f in dataclasses.fields(Chunk))
#: Fields written beside each chunk for pre-filtering: the source-prefix tokens
#: (shared.contract.filters.source_tokens) and the published time in epoch seconds.
SOURCE_TOKENS_FIELD = "source_tokens"
PUBLISHED_FIELD = "published_ts"
#: And each metadata key=value a source set (a feed item's author, each of its categories): one
#: array serves every key with one composite index, where a field per key would need an index per key.
META_TOKENS_FIELD = "meta_tokens"


def meta_tokens(metadata: Mapping[str, Any]) -> list[str]:
    """``key=value`` for each value of each metadata key (a key holds no ``=``: Filters refuses one)."""
    return sorted({f"{key}={v}" for key, value in metadata.items()
                   for v in (value if isinstance(value, (list, tuple)) else [value])})

def prefilter_clauses(filters: Filters) -> list[tuple[str, str, Any]]:
    """The ``where`` clauses (field, operator, value) a search with ``filters`` sends before
    ``find_nearest``, in the order of the composite index that serves them (:func:`prefilter_index`).

    Raises :class:`ConfigError` naming the combination for one no index can serve.

    Checked against Firestore's documented query rules (tests/unit/test_infra.py): where runs before
    findNearest ("applies after all other filters and ordering", StructuredQuery in the v1 REST
    reference), so a range on the published time pre-filters; a range needs its field first in
    order_by (FieldFilter.Operator), so ranges are on one field only; one array-contains per query,
    a composite index holding at most one array field.
    """
    refusal = firestore_prefilter_refusal(filters)
    if refusal is not None:
        raise ConfigError(refusal)
    # The array-contains clause, then the equality, then the range: a composite index lists the
    # range field after the others, and the vector field last
    # (cloud.google.com/firestore/docs/vector-search, "Pre-filter with a where clause").
    clauses: list[tuple[str, str, Any]] = [
        (META_TOKENS_FIELD, "array_contains", f"{key}={value}") for key, value in filters.where
    ]
    if filters.source is not None:
        clauses.append((SOURCE_TOKENS_FIELD, "array_contains", source_token(filters.source)))
    if filters.kind is not None:
        clauses.append(("source", "==", filters.kind))
    if filters.since is not None:
        clauses.append((PUBLISHED_FIELD, ">=", int(filters.since.timestamp())))
    if filters.until is not None:
        clauses.append((PUBLISHED_FIELD, "<", int(filters.until.timestamp())))
    return clauses


def prefilter_index(filters: Filters) -> tuple[tuple[str, str], ...]:
    """The filtered fields of the composite vector index a search with ``filters`` needs, in order:
    ``(field, "CONTAINS")`` for an array-contains clause, ``(field, "ASCENDING")`` for the others;
    the index then ends with ``__name__`` and the vector field. infra/firestore.tf declares one
    index per shape (``local.chunk_prefilter_indexes``); tests/unit/test_infra.py checks that every
    combination :class:`Filters` accepts and this adapter sends has its shape declared."""
    shape: list[tuple[str, str]] = []
    for field_path, op, _ in prefilter_clauses(filters):
        entry = (field_path, "CONTAINS" if op == "array_contains" else "ASCENDING")
        if entry not in shape:  # since and until are one range on one field
            shape.append(entry)
    return tuple(shape)


#: Firestore's own limits.
MAX_DIMENSION = 2048
MAX_NEIGHBORS = 1000
#: One commit (transaction or batch) carries at most this many writes and about this many bytes.
MAX_COMMIT_WRITES = 500
MAX_COMMIT_BYTES = 9 * 1024 * 1024  # Firestore's request limit is 10 MiB; keep a margin


class FirestoreIndex:
    """:class:`~shared.contract.ports.Index` on Firestore: chunks as documents, dense search by ``find_nearest``.

    Atomicity. ``upsert`` and ``delete_document`` run in one Firestore
    transaction when the whole change fits one commit (at most
    ``max_commit_writes`` writes — new chunks, stale chunks deleted and the
    document record — and about ``max_commit_bytes``; with 768-dimensional
    vectors and 768-word chunks that is a document of some 400 chunks). Then
    a reader sees the old chunks or the new ones, never a mix, and two upserts
    of one document serialise (the transaction reads the record and the
    document's chunks, so the later commit retries). A larger document is
    written in several batches instead: new chunks first, then the record and
    the deletion of stale chunks; in between a search can see both versions
    (never neither), and a crash leaves extra chunks until the document is
    upserted or deleted again, which finds them by ``document_id``.

    Keyword search. Firestore has no BM25: ``hybrid`` and ``bm25`` re-score a
    pool of dense candidates (``max(50, 5k)`` and ``max(100, 10k)``) with BM25
    computed over that pool (:mod:`shared.adapters.gcp.candidate_rescoring`).
    A chunk that matches the query's words but not its meaning, and is not in
    the pool, is not found — unlike the local index, whose BM25 runs over
    every chunk.

    Scores. ``dense_score`` is the cosine of the query with the chunk's vector
    (vectors are expected unit length, as every :class:`~shared.contract.ports.Embedder`
    makes them): with ``DOT_PRODUCT`` the dot product Firestore reports, with
    ``COSINE`` one minus its cosine distance.
    """

    def __init__(
        self,
        client: firestore.Client | None = None,
        *,
        dimension: int,
        project: str | None = None,
        database: str | None = None,
        namespace: str = "",
        distance_measure: Literal["DOT_PRODUCT", "COSINE"] = "DOT_PRODUCT",
        dense_weight: float = 0.7,
        max_commit_writes: int = MAX_COMMIT_WRITES,
        max_commit_bytes: int = MAX_COMMIT_BYTES,
        max_attempts: int = 10,
    ) -> None:
        if not 0 < dimension <= MAX_DIMENSION:
            raise ConfigError(
                f"Firestore vectors have 1 to {MAX_DIMENSION} dimensions, not {dimension}; "
                "ask the embedder for fewer (output_dimensionality) or use Vertex AI Vector Search"
            )
        if distance_measure not in ("DOT_PRODUCT", "COSINE"):
            raise ConfigError(
                f"distance_measure={distance_measure!r}: use 'DOT_PRODUCT' or 'COSINE'"
            )
        if not 0.0 <= dense_weight <= 1.0:
            raise ConfigError(f"dense_weight={dense_weight} must be between 0 and 1")
        if max_commit_writes < 2:
            raise ConfigError(f"max_commit_writes={max_commit_writes} must be at least 2")
        # The state store owns client creation (emulator credentials, lazy build) and the
        # namespace rule; the index shares them rather than repeating them.
        self._store = FirestoreStateStore(
            client, project=project, database=database, namespace=namespace
        )
        self.dimension = dimension
        self.distance_measure = distance_measure
        self.dense_weight = dense_weight
        self.max_commit_writes = max_commit_writes
        self.max_commit_bytes = max_commit_bytes
        self.max_attempts = max_attempts

    # -------------------------------------------------------------- paths

    @property
    def client(self) -> firestore.Client:
        return self._store.client

    @property
    def namespace(self) -> str:
        return self._store.namespace

    def _chunks(self) -> Any:
        return self.client.collection(self._store.collection_id(CHUNKS))

    def _records(self) -> Any:
        return self.client.collection(self._store.collection_id(DOCUMENTS))

    def _chunk_ref(self, chunk_id: str) -> Any:
        return self._chunks().document(encode_key(chunk_id))

    def _record_ref(self, document_id: str) -> Any:
        return self._records().document(encode_key(document_id))

    def _chunks_of(self, document_id: str) -> Any:
        # Names only: the stale chunks of a document are found, not read.
        return self._chunks().where(filter=FieldFilter("document_id", "==", document_id)).select([])

    def _calling(self, what: str) -> AbstractContextManager[None]:
        return calling("Firestore", what, transient=FIRESTORE_TRANSIENT, transaction_attempts=self.max_attempts)

    def _transaction(self) -> firestore.Transaction:
        return self.client.transaction(max_attempts=self.max_attempts)

    # ------------------------------------------------------------- writes

    def upsert(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Replace every chunk of ``document_id`` with ``chunks`` (atomically when it fits one commit)."""
        vectors = self._checked(document_id, chunks, vectors)
        new = {encode_key(c.chunk_id): (c, v) for c, v in zip(chunks, vectors, strict=True)}
        if len(new) != len(chunks):
            raise ValueError(f"upsert of {document_id}: chunk ids are not unique")
        record = {
            "document_id": document_id,
            "chunk_ids": [c.chunk_id for c in chunks],
            "chunk_count": len(chunks),
        }
        payload = sum(self._approximate_bytes(c) for c in chunks)
        # +1 for the record; stale chunks are unknown until read, so leave room for a few.
        fits = len(chunks) + 1 < self.max_commit_writes and payload <= self.max_commit_bytes
        with self._calling(f"upsert of {document_id}"):
            if fits and self._replace_in_transaction(document_id, new, record):
                return
            self._replace_in_batches(document_id, new, record)

    def _replace_in_transaction(
        self, document_id: str, new: dict[str, tuple[Chunk, np.ndarray]], record: dict[str, Any]
    ) -> bool:
        """One commit; False (nothing written) when the stale chunks make it too big."""
        record_ref = self._record_ref(document_id)

        @firestore.transactional
        def replace(transaction: firestore.Transaction) -> bool:
            record_ref.get(transaction=transaction)  # read: serialises writers of this document
            present = self._present_ids(document_id, transaction)
            stale = present - set(new)
            if len(new) + len(stale) + 1 > self.max_commit_writes:
                return False
            for doc_id, (chunk, vector) in new.items():
                transaction.set(self._chunks().document(doc_id), self._stored(chunk, vector))
            for doc_id in stale:
                transaction.delete(self._chunks().document(doc_id))
            if new:
                transaction.set(record_ref, record)
            else:
                transaction.delete(record_ref)
            return True

        return bool(replace(self._transaction()))

    def _replace_in_batches(
        self, document_id: str, new: dict[str, tuple[Chunk, np.ndarray]], record: dict[str, Any]
    ) -> None:
        log.warning(
            "document %s (%d chunks) does not fit one Firestore commit; replacing it in batches, "
            "so searches may briefly see old and new chunks together",
            document_id,
            len(new),
        )
        writes = [
            (
                self._chunks().document(doc_id),
                self._stored(chunk, vector),
                self._approximate_bytes(chunk),
            )
            for doc_id, (chunk, vector) in new.items()
        ]
        self._commit_sets(writes)
        present = self._present_ids(document_id, None)
        stale = sorted(present - set(new))
        # The record moves before the stale chunks go: counts and the indexer's view follow
        # the new version as soon as all of it is searchable.
        if new:
            self._record_ref(document_id).set(record)
        else:
            self._record_ref(document_id).delete()
        self._commit_deletes([self._chunks().document(doc_id) for doc_id in stale])

    def delete_document(self, document_id: str) -> int:
        """Remove the document's chunks and record; 0 when it had none (deleting twice is fine)."""
        record_ref = self._record_ref(document_id)

        @firestore.transactional
        def remove(transaction: firestore.Transaction) -> int | None:
            record_ref.get(transaction=transaction)
            present = self._present_ids(document_id, transaction)
            if len(present) + 1 > self.max_commit_writes:
                return None
            for doc_id in present:
                transaction.delete(self._chunks().document(doc_id))
            transaction.delete(record_ref)
            return len(present)

        with self._calling(f"delete of {document_id}"):
            removed = remove(self._transaction())
            if removed is not None:
                return removed
            present = self._present_ids(document_id, None)
            record_ref.delete()
            self._commit_deletes([self._chunks().document(doc_id) for doc_id in sorted(present)])
            return len(present)

    def _present_ids(self, document_id: str, transaction: firestore.Transaction | None) -> set[str]:
        # By document_id rather than from the record: chunks left by an interrupted batched
        # upsert are found too.
        return {snap.id for snap in self._chunks_of(document_id).stream(transaction=transaction)}

    def _commit_sets(self, writes: list[tuple[Any, dict[str, Any], int]]) -> None:
        batch, count, size = self.client.batch(), 0, 0
        for ref, data, nbytes in writes:
            if count and (
                count + 1 > self.max_commit_writes or size + nbytes > self.max_commit_bytes
            ):
                batch.commit()
                batch, count, size = self.client.batch(), 0, 0
            batch.set(ref, data)
            count, size = count + 1, size + nbytes
        if count:
            batch.commit()

    def _commit_deletes(self, refs: list[Any]) -> None:
        for start in range(0, len(refs), self.max_commit_writes):
            batch = self.client.batch()
            for ref in refs[start : start + self.max_commit_writes]:
                batch.delete(ref)
            batch.commit()

    def _checked(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> np.ndarray:
        return checked_vectors(document_id, chunks, vectors, self.dimension)

    @staticmethod
    def _stored(chunk: Chunk, vector: np.ndarray) -> dict[str, Any]:
        published = published_at(chunk.published)
        return {
            **chunk.fields(),
            SOURCE_TOKENS_FIELD: sorted(set(source_tokens(chunk.origin)) | set(source_tokens(chunk.url))),
            PUBLISHED_FIELD: int(published.timestamp()) if published is not None else None,
            META_TOKENS_FIELD: meta_tokens(chunk.metadata),
            EMBEDDING_FIELD: Vector([float(x) for x in vector]),
        }

    @staticmethod
    def _prefiltered(query: Any, filters: Filters) -> Any:
        """``query`` with the ``where`` clauses of ``filters`` (see :meth:`search`)."""
        for field_path, op, value in prefilter_clauses(filters):
            query = query.where(filter=FieldFilter(field_path, op, value))
        return query

    def _approximate_bytes(self, chunk: Chunk) -> int:
        # Firestore's storage-size rules: strings as UTF-8 plus one, doubles 8 bytes, plus names.
        text = (
            chunk.text + chunk.title + chunk.url + chunk.source + chunk.chunk_id + chunk.document_id
        )
        return len(text.encode("utf-8")) + 8 * self.dimension + 256

    # -------------------------------------------------------------- reads

    def search(
        self, text: str, vector: np.ndarray, k: int, mode: SearchMode = "hybrid",
        filters: Filters | None = None,
    ) -> list[ScoredChunk]:
        """The ``k`` best chunks for the query; ``mode`` is hybrid, dense or bm25 (see the class).

        Filters are a pre-filter: ``where`` clauses before ``find_nearest`` (kind, source prefix
        token, published range), each combination served by a composite index with the vector
        field (declared in infra/firestore.tf; cloud.google.com/firestore/docs/vector-search), and
        each result is checked again. A ``where`` on a metadata key is a ``key=value`` token of one
        array field (one index for every key); one on a chunk field, or two array conditions
        (source and a where key, two where keys: Firestore takes one array-contains per query), is
        refused, since filtering the top k afterwards would silently return too few chunks.
        """
        base = self._chunks()
        if filters is not None and not filters.is_empty:
            base = self._prefiltered(base, filters)
        query = checked_query(vector, k, mode, self.dimension)
        if query is None:
            return []
        pool = candidate_pool(k, mode, cap=MAX_NEIGHBORS)
        measure = (
            DistanceMeasure.DOT_PRODUCT
            if self.distance_measure == "DOT_PRODUCT"
            else DistanceMeasure.COSINE
        )
        nearest = (
            base
            .select([*_CHUNK_FIELDS, _DISTANCE_FIELD])
            .find_nearest(
                vector_field=EMBEDDING_FIELD,
                query_vector=Vector([float(x) for x in query]),
                distance_measure=measure,
                limit=pool,
                distance_result_field=_DISTANCE_FIELD,
            )
        )
        with self._calling("vector search"):
            try:
                snapshots = list(nearest.stream())
            except gexc.FailedPrecondition as exc:
                raise ConfigError(
                    f"Firestore refused the vector search on {self._chunks().id}.{EMBEDDING_FIELD}: {exc}; "
                    "create the vector index (see shared/adapters/gcp/firestore_index.py)"
                ) from exc
        candidates: list[tuple[Chunk, float]] = []
        for snap in snapshots:
            data = snap.to_dict() or {}
            if data.get(_DISTANCE_FIELD) is None:
                raise PermanentError(
                    f"Firestore returned chunk {snap.id} without the distance field {_DISTANCE_FIELD!r}; "
                    "the projection must include it"
                )
            distance = float(data[_DISTANCE_FIELD])
            cosine = distance if self.distance_measure == "DOT_PRODUCT" else 1.0 - distance
            if filters is not None and not filters.is_empty and not filters.matches(data):
                continue
            candidates.append((Chunk.from_fields(data), cosine))
        return rank_candidates(text, candidates, k, mode, dense_weight=self.dense_weight)

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are skipped."""
        ids = list(dict.fromkeys(chunk_ids))
        found: dict[str, Chunk] = {}
        with self._calling("get of chunks"):
            for start in range(0, len(ids), 300):
                refs = [self._chunk_ref(i) for i in ids[start : start + 300]]
                for snap in self.client.get_all(refs, field_paths=list(_CHUNK_FIELDS)):
                    if snap.exists:
                        chunk = Chunk.from_fields(snap.to_dict() or {})
                        found[chunk.chunk_id] = chunk
        return [found[i] for i in chunk_ids if i in found]

    def document_chunk_ids(self, document_id: str) -> list[str]:
        """The chunk ids the document's record lists, in order (empty when not indexed)."""
        with self._calling(f"get of {document_id}"):
            snap = self._record_ref(document_id).get()
        return list((snap.to_dict() or {}).get("chunk_ids", [])) if snap.exists else []

    def count_chunks(self) -> int:
        with self._calling("count of chunks"):
            return int(self._chunks().count(alias="n").get()[0][0].value)

    def count_documents(self) -> int:
        with self._calling("count of documents"):
            return int(self._records().count(alias="n").get()[0][0].value)

    def close(self) -> None:
        self._store.close()
