"""Deletes win in the answer too: a document found by the retriever and deleted before the synthesizer writes the
answer is neither quoted nor cited. Three short documents written for this test, ingested through the real
cleaner and indexer into each runtime's index and ledger (the embedded runtime's SQLite index and state; the
cloud's Firestore, on the emulator), the query's stages driven one by one, and the delete carried out (the
indexer took the chunks out, as when ``ragbus ingest --delete`` returns) between the grader and the synthesizer."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.adapters.local.index import HybridIndex
from shared.adapters.local.llm import LocalLanguageModel
from shared.adapters.local.state import SqliteStateStore
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.ports import Index, StateStore
from shared.ingest.files import delete_path, ingest_path
from tests.fakes import FakeClock, InMemoryBlobStore, RecordingPublisher
from tests.unit.loop_fakes import HashingEmbedder, Loop

DOCUMENTS = {
    "departures.md": "# Kestrel ferry departures\n\nThe Kestrel ferry leaves the north pier of Wexmoor at "
                     "seven in the morning. On Sundays the first Kestrel ferry leaves the north pier at nine.",
    "cargo.md": "# Kestrel ferry cargo\n\nThe Kestrel ferry carries at most forty bicycles and twelve cars. "
                "Bicycles board the Kestrel ferry through the stern door at the north pier.",
    "lanterns.md": "# Lantern evening\n\nThe lantern evening in Wexmoor is held in the market square every "
                   "October, with paper lanterns hung between the chestnut trees.",
}
QUESTION = "When does the Kestrel ferry leave the north pier?"


@pytest.fixture(params=["local", "firestore"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StateStore, Index]]:
    if request.param == "local":
        state, index = SqliteStateStore(tmp_path / "state.db"), HybridIndex(tmp_path / "index", HashingEmbedder.dimension)
        yield state, index
        index.close()
        state.close()
    else:
        from shared.adapters.gcp.firestore_index import FirestoreIndex
        from shared.adapters.gcp.firestore_state import FirestoreStateStore

        client, namespace = request.getfixturevalue("firestore_client"), f"t{uuid.uuid4().hex[:8]}"
        yield (FirestoreStateStore(client, namespace=namespace),
               FirestoreIndex(client, dimension=HashingEmbedder.dimension, namespace=namespace))


def _loop(state: StateStore, index: Index) -> tuple[Loop, Deps]:
    embedder, publisher, clock = HashingEmbedder(), RecordingPublisher(), FakeClock()
    llm = LocalLanguageModel(index=index, embedder=embedder)  # the embedded runtime's reader
    deps = Deps(Settings(), blobs=InMemoryBlobStore(), state=state, publisher=publisher, clock=clock,
                embedder=embedder, index=index, llm=llm)
    return Loop(deps, state, publisher, clock, index, embedder, llm), deps  # type: ignore[arg-type]


def _carry_out(loop: Loop, published_from: int) -> None:
    """Deliver what ingest or delete published, and all that follows, through the cleaner and indexer."""
    for message in loop.publisher.messages[published_from:]:
        loop.pump(message)


@pytest.mark.integration
def test_a_document_deleted_between_retrieval_and_synthesis_is_not_quoted_or_cited(stores, tmp_path):
    state, index = stores
    loop, deps = _loop(state, index)
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    ingest_path(folder, state=state, blobs=deps.blobs, publisher=loop.publisher, clock=loop.clock)
    _carry_out(loop, 0)
    assert index.count_documents() == 3

    loop.submit(QUESTION, max_iterations=1)
    graded = loop.run_up_to("synthesizer", loop.transformed(QUESTION))  # retrieved and graded
    retrieved = loop.record()["iterations"][0]["contexts"]
    departures = next(c["document_id"] for c in retrieved if "seven in the morning" in c["text"])

    loop.clock.advance(1)
    before = len(loop.publisher.messages)
    assert delete_path(folder / "departures.md", state=state, publisher=loop.publisher, clock=loop.clock)
    _carry_out(loop, before)
    assert index.get_chunks([c["chunk_id"] for c in retrieved if c["document_id"] == departures]) == []

    loop.deliver(graded)
    record = loop.record()
    assert record["status"] == "answered", record
    assert "seven in the morning" not in record["answer"] and "nine" not in record["answer"], record["answer"]
    assert departures not in {c["document_id"] for c in record["citations"]}, record["citations"]
    # nor shown beside it: the record's contexts (the page's sources, GET /v1/queries/{id}, MCP search_documents)
    assert departures not in {c["document_id"] for entry in record["iterations"] for c in entry["contexts"]}
    assert record["iterations"][0]["contexts"], "the documents not deleted stay in the record"
