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
