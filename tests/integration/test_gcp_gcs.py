"""GcsBlobStore against fake-gcs-server."""

from __future__ import annotations

import uuid

import pytest

from shared.adapters.gcp.gcs_blobs import GcsBlobStore, parse_ref
from shared.contract.ports import BlobStore


@pytest.fixture
def blobs(gcs_project: str) -> GcsBlobStore:
    store = GcsBlobStore(f"ragbus-test-{uuid.uuid4().hex[:8]}", project=gcs_project)
    store.ensure_bucket()
    store.ensure_bucket()  # idempotent
    return store


def test_the_store_satisfies_the_port(blobs: GcsBlobStore) -> None:
    assert isinstance(blobs, BlobStore)


def test_put_get_overwrite_delete(blobs: GcsBlobStore) -> None:
    ref = blobs.put(
        "raw/feed-1/item 1.html", b"<html>caf\xc3\xa9</html>", "text/html; charset=utf-8"
    )
    assert ref == f"gs://{blobs.bucket_name}/raw/feed-1/item 1.html"
    assert parse_ref(ref) == (blobs.bucket_name, "raw/feed-1/item 1.html")
    assert blobs.get(ref) == b"<html>caf\xc3\xa9</html>"

    stored = blobs.client.bucket(blobs.bucket_name).get_blob("raw/feed-1/item 1.html")
    assert stored.content_type == "text/html; charset=utf-8"

    assert blobs.put("raw/feed-1/item 1.html", b"second") == ref
    assert blobs.get(ref) == b"second"

    blobs.delete(ref)
    with pytest.raises(KeyError, match="raw/feed-1/item 1.html"):
        blobs.get(ref)
    blobs.delete(ref)  # deleting what is gone is fine


def test_binary_and_empty_blobs(blobs: GcsBlobStore) -> None:
    payload = bytes(range(256)) * 64
    assert blobs.get(blobs.put("bin/all-bytes", payload)) == payload
    assert blobs.get(blobs.put("bin/empty", b"")) == b""


def test_missing_and_foreign_refs_are_key_errors(blobs: GcsBlobStore) -> None:
    with pytest.raises(KeyError, match="clean/never-written"):
        blobs.get(blobs.ref("clean/never-written"))
    with pytest.raises(KeyError, match="not a GCS blob reference"):
        blobs.get("blob:raw/x")
    with pytest.raises(KeyError, match="names no object"):
        blobs.get(f"gs://{blobs.bucket_name}/")


def test_a_gzip_compressed_object_dropped_in_the_bucket_is_cleaned_as_its_document(blobs: GcsBlobStore) -> None:
    """An object doc.md.gz was ignored by the Cloud Storage trigger ("unsupported suffix '.gz'") though `ragbus
    ingest` reads the file. Written to fake-gcs-server and announced with the metadata the bucket reports, it is
    now announced as Markdown by reference and the cleaner, reading the object back, decompresses it; one stored
    with Content-Encoding: gzip, which the client is served decompressed, is read as served."""
    import gzip

    from services.cleaner.handler import clean_document
    from services.gcs_ingest.handler import on_object_finalized
    from shared.contract.config import Settings
    from shared.contract.deps import Deps
    from shared.contract.messages import DocumentCleaned
    from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher

    text = b"# Field guide\n\nGrebes build floating nests of waterweed.\n"
    for name, encoding in (("guides/grebes.md.gz", None), ("guides/served.md.gz", "gzip")):
        blob = blobs.client.bucket(blobs.bucket_name).blob(name)
        blob.content_encoding = encoding
        blob.upload_from_string(gzip.compress(text), content_type="application/gzip")
        blob = blobs.client.bucket(blobs.bucket_name).get_blob(name)  # what Cloud Storage's event carries of it
        data = {"bucket": blobs.bucket_name, "name": name, "generation": str(blob.generation),
                "md5Hash": blob.md5_hash, "size": str(blob.size), "timeCreated": blob.time_created.isoformat(),
                **({"contentEncoding": encoding} if encoding else {})}
        deps = Deps(Settings(), blobs=blobs, publisher=RecordingPublisher(), state=InMemoryStateStore(),
                    clock=FakeClock())
        fetched = on_object_finalized(data, state=deps.state, publisher=deps.publisher, clock=deps.clock)
        assert fetched is not None and fetched.content_type == "text/markdown", (name, fetched)
        assert fetched.raw_ref == f"gs://{blobs.bucket_name}/{name}"
        cleaned = clean_document(fetched, deps)
        assert isinstance(cleaned, DocumentCleaned) and cleaned.title == "Field guide", (name, cleaned)
        assert "Grebes build floating nests of waterweed." in blobs.get(cleaned.clean_ref).decode(), name
