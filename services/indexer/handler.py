"""Indexer: clean text in, searchable chunks out.

``DocumentCleaned`` -> chunk (windows the embedder reads whole), embed in
batches, replace the document's chunks in the index in one step, record the
document in ``documents`` and publish ``DocumentIndexed``.
``DocumentDeleted`` -> drop the document's chunks and its record.

Idempotent: when the ``documents`` record already has this content hash and
the index still holds its chunks, nothing is embedded again and
``DocumentIndexed`` is simply announced again. A document whose every chunk is
header-only is a permanent error naming it; its earlier chunks stay.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import numpy as np

from services.indexer.chunking import chunk_document
from shared.contract import state_collections
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, PermanentError
from shared.contract.messages import DocumentCleaned, DocumentDeleted, DocumentIndexed, Message
from shared.contract.ports import Chunk, Embedder, Index, StateStore
from shared.formats.passages import Marks
from shared.ingest import processed_items
from shared.observability import metrics
from shared.observability.tracing import annotate

log = logging.getLogger("ragbus.indexer")

EMBED_BATCH = 128  # chunks per embed call: bounds memory for very long documents


def _already_indexed(record: dict | None, message: DocumentCleaned, index: Index) -> bool:
    if not record or record.get("content_hash") != message.content_hash:
        return False
    if message.revision is not None and record.get("revision") != message.revision:
        return False  # indexed at another revision, which a delete may be about to take out
    chunk_ids = record.get("chunk_ids") or []
    if not chunk_ids:
        return False
    present = index.get_chunks(chunk_ids)
    return len(present) == len(chunk_ids)


def embed_chunks(embedder: Embedder, chunks: Sequence[Chunk], batch: int = EMBED_BATCH) -> np.ndarray:
    """Vectors of the chunks' texts, shape ``(len(chunks), embedder.dimension)``."""
    parts = [embedder.embed([c.text for c in chunks[i : i + batch]]) for i in range(0, len(chunks), batch)]
    vectors = np.vstack(parts) if parts else np.zeros((0, embedder.dimension), dtype=np.float32)
    if vectors.shape != (len(chunks), embedder.dimension):
        raise PermanentError(
            f"embedder {embedder.model_name} returned vectors of shape {vectors.shape} for "
            f"{len(chunks)} chunks; expected ({len(chunks)}, {embedder.dimension})"
        )
    return vectors.astype(np.float32, copy=False)


#: A token of the embedder is rarely more than this many characters: the character cap a document's text must
#: be under before it is chunked (``RAGBUS_MAX_CHUNKS_PER_DOCUMENT`` chunks of ``max_tokens`` tokens each).
CHARS_PER_TOKEN_BOUND = 12


def character_cap(max_chunks: int, embedder: Embedder) -> int:
    """The most characters ``max_chunks`` chunks can hold: a longer text is certainly over the chunk cap."""
    return max_chunks * embedder.max_tokens * CHARS_PER_TOKEN_BOUND


def _too_long(message: DocumentCleaned, size: int, cap: int, unit: str, why: str) -> InvalidInput:
    """The refusal, its size and its cap in one unit (before, "19000099 characters, over the cap of 2000 chunks")."""
    return InvalidInput(
        f"document {message.document_id} ({message.url}) is too long: {size} {unit}, over the cap of {cap} {unit}"
        f" {why}; split it or raise the cap; its earlier chunks (if any) are kept"
    )


def _too_many_characters(message: DocumentCleaned, characters: int, max_chunks: int, embedder: Embedder) -> InvalidInput:
    return _too_long(message, characters, character_cap(max_chunks, embedder), "characters",
                     f"({max_chunks} chunks per document, RAGBUS_MAX_CHUNKS_PER_DOCUMENT, each of at most "
                     f"{embedder.max_tokens} tokens, allowing {CHARS_PER_TOKEN_BOUND} characters for each)")


def _chunks_within_cap(message: DocumentCleaned, text: str, embedder: Embedder, max_chunks: int,
                      marks: Marks = ()) -> list[Chunk]:
    """The document's chunks; refused (permanently) when there are none or more than ``max_chunks``. (The
    character cap, certain to be over the chunk cap, was checked on the cleaner's count of this very text.)"""
    chunks = chunk_document(
        text,
        marks=marks,
        document_id=message.document_id,
        content_hash=message.content_hash,
        embedder=embedder,
        title=message.title,
        url=message.url,
        published=message.published,
        source=message.source,
        origin=message.origin,
        metadata=message.metadata,
    )
    if not chunks:
        raise InvalidInput(
            f"document {message.document_id} ({message.url}) has no chunk: no text besides its metadata "
            "header; nothing was indexed and its earlier chunks (if any) are kept"
        )
    if len(chunks) > max_chunks:
        raise _too_long(message, len(chunks), max_chunks, "chunks", "per document (RAGBUS_MAX_CHUNKS_PER_DOCUMENT)")
    return chunks


def _stale(message: DocumentCleaned, state: StateStore) -> str | None:
    return processed_items.stale(state, message.document_id, content_hash=message.content_hash,
                                 revision=message.revision)


def index_document(message: DocumentCleaned, ports: Deps) -> DocumentIndexed | None:
    """Chunk, embed and index one cleaned document; announce it.

    A message for a version the ledger has already moved past (a redelivered or
    late message about content the source has since changed) is skipped, so an
    older version can never replace a newer one, whatever the delivery order; so
    is a message of a revision that was deleted since (deletes win: a tombstone in the
    ledger, :mod:`shared.ingest.processed_items`). The ledger is read again once the
    chunks are written: a delete that came in meanwhile finds them, or is found and
    undoes them, whichever of the two ran first.
    """
    state, index, publisher = ports.state, ports.index, ports.publisher
    stale = _stale(message, state)
    if stale:
        log.info("%s: not indexed: %s", message.document_id, stale)
        annotate(skipped=stale)
        return None
    record = state.get(state_collections.DOCUMENTS, message.document_id)
    if _already_indexed(record, message, index):
        log.info("%s: already indexed at %s, announcing again", message.document_id, message.content_hash[:12])
        event = DocumentIndexed(
            document_id=message.document_id, content_hash=message.content_hash, chunk_ids=record["chunk_ids"]
        )
        publisher.publish(event)
        return event

    max_chunks = ports.settings.max_chunks_per_document
    if message.characters > character_cap(max_chunks, ports.embedder):
        # Chunking costs time in proportion to the text: what is certain to be over the cap is refused before, by
        # the cleaner's count of the text (len of the clean text), before its blob is read (19 MB of one line was
        # read whole first); the exact check, in chunks, comes after chunking
        raise _too_many_characters(message, message.characters, max_chunks, ports.embedder)
    try:
        text = ports.blobs.get(message.clean_ref).decode("utf-8")
    except KeyError as exc:
        raise PermanentError(
            f"document {message.document_id} ({message.url}): clean text {message.clean_ref!r} is not in "
            "the blob store; ingest the document again"
        ) from exc

    chunks = _chunks_within_cap(message, text, ports.embedder, max_chunks, _marks(message, ports))
    vectors = embed_chunks(ports.embedder, chunks)
    index.upsert(message.document_id, chunks, vectors)
    annotate(chunk_count=len(chunks), document_id=message.document_id)
    metrics.document_indexed(message.source, len(chunks))

    chunk_ids = [c.chunk_id for c in chunks]
    state.put(
        state_collections.DOCUMENTS,
        message.document_id,
        {
            "document_id": message.document_id,
            "title": message.title,
            "url": message.url,
            "source": message.source,
            "origin": message.origin,
            "published": message.published,
            "content_hash": message.content_hash,
            "chunk_ids": chunk_ids,
            "chunk_count": len(chunk_ids),
            **({"unread": message.unread, "unread_reason": message.unread_reason} if message.unread else {}),
            "indexed_at": ports.clock.now().isoformat(),
            **({"revision": message.revision} if message.revision is not None else {}),
        },
    )
    # A delete whose tombstone was written after the check above may have been handled before
    # these chunks were: read the ledger again and take them out (the delete wins either way).
    gone = processed_items.deleted(state, message.document_id, message.revision)
    if gone:
        _undo(message, ports, gone)
        return None
    log.info("%s: indexed %d chunks (%s)", message.document_id, len(chunks), message.url)
    event = DocumentIndexed(document_id=message.document_id, content_hash=message.content_hash, chunk_ids=chunk_ids)
    publisher.publish(event)
    return event


def _marks(message: DocumentCleaned, ports: Deps) -> Marks:
    """Where each passage of the clean text stands (pages, slides, rows); none for a text without."""
    if not message.positions_ref:
        return []
    try:
        stored = json.loads(ports.blobs.get(message.positions_ref))
    except KeyError as exc:
        raise PermanentError(
            f"document {message.document_id} ({message.url}): positions {message.positions_ref!r} are not in "
            "the blob store; ingest the document again") from exc
    return [(int(offset), dict(position)) for offset, position in stored.get("marks", [])]


def superseded(message: DocumentDeleted, state: StateStore) -> int | None:
    """The newer Cloud Storage generation that makes this delete stale, or None.

    The processed-items ledger holds the generation last announced for the object
    (services/gcs_ingest records it when a generation is finalized, and forgets the
    record when a delete goes out). A delete of an older generation arriving after a
    newer one was announced (late, or redelivered) must not remove the newer document.
    """
    deleted = processed_items.generation_number(message.generation)
    if deleted is None:
        return None
    record = state.get(state_collections.PROCESSED_ITEMS, message.document_id)
    current = processed_items.generation_number((record or {}).get("generation"))
    return current if current is not None and current > deleted else None


def _undo(message: DocumentCleaned, ports: Deps, why: str) -> None:
    """Take out the chunks just written for ``message``, deleted meanwhile (unless a later
    revision replaced them already)."""
    record = ports.state.get(state_collections.DOCUMENTS, message.document_id) or {}
    if record.get("content_hash") == message.content_hash and record.get("revision") == message.revision:
        ports.index.delete_document(message.document_id)
        ports.state.delete(state_collections.DOCUMENTS, message.document_id)
    log.info("%s: indexed, then taken out again: %s", message.document_id, why)
    annotate(skipped=why)


def delete_document(message: DocumentDeleted, ports: Deps) -> int:
    """Drop the document's chunks and record; deleting what is already gone is fine.

    A delete names the revision it deleted: chunks a later revision indexed (a re-ingest after
    the delete, the delete replayed from a dead letter) are not its to remove."""
    newer = superseded(message, ports.state)
    if newer is not None:
        log.info("%s: ignoring the delete of generation %s: generation %d is current",
                 message.document_id, message.generation, newer)
        return 0
    if message.revision is not None:
        indexed = ports.state.get(state_collections.DOCUMENTS, message.document_id)
        at = processed_items.revision_of(indexed)
        if indexed is not None and at > message.revision:
            log.info("%s: ignoring the delete of revision %d: revision %d was indexed since",
                     message.document_id, message.revision, at)
            return 0
    removed = ports.index.delete_document(message.document_id)
    ports.state.delete(state_collections.DOCUMENTS, message.document_id)
    processed_items.let_expire(ports.state, message.document_id, keep_days=ports.settings.tombstone_retention_days)
    log.info("%s: removed %d chunks (%s)", message.document_id, removed, message.reason)
    return removed


def handle(message: Message, deps: Deps) -> None:
    """Entry point for the runtime."""
    if isinstance(message, DocumentCleaned):
        index_document(message, deps)
    elif isinstance(message, DocumentDeleted):
        delete_document(message, deps)
    else:
        raise InvalidInput(
            f"the indexer handles DocumentCleaned and DocumentDeleted, not {type(message).__name__}"
        )
