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
