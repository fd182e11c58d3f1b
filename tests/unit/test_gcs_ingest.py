"""Cloud Storage object events become DocumentFetched / DocumentDeleted."""

import base64
import hashlib
from datetime import UTC, datetime

from cloudevents.http import CloudEvent

from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.ids import file_document_id
from shared.contract.messages import DocumentDeleted, DocumentFetched
from shared.runtime import functions
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher
from tests.support import root_main


def _obj(name="docs/guide.md", body=b"# Guide\n\nhello", generation="1"):
    return {"bucket": "uploads", "name": name, "generation": generation,
            "md5Hash": base64.b64encode(hashlib.md5(body).digest()).decode(), "timeCreated": "2026-11-01T00:00:00Z"}


def _event(kind, data):
    return CloudEvent({"type": f"google.cloud.storage.object.v1.{kind}", "source": "//storage/uploads",
                       "id": "e1"}, data)


def _deps(monkeypatch):
    d = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock())
    monkeypatch.setattr(functions, "_deps", d)
    return d


def test_finalized_object_is_fetched_by_reference_once(monkeypatch):
    deps = _deps(monkeypatch)
    root_main().gcs_finalized(_event("finalized", _obj()))
    root_main().gcs_finalized(_event("finalized", _obj()))  # redelivery: nothing new
    (msg,) = deps.publisher.of_type(DocumentFetched)
    assert msg.raw_ref == "gs://uploads/docs/guide.md" and msg.content_type == "text/markdown"
    assert msg.source == "gcs" and msg.document_id == file_document_id("gs://uploads/docs/guide.md")
    assert msg.content_hash == hashlib.md5(b"# Guide\n\nhello").hexdigest()


def test_changed_object_is_fetched_again_and_unsupported_ignored(monkeypatch):
    deps = _deps(monkeypatch)
    root_main().gcs_finalized(_event("finalized", _obj()))
    root_main().gcs_finalized(_event("finalized", _obj(body=b"# Guide v2", generation="2")))
    root_main().gcs_finalized(_event("finalized", _obj(name="photo.jpg")))
    assert len(deps.publisher.of_type(DocumentFetched)) == 2


def test_delete_of_the_current_generation_removes_and_of_an_old_one_is_ignored(monkeypatch):
    deps = _deps(monkeypatch)
    root_main().gcs_finalized(_event("finalized", _obj(generation="1")))
    root_main().gcs_finalized(_event("finalized", _obj(body=b"new", generation="2")))
    root_main().gcs_deleted(_event("deleted", _obj(generation="1")))  # overwrite deletes the old generation
    assert deps.publisher.of_type(DocumentDeleted) == []
    root_main().gcs_deleted(_event("deleted", _obj(body=b"new", generation="2")))
    (deleted,) = deps.publisher.of_type(DocumentDeleted)
    assert deleted.document_id == file_document_id("gs://uploads/docs/guide.md")
    assert deleted.generation == "2"  # the indexer ignores it if a newer generation came since


def test_a_late_delete_never_removes_a_fresh_overwrite(monkeypatch):
    """delete(gen 1) goes out, gen 2 is uploaded, then the gen-1 delete reaches the indexer late."""
    from services.indexer.handler import superseded
    from shared.contract.messages import decode, encode

    deps = _deps(monkeypatch)
    root_main().gcs_finalized(_event("finalized", _obj(generation="1")))
    root_main().gcs_deleted(_event("deleted", _obj(generation="1")))
    root_main().gcs_finalized(_event("finalized", _obj(body=b"new", generation="2")))
    (late,) = deps.publisher.of_type(DocumentDeleted)
    late = decode(*encode(late))  # as the indexer receives it
    assert late.generation == "1"
    assert superseded(late, deps.state) == 2


def test_events_older_than_the_cutoff_are_acknowledged_unhandled(monkeypatch):
    from datetime import timedelta

    deps = _deps(monkeypatch)
    old = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    event = CloudEvent({"type": "google.cloud.storage.object.v1.finalized", "source": "//storage/uploads",
                        "id": "e-old", "time": old}, _obj())
    root_main().gcs_finalized(event)  # returns: acknowledged, not retried for days
    root_main().gcs_deleted(CloudEvent({**{k: event[k] for k in ("source", "id", "time")},
                                        "type": "google.cloud.storage.object.v1.deleted"}, _obj()))
    assert deps.publisher.messages == []
    fresh = CloudEvent({"type": "google.cloud.storage.object.v1.finalized", "source": "//storage/uploads",
                        "id": "e-new", "time": datetime.now(UTC).isoformat()}, _obj())
    root_main().gcs_finalized(fresh)
    assert len(deps.publisher.of_type(DocumentFetched)) == 1


def test_event_without_object_name_is_dropped_not_retried(monkeypatch):
    deps = _deps(monkeypatch)
    root_main().gcs_finalized(_event("finalized", {"bucket": "uploads"}))
    assert deps.publisher.messages == []


def test_an_object_s_kind_comes_from_the_registry_of_formats_and_a_legacy_file_is_ignored(monkeypatch):
    deps = _deps(monkeypatch)
    root_main().gcs_finalized(_event("finalized", _obj(name="reports/q3.PDF", body=b"%PDF-1.7")))
    root_main().gcs_finalized(_event("finalized", _obj(name="decks/kickoff.pptx", body=b"PK")))
    root_main().gcs_finalized(_event("finalized", _obj(name="old/minutes.doc", body=b"\xd0\xcf")))
    types = {m.guid.rsplit("/", 1)[-1]: m.content_type for m in deps.publisher.of_type(DocumentFetched)}
    assert types == {"q3.PDF": "application/pdf",
                     "kickoff.pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation"}


def test_a_gzip_compressed_object_is_read_as_ragbus_ingest_reads_the_file_and_a_gzip_bomb_is_refused(monkeypatch):
    """`ragbus ingest` reads doc.md.gz as doc.md, but the same object dropped into the bucket was ignored
    ("unsupported suffix '.gz'"). Now the trigger announces it as its inner kind and the cleaner decompresses it once,
    within the cap a file has: one that expands past it (a gzip bomb) is refused while it is read, never inflated
    whole, as is one holding gzip again; an object over the cap is not announced (never downloaded); a .gz whose
    name names no kind (NEWS.gz: the trigger does not sniff what it does not download) is still ignored."""
    import gzip
    import tracemalloc

    import pytest

    from services.cleaner.handler import handle
    from shared.contract.errors import InvalidInput
    from shared.contract.messages import DocumentCleaned
    from shared.ingest.files import DEFAULT_MAX_BYTES
    from tests.fakes import InMemoryBlobStore

    deps = _deps(monkeypatch)
    guide = gzip.compress(b"# Field guide\n\nGrebes build floating nests of waterweed.\n")
    bomb = gzip.compress(b"\0" * (8 * DEFAULT_MAX_BYTES), compresslevel=9)  # 160 MiB of zeros in ~160 kB
    objects = {"docs/guide.md.gz": guide, "docs/bomb.txt.gz": bomb, "docs/twice.txt.gz": gzip.compress(guide),
               "docs/NEWS.gz": gzip.compress(b"Version 2 adds nests.\n"), "docs/photo.png.gz": b"\x1f\x8b"}
    for name, body in objects.items():
        root_main().gcs_finalized(_event("finalized", {**_obj(name=name, body=body), "size": str(len(body))}))
    big = {**_obj(name="docs/big.md.gz", body=b"x"), "size": str(DEFAULT_MAX_BYTES + 1)}
    root_main().gcs_finalized(_event("finalized", big))
    fetched = {m.guid.rsplit("/", 1)[-1]: m for m in deps.publisher.of_type(DocumentFetched)}
    assert set(fetched) == {"guide.md.gz", "bomb.txt.gz", "twice.txt.gz"}, set(fetched)
    assert fetched["guide.md.gz"].content_type == "text/markdown"
    assert fetched["guide.md.gz"].raw_ref == "gs://uploads/docs/guide.md.gz"  # the object itself: nothing copied
    assert fetched["guide.md.gz"].fallback_title == "guide"
    blobs = InMemoryBlobStore()
    for name, body in objects.items():
        blobs.blobs[f"gs://uploads/{name}"] = body
    cleaner = Deps(Settings(), publisher=RecordingPublisher(), state=deps.state, clock=FakeClock(), blobs=blobs)
    handle(fetched["guide.md.gz"], cleaner)
    (cleaned,) = cleaner.publisher.of_type(DocumentCleaned)
    text = blobs.get(cleaned.clean_ref).decode()
    assert "Grebes build floating nests of waterweed." in text and cleaned.title == "Field guide", text
    tracemalloc.start()
    try:
        with pytest.raises(InvalidInput, match=f"expands to over the {DEFAULT_MAX_BYTES}-byte cap"):
            handle(fetched["bomb.txt.gz"], cleaner)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * DEFAULT_MAX_BYTES, f"{peak} bytes held: the bomb was inflated past the cap"
    with pytest.raises(InvalidInput, match="compressed twice"):
        handle(fetched["twice.txt.gz"], cleaner)
    assert len(cleaner.publisher.of_type(DocumentCleaned)) == 1
