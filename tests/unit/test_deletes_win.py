"""Deletes win: a delete is a tombstone in the ledger, and no fetch, clean, index or retry of the
revision it deleted brings the document back, whatever order the stages see the messages in; a
re-ingest after the delete (the next revision) works. Driven through the real ingestion step,
cleaner and indexer, with the messages delivered in the orders a bus may deliver them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.cleaner import handler as cleaner
from services.dead_letters import redrive
from services.feed_poller.handler import poll_listing
from services.gcs_ingest.handler import on_object_deleted, on_object_finalized
from services.indexer import handler as indexer
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import (
    DocumentCleaned,
    DocumentDeleted,
    DocumentFetched,
    Message,
    encode,
)
from shared.contract.ports import FetchResult, StateStore
from shared.ingest import processed_items
from shared.ingest.files import delete_path, ingest_path
from shared.ingest.listings import add_listing, get_listing, remove_listing
from shared.ingest.progress import status_of
from shared.runtime.dispatch import keep_dead_letter
from tests.fakes import FakeClock, InMemoryBlobStore, InMemoryStateStore, RecordingPublisher
from tests.support import topic_paragraphs
from tests.unit.test_indexer import CountingEmbedder, DictIndex

FEED = "https://news.example/feed.xml"


@pytest.fixture
def world() -> World:
    """The ledger in memory here; tests/integration/test_deletes_win_stores.py runs the same
    cases on SQLite and on the Firestore emulator."""
    return World()


class World:
    def __init__(self, state: StateStore | None = None) -> None:
        self.state = state if state is not None else InMemoryStateStore()
        self.blobs = InMemoryBlobStore()
        self.publisher = RecordingPublisher()
        self.clock = FakeClock(datetime(2026, 11, 28, 9, 0, tzinfo=UTC))
        self.index = DictIndex()
        self.fetcher = PagesFetcher()
        self.configure(Settings())
        self.delivered = 0

    def configure(self, settings: Settings) -> None:
        self.deps = Deps(settings, blobs=self.blobs, state=self.state, publisher=self.publisher,
                         clock=self.clock, embedder=CountingEmbedder(), index=self.index, fetcher=self.fetcher)

    def take(self) -> list[Message]:
        """The messages published since the last take, in order."""
        out = self.publisher.messages[self.delivered:]
        self.delivered = len(self.publisher.messages)
        return out

    def deliver(self, message: Message) -> None:
        if isinstance(message, DocumentFetched):
            cleaner.handle(message, self.deps)
        elif isinstance(message, DocumentCleaned | DocumentDeleted):
            indexer.handle(message, self.deps)

    def drain(self) -> None:
        while pending := self.take():
            for message in pending:
                self.deliver(message)

    def cleaned_of(self, fetched: list[Message]) -> list[DocumentCleaned]:
        """Clean these fetches now and hold their DocumentCleaned back (the indexer is slow)."""
        for message in fetched:
            self.deliver(message)
        return [m for m in self.take() if isinstance(m, DocumentCleaned)]


class PagesFetcher:
    """A feed and its pages; ``on_page`` runs as a page is fetched (a removal mid-poll)."""

    def __init__(self) -> None:
        self.responses: dict[str, bytes] = {}
        self.on_page = None

    def allowing_loopback(self):
        return self

    def fetch(self, url, *, accept=None, etag=None, last_modified=None):
        if url != FEED and self.on_page is not None:
            self.on_page(url)
        kind = "application/rss+xml" if url == FEED else "text/html"
        return FetchResult(url, 200, kind, "utf-8", self.responses[url])


def _folder(tmp_path: Path, n: int = 3) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i}.md").write_text(f"# Doc {i}\n\n" + "\n\n".join(topic_paragraphs(f"topic{i}", 3, seed=i)))
    return folder


def _ingest(world: World, folder: Path) -> list[Message]:
    """What the ingest published (still to be delivered by ``drain``, unless taken first)."""
    before = len(world.publisher.messages)
    ingest_path(folder, state=world.state, blobs=world.blobs, publisher=world.publisher, clock=world.clock)
    return world.publisher.messages[before:]


def _delete(world: World, folder: Path) -> list[str]:
    world.clock.advance(1)
    return delete_path(folder, state=world.state, publisher=world.publisher, clock=world.clock)


def test_a_delete_handled_before_the_clean_of_an_earlier_fetch_wins(world, tmp_path):
    folder = _folder(tmp_path)
    fetched = _ingest(world, folder)
    cleaned = world.cleaned_of(fetched)  # cleaned before the delete, indexed after it
    assert len(_delete(world, folder)) == 3
    world.drain()  # the deletes reach the indexer first (nothing to remove yet)
    for message in cleaned:
        world.deliver(message)
    assert world.index.docs == {}
    assert world.state.count(state_collections.DOCUMENTS) == 0
    # a second delete has nothing left to do, and says so
    assert _delete(world, folder) == []


def test_a_fetch_cleaned_after_the_delete_is_dropped_by_the_cleaner(world, tmp_path):
    folder = _folder(tmp_path)
    _ingest(world, folder)
    _delete(world, folder)
    world.drain()  # the fetches reach the cleaner after the delete
    assert not world.publisher.of_type(DocumentCleaned)  # nothing cleaned: nothing for the indexer either
    assert world.index.docs == {}


def test_a_delete_landing_between_the_indexers_check_and_its_write_is_undone(world, tmp_path):
    folder = _folder(tmp_path, n=1)
    (cleaned,) = world.cleaned_of(_ingest(world, folder))

    class DeleteDuringUpsert(DictIndex):
        def upsert(self, document_id, chunks, vectors):
            super().upsert(document_id, chunks, vectors)
            # the delete command runs now, in another process: its tombstone, then its message
            # handled at once (before this indexer writes the document's record)
            _delete(world, folder)
            for message in world.take():
                world.deliver(message)

    world.deps = world.deps.replacing(index=DeleteDuringUpsert())
    world.deliver(cleaned)
    assert world.deps.index.docs == {}
    assert world.state.count(state_collections.DOCUMENTS) == 0


def test_a_re_ingest_after_the_delete_is_the_next_revision_and_indexed(world, tmp_path):
    folder = _folder(tmp_path, n=2)
    first = _ingest(world, folder)
    world.drain()
    assert {m.revision for m in first if isinstance(m, DocumentFetched)} == {1}
    _delete(world, folder)
    world.drain()
    assert world.index.docs == {}
    world.clock.advance(1)
    again = _ingest(world, folder)
    assert {m.revision for m in again if isinstance(m, DocumentFetched)} == {2}
    world.drain()
    assert len(world.index.docs) == 2
    # the first revision's messages, replayed now (a redelivery, a retried dead letter), change nothing
    for message in first:
        world.deliver(message)
    world.drain()
    assert len(world.index.docs) == 2
    # nor does the old delete replayed: it deleted revision 1, and revision 2 is indexed
    old_deletes = [m for m in world.publisher.messages if isinstance(m, DocumentDeleted)]
    for message in old_deletes:
        world.deliver(message)
    assert len(world.index.docs) == 2


def test_an_ingest_that_began_before_the_delete_cannot_claim_a_file_after_it(world, tmp_path):
    folder = _folder(tmp_path, n=2)
    started = world.clock.now()
    world.clock.advance(1)
    assert _delete(world, folder) == []  # never ingested: nothing deleted, but each file has a tombstone
    document_id = processed_items.tombstones(world.state, {"source": "file"})[0]["document_id"]
    claim = processed_items.claim(world.state, document_id, "h", now=world.clock.now(), fields={}, started=started)
    assert claim.kind == "deleted"
    # a run that begins after the delete claims it afresh
    world.clock.advance(1)
    assert processed_items.claim(world.state, document_id, "h", now=world.clock.now(), fields={},
                                 started=world.clock.now()).kind == "new"


def test_a_dead_letter_retried_after_the_delete_does_not_bring_the_document_back(world, tmp_path):
    folder = _folder(tmp_path, n=1)
    (cleaned,) = world.cleaned_of(_ingest(world, folder))
    data, attributes = encode(cleaned)
    world.state.put(state_collections.DEAD_LETTERS, "indexer.document-cleaned:m1", {
        "subscription": "indexer.document-cleaned", "topic": "document-cleaned", "message_id": "m1",
        "data": data.decode(), **attributes, "error": "the embedder was down"})
    _delete(world, folder)
    world.drain()
    done = redrive.retry(world.deps, redrive.select(world.state, None, every=True))
    assert done.done == ["indexer.document-cleaned:m1"]
    world.drain()
    assert world.index.docs == {}
    # a dead letter kept before revisions existed (no revision in its body) is stale all the same
    legacy = cleaned.model_copy(update={"revision": None})
    world.deliver(legacy)
    assert world.index.docs == {}


def test_status_counts_a_document_deleted_meanwhile_as_removed_not_pending(world, tmp_path):
    folder = _folder(tmp_path, n=2)
    ids = [m.document_id for m in _ingest(world, folder)]
    world.drain()
    _delete(world, folder)
    assert status_of(world.state, ids).pending == set(ids)  # the delete is not handled yet
    world.drain()
    status = status_of(world.state, ids)
    assert status.removed == set(ids) and not status.pending and not status.indexed


def test_a_replayed_finalize_of_a_deleted_generation_is_refused_and_a_newer_one_indexed(world):

    def obj(generation: str, body: str = "b") -> dict:
        return {"bucket": "uploads", "name": "docs/guide.md", "generation": generation,
                "md5Hash": "", "crc32c": body}

    kwargs = {"state": world.state, "publisher": world.publisher, "clock": world.clock}
    assert on_object_finalized(obj("5"), **kwargs) is not None
    assert on_object_deleted(obj("5"), **kwargs) is not None
    assert on_object_finalized(obj("5"), **kwargs) is None  # the event replayed: deleted stays deleted
    assert on_object_finalized(obj("4", "old"), **kwargs) is None  # an older generation, late
    newer = on_object_finalized(obj("6", "new"), **kwargs)
    assert newer is not None and newer.revision == 2
    # a delete of a generation newer than the one recorded removes it (the object is gone)
    assert on_object_deleted(obj("7"), **kwargs) is not None
    assert processed_items.is_tombstone(world.state.get(state_collections.PROCESSED_ITEMS, newer.document_id))


def _rss(n: int) -> bytes:
    items = "".join(f"<item><title>Item {i}</title><link>https://news.example/{i}.html</link>"
                    f"<guid>g{i}</guid></item>" for i in range(n))
    return (f"<?xml version='1.0'?><rss version='2.0'><channel><title>t</title><link>https://news.example/</link>"
            f"<description>d</description>{items}</channel></rss>").encode()


def test_a_feed_removed_during_its_poll_stays_removed_and_none_of_its_documents_stay(world, tmp_path):
    world.fetcher.responses[FEED] = _rss(8)
    for i in range(8):
        world.fetcher.responses[f"https://news.example/{i}.html"] = (
            "<html><body><article><h1>Item</h1><p>" + " ".join(topic_paragraphs(f"item{i}", 3, seed=i))
            + "</p></article></body></html>").encode()
    add_listing(world.state, FEED, allow_loopback=False, now=world.clock.now(), resolver=_public)
    seen: list[str] = []

    def remove_at_the_fourth_page(url: str) -> None:
        seen.append(url)
        if len(seen) == 4:
            world.clock.advance(1)
            remove_listing(world.state, FEED, publisher=world.publisher, clock=world.clock)

    world.fetcher.on_page = remove_at_the_fourth_page
    report = poll_listing(FEED, world.deps)
    assert report.outcome == "removed"
    assert get_listing(world.state, FEED) is None  # not registered again by the poll's bookkeeping
    assert processed_items.records(world.state, {"feed_url": FEED}) == []  # every item buried
    world.drain()
    assert world.index.docs == {}
    assert world.state.count(state_collections.DOCUMENTS) == 0


def _public(host, port, *args, **kwargs):
    import socket

    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port or 443))]


def test_claims_racing_a_delete_in_another_thread_end_buried_every_one(world):
    """The claim and the tombstone are each one transaction of the store: whichever comes first,
    a run that began before the delete leaves nothing live behind it."""
    import threading

    ids = [f"file-race{i:02d}" for i in range(30)]
    began = world.clock.now()
    deleted_at = datetime(2026, 11, 28, 9, 0, 1, tzinfo=UTC)
    claims: dict[str, str] = {}

    def ingest() -> None:
        for document_id in ids:
            claims[document_id] = processed_items.claim(world.state, document_id, "h", now=began,
                                                        fields={"source": "file"}, started=began).kind

    def delete() -> None:
        for document_id in reversed(ids):
            processed_items.bury(world.state, document_id, now=deleted_at, reason="file deleted")

    threads = [threading.Thread(target=ingest), threading.Thread(target=delete)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(claims.values()) <= {"new", "deleted"}
    assert processed_items.records(world.state, {}) == []
    assert {t["document_id"] for t in processed_items.tombstones(world.state, {})} == set(ids)
    for document_id in ids:  # a claim that came first is covered by the tombstone's revision
        tombstone = world.state.get(state_collections.PROCESSED_ITEMS, document_id)
        assert tombstone["revision"] == (1 if claims[document_id] == "new" else 0), (document_id, claims[document_id])
        if claims[document_id] == "new":
            assert processed_items.stale(world.state, document_id, content_hash="h", revision=1) is not None


def _expiry(world: World, document_id: str) -> str | None:
    return world.state.get(state_collections.PROCESSED_ITEMS, document_id).get("expire_at")


def test_a_tombstone_expires_once_its_delete_is_carried_out(world, tmp_path):
    # Firestore's TTL policy on processed_items.expire_at (infra/firestore.tf) deletes it then: on Google
    # Cloud no sweep runs, and every delete left a tombstone for good
    folder = _folder(tmp_path, n=2)
    ids = [m.document_id for m in _ingest(world, folder)]
    world.drain()
    _delete(world, folder)
    assert [_expiry(world, i) for i in ids] == [None, None]  # the delete is not carried out yet
    world.drain()
    for document_id in ids:
        deleted_at = datetime.fromisoformat(world.state.get(state_collections.PROCESSED_ITEMS, document_id)["deleted_at"])
        assert _expiry(world, document_id) == (deleted_at + timedelta(days=30)).isoformat()
    expiries = [_expiry(world, i) for i in ids]
    _delete(world, folder)  # deleted again: nothing is sent, and the tombstones keep their expiry
    world.drain()
    assert [_expiry(world, i) for i in ids] == expiries
    world.clock.advance(1)
    _ingest(world, folder)  # ingested again: live, and it never expires
    assert [_expiry(world, i) for i in ids] == [None, None]


def test_a_tombstone_outlives_the_messages_pub_sub_still_holds(world, tmp_path):
    world.configure(Settings(tombstone_retention_days=1))
    folder = _folder(tmp_path, n=1)
    (document_id,) = [m.document_id for m in _ingest(world, folder)]
    world.drain()
    _delete(world, folder)
    world.drain()
    deleted_at = datetime.fromisoformat(world.state.get(state_collections.PROCESSED_ITEMS, document_id)["deleted_at"])
    assert _expiry(world, document_id) == (deleted_at + timedelta(days=processed_items.PUBSUB_RETENTION_DAYS)).isoformat()


def _letter(world: World, message: Message, message_id: str) -> None:
    data, attributes = encode(message)
    keep_dead_letter(world.deps, subscription="indexer.document-cleaned", topic="document-cleaned", stage="indexer",
                     data=data, attributes=attributes, error="the embedder was down", attempts=5,
                     message_id=message_id)


def test_a_dead_letter_keeps_its_document_s_tombstone_from_expiring(world, tmp_path):
    # a retried letter is dropped as stale only while the tombstone stands (the embedded sweep's rule too)
    folder = _folder(tmp_path, n=2)
    first, second = world.cleaned_of(_ingest(world, folder))
    _letter(world, first, "m1")
    _delete(world, folder)
    world.drain()
    assert _expiry(world, first.document_id) is None and _expiry(world, second.document_id) is not None
    _letter(world, second, "m2")  # a letter kept after the delete was carried out: the expiry goes
    assert _expiry(world, second.document_id) is None
    done = redrive.retry(world.deps, redrive.select(world.state, None, every=True))
    assert sorted(done.done) == ["indexer.document-cleaned:m1", "indexer.document-cleaned:m2"]
    world.drain()
    assert world.index.docs == {}


def test_a_dead_letter_kept_between_the_check_and_the_stamp_still_keeps_the_tombstone(world, tmp_path, monkeypatch):
    # the indexer looks for letters naming the document, then stamps its tombstone: a letter stored in
    # between (another stage giving up at that moment) must still keep the tombstone from expiring
    folder = _folder(tmp_path, n=1)
    (cleaned,) = world.cleaned_of(_ingest(world, folder))
    real_list, landed = world.state.list, []

    def list_then_letter(collection, *args, **kwargs):
        found = real_list(collection, *args, **kwargs)
        if collection == state_collections.DEAD_LETTERS and args and args[0] == {"document_id": cleaned.document_id} \
                and not landed:
            landed.append(True)
            _letter(world, cleaned, "m1")  # lands after the check has read none
        return found

    monkeypatch.setattr(world.state, "list", list_then_letter)
    _delete(world, folder)
    world.drain()
    assert landed and _expiry(world, cleaned.document_id) is None
