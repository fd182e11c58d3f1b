"""The indexer with fakes: index, re-index idempotently, replace, refuse empty, delete."""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

import numpy as np
import pytest

from services.indexer.handler import handle
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput
from shared.contract.ids import chunk_id
from shared.contract.messages import DocumentCleaned, DocumentDeleted, DocumentIndexed
from shared.contract.ports import Chunk
from shared.contract.redaction import redact
from shared.contract.text import with_header
from tests.fakes import FakeClock, InMemoryBlobStore, InMemoryStateStore, RecordingPublisher
from tests.support import topic_paragraphs


class CountingEmbedder:
    """Deterministic hash vectors; word tokens; counts what it embeds."""

    model_name = "fake"
    dimension = 8
    max_tokens = 40

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"\S+", text)]

    def embed(self, texts):
        self.embedded.extend(texts)
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
            v = np.random.default_rng(seed).normal(size=self.dimension)
            rows.append(v / np.linalg.norm(v))
        return np.array(rows, dtype=np.float32).reshape(len(texts), self.dimension)


class DictIndex:
    """The Index port over a dict, replacing a document's chunks in one assignment."""

    def __init__(self) -> None:
        self.docs: dict[str, list[tuple[Chunk, np.ndarray]]] = {}

    def upsert(self, document_id, chunks, vectors):
        assert vectors.shape == (len(chunks), 8)
        self.docs[document_id] = list(zip(chunks, vectors, strict=True))

    def delete_document(self, document_id):
        return len(self.docs.pop(document_id, []))

    def get_chunks(self, chunk_ids):
        by_id = {c.chunk_id: c for pairs in self.docs.values() for c, _ in pairs}
        return [by_id[i] for i in chunk_ids if i in by_id]

    def count_chunks(self):
        return sum(len(p) for p in self.docs.values())

    def count_documents(self):
        return len(self.docs)

    def search(self, text, vector, k, mode="hybrid"):  # pragma: no cover - not used by the indexer
        raise AssertionError


class World:
    def __init__(self) -> None:
        self.blobs = InMemoryBlobStore()
        self.state = InMemoryStateStore()
        self.publisher = RecordingPublisher()
        self.clock = FakeClock(datetime(2026, 11, 2, 9, 0, tzinfo=UTC))
        self.embedder = CountingEmbedder()
        self.index = DictIndex()
        self.deps = Deps(Settings(), blobs=self.blobs, state=self.state, publisher=self.publisher,
                         clock=self.clock, embedder=self.embedder, index=self.index)

    def cleaned(self, document_id: str, body: str, title: str = "All about volcano") -> DocumentCleaned:
        text = with_header(title, "2026-10-01", f"https://x.example/{document_id}", body)
        digest = hashlib.sha256(text.encode()).hexdigest()
        ref = self.blobs.put(f"clean/{document_id}/{digest}.txt", text.encode())
        return DocumentCleaned(
            document_id=document_id, source="feed", origin="https://x.example/feed.xml",
            url=f"https://x.example/{document_id}", title=title, published="2026-10-01", clean_ref=ref,
            content_hash=digest, characters=len(text),
        )


def _body(topic: str, n: int = 6) -> str:
    return "\n\n".join(topic_paragraphs(topic, n=n))


def test_indexing_a_document_records_it_and_announces_it():
    world = World()
    message = world.cleaned("doc-a", _body("volcano"))
    handle(message, world.deps)

    (event,) = world.publisher.of_type(DocumentIndexed)
    stored = world.index.docs["doc-a"]
    assert event.chunk_ids == [c.chunk_id for c, _ in stored]
    assert event.chunk_ids == [chunk_id("doc-a", message.content_hash, n) for n in range(len(stored))]
    assert len(stored) >= 2
    assert all(len(c.text.split()) <= 40 for c, _ in stored)
    record = world.state.get(state_collections.DOCUMENTS, "doc-a")
    assert record == {
        "document_id": "doc-a", "title": "All about volcano", "url": "https://x.example/doc-a",
        "source": "feed", "origin": "https://x.example/feed.xml", "published": "2026-10-01",
        "content_hash": message.content_hash, "chunk_ids": event.chunk_ids, "chunk_count": len(stored),
        "indexed_at": "2026-11-02T09:00:00+00:00",
    }
    # every chunk carries where its document came from, which --source filters on
    assert {(c.origin, c.source, c.published) for c, _ in stored} == {("https://x.example/feed.xml", "feed", "2026-10-01")}
    # vectors are those of the chunk texts
    for chunk, vector in stored:
        assert np.allclose(vector, world.embedder.embed([chunk.text])[0])


def test_redelivery_does_not_embed_again_but_announces_again():
    world = World()
    message = world.cleaned("doc-a", _body("volcano"))
    handle(message, world.deps)
    embedded = len(world.embedder.embedded)
    record = world.state.get(state_collections.DOCUMENTS, "doc-a")
    world.clock.advance(3600)

    handle(message, world.deps)
    assert len(world.embedder.embedded) == embedded
    assert world.state.get(state_collections.DOCUMENTS, "doc-a") == record
    first, second = world.publisher.of_type(DocumentIndexed)
    assert first == second


def test_record_without_chunks_in_the_index_is_indexed_again():
    world = World()
    message = world.cleaned("doc-a", _body("volcano"))
    handle(message, world.deps)
    world.index.docs.clear()  # e.g. the index folder was wiped
    handle(message, world.deps)
    assert world.index.count_chunks() == world.state.get(state_collections.DOCUMENTS, "doc-a")["chunk_count"]


def test_changed_content_replaces_the_old_chunks():
    world = World()
    old = world.cleaned("doc-a", _body("glacier"))
    handle(old, world.deps)
    old_ids = {c.chunk_id for c, _ in world.index.docs["doc-a"]}
    new = world.cleaned("doc-a", _body("iceberg", n=3), title="Revised")
    handle(new, world.deps)

    stored = world.index.docs["doc-a"]
    assert old_ids.isdisjoint(c.chunk_id for c, _ in stored)
    assert all("iceberg" in c.text for c, _ in stored)
    record = world.state.get(state_collections.DOCUMENTS, "doc-a")
    assert record["content_hash"] == new.content_hash and record["title"] == "Revised"
    assert world.index.count_documents() == 1


def test_header_only_document_is_refused_and_old_chunks_are_kept():
    world = World()
    handle(world.cleaned("doc-a", _body("volcano")), world.deps)
    before = list(world.index.docs["doc-a"])
    record = world.state.get(state_collections.DOCUMENTS, "doc-a")

    with pytest.raises(InvalidInput, match=r"doc-a \(https://x.example/doc-a\) has no chunk: no text besides"):
        handle(world.cleaned("doc-a", ""), world.deps)
    assert world.index.docs["doc-a"] == before
    assert world.state.get(state_collections.DOCUMENTS, "doc-a") == record


def test_a_tiny_document_is_indexed_as_one_chunk():
    world = World()
    handle(world.cleaned("doc-a", "Too short."), world.deps)
    assert len(world.index.docs["doc-a"]) == 1
    assert world.state.get(state_collections.DOCUMENTS, "doc-a")["chunk_count"] == 1


def test_delete_removes_chunks_and_record_and_is_idempotent():
    world = World()
    handle(world.cleaned("doc-a", _body("volcano")), world.deps)
    handle(world.cleaned("doc-b", _body("saxophone")), world.deps)
    deleted = DocumentDeleted(document_id="doc-a", reason="left its feed",
                              requested_at=datetime(2026, 11, 3, tzinfo=UTC))
    handle(deleted, world.deps)
    handle(deleted, world.deps)
    assert "doc-a" not in world.index.docs and "doc-b" in world.index.docs
    assert world.state.get(state_collections.DOCUMENTS, "doc-a") is None
    assert world.state.get(state_collections.DOCUMENTS, "doc-b") is not None


def test_a_late_delete_of_an_older_generation_keeps_the_newer_document():
    world = World()
    handle(world.cleaned("doc-a", _body("volcano")), world.deps)
    # gcs_ingest announced generation 7 of the object (an overwrite of generation 6)
    world.state.put(state_collections.PROCESSED_ITEMS, "doc-a", {"document_id": "doc-a", "generation": "7"})
    late = DocumentDeleted(document_id="doc-a", reason="object deleted",
                           requested_at=datetime(2026, 11, 3, tzinfo=UTC), generation="6")
    handle(late, world.deps)
    assert "doc-a" in world.index.docs
    assert world.state.get(state_collections.DOCUMENTS, "doc-a") is not None
    # the delete of the current generation (the ledger forgot it when the delete went out)
    world.state.delete(state_collections.PROCESSED_ITEMS, "doc-a")
    handle(DocumentDeleted(document_id="doc-a", reason="object deleted",
                           requested_at=datetime(2026, 11, 4, tzinfo=UTC), generation="7"), world.deps)
    assert "doc-a" not in world.index.docs


def test_a_delete_of_the_current_or_a_newer_generation_removes_the_document():
    world = World()
    handle(world.cleaned("doc-a", _body("volcano")), world.deps)
    world.state.put(state_collections.PROCESSED_ITEMS, "doc-a", {"document_id": "doc-a", "generation": "7"})
    handle(DocumentDeleted(document_id="doc-a", reason="object deleted",
                           requested_at=datetime(2026, 11, 3, tzinfo=UTC), generation="7"), world.deps)
    assert "doc-a" not in world.index.docs


def test_other_messages_are_refused():
    world = World()
    with pytest.raises(InvalidInput, match="DocumentIndexed"):
        handle(DocumentIndexed(document_id="d", content_hash="h", chunk_ids=[]), world.deps)


def test_a_late_message_about_an_older_version_never_replaces_the_current_one():
    world = World()
    old = world.cleaned("doc-a", _body("glacier"))
    new = world.cleaned("doc-a", _body("iceberg", n=3), title="Revised")
    # the ledger says the source has moved on to the new version (the poller claimed it)
    world.state.put(state_collections.PROCESSED_ITEMS, "doc-a", {"document_id": "doc-a", "item_hash": new.content_hash})
    handle(new, world.deps)
    handle(old, world.deps)  # late or redelivered message about the old version
    assert all("iceberg" in c.text for c, _ in world.index.docs["doc-a"])
    assert world.state.get(state_collections.DOCUMENTS, "doc-a")["content_hash"] == new.content_hash
    assert [e.content_hash for e in world.publisher.of_type(DocumentIndexed)] == [new.content_hash]


def test_a_document_over_the_cap_is_refused_in_one_unit_before_its_text_is_read():
    # the refusal read "19000099 characters, over the cap of 2000 chunks": a size and a cap in two units; and the
    # whole clean text was read from the blob store before the length the cleaner had counted was looked at
    world = World()
    world.deps = Deps(Settings(max_chunks_per_document=2), blobs=world.blobs, state=world.state,
                      publisher=world.publisher, clock=world.clock, embedder=world.embedder, index=world.index)
    cap = 2 * CountingEmbedder.max_tokens * 12  # 960 characters
    long = world.cleaned("doc-long", "word " * 400)
    world.blobs.delete(long.clean_ref)  # read, it would be "not in the blob store"
    with pytest.raises(InvalidInput) as refused:
        handle(long, world.deps)
    said = str(refused.value)
    assert f"is too long: {long.characters} characters, over the cap of {cap} characters (2 chunks per document" in said
    assert "RAGBUS_MAX_CHUNKS_PER_DOCUMENT" in said and "not in the blob store" not in said
    assert redact(said) == said  # logged and shown whole ("a token rarely ..." was logged as "a token [redacted]")
    # under the character cap but over the chunk cap: counted in chunks against the chunk cap
    several = world.cleaned("doc-b", "Lava cools fast. " * 35)  # 595 characters, 105 tokens: 3 chunks of 40
    assert several.characters <= cap
    with pytest.raises(InvalidInput, match=r"is too long: \d+ chunks, over the cap of 2 chunks per document "
                                           r"\(RAGBUS_MAX_CHUNKS_PER_DOCUMENT\)"):
        handle(several, world.deps)
    assert world.index.count_chunks() == 0


def test_the_character_cap_is_checked_once_per_document(monkeypatch):
    # cf8260e checked the cleaner's count against the character cap, then the text it read (of that very length)
    # against it again before chunking
    from services.indexer import handler

    checked = []
    cap = handler.character_cap
    monkeypatch.setattr(handler, "character_cap", lambda *a: checked.append(a) or cap(*a))
    world = World()
    handle(world.cleaned("doc-a", "\n\n".join(topic_paragraphs("volcano"))), world.deps)
    assert world.index.count_chunks() >= 1 and len(checked) == 1
