"""FirestoreIndex pre-filters on the Firestore emulator: ``where`` clauses before ``find_nearest``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np
import pytest

from shared.adapters.gcp.firestore_index import FirestoreIndex
from shared.contract.errors import ConfigError
from shared.contract.filters import Filters
from shared.contract.ports import Chunk

DIM = 8
NOW = datetime(2026, 11, 26, tzinfo=UTC)


def test_find_nearest_is_pre_filtered_by_kind_source_and_date(firestore_client):
    index = FirestoreIndex(firestore_client, dimension=DIM, namespace=f"t{uuid.uuid4().hex[:8]}")  # type: ignore[arg-type]
    rng = np.random.default_rng(5)
    for n in range(30):
        chunk = Chunk(chunk_id=f"d{n}:0", document_id=f"d{n}", ordinal=0, text=f"GPU note {n}",
                      url=f"https://feed{n % 3}.example/p/{n}", published=f"{2025 + n % 2}-0{n % 9 + 1}-10",
                      source="feed" if n % 5 else "sitemap", origin=f"https://feed{n % 3}.example/rss")
        vector = rng.normal(size=DIM).astype(np.float32)
        index.upsert(f"d{n}", [chunk], (vector / np.linalg.norm(vector)).reshape(1, -1))
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    f = Filters.parse(now=NOW, source="https://feed1.example/rss", since="2026-01-01", kind="feed")
    admitted = {f"d{n}" for n in range(30) if f.matches(index.get_chunks([f"d{n}:0"])[0].fields())}
    assert len(admitted) == 4
    hits = index.search("GPU", query, 4, mode="dense", filters=f)
    assert {h.chunk.document_id for h in hits} == admitted
    assert all(h.chunk.origin == "https://feed1.example/rss" for h in hits)
    until = Filters.parse(now=NOW, until="2025-03-31")
    early = {f"d{n}" for n in range(30) if until.matches(index.get_chunks([f"d{n}:0"])[0].fields())}
    assert len(early) == 6
    assert {h.chunk.document_id for h in index.search("GPU", query, 30, filters=until)} == early
    assert index.search("GPU", query, 5, filters=Filters.parse(now=NOW, source="https://none.example/")) == []
    with pytest.raises(ConfigError, match="where title"):
        index.search("GPU", query, 5, filters=Filters.parse(now=NOW, where=["title=x"]))


def test_find_nearest_is_pre_filtered_by_a_metadata_key_of_one_or_several_values(firestore_client):
    index = FirestoreIndex(firestore_client, dimension=DIM, namespace=f"t{uuid.uuid4().hex[:8]}")  # type: ignore[arg-type]
    rng = np.random.default_rng(7)
    for n in range(30):
        chunk = Chunk(chunk_id=f"d{n}:0", document_id=f"d{n}", ordinal=0, text=f"GPU note {n}",
                      url=f"https://feed.example/p/{n}", published=f"{2025 + n % 2}-0{n % 9 + 1}-10",
                      source="feed" if n % 4 else "sitemap", origin="https://feed.example/rss",
                      metadata={"author": f"a{n % 3}", "category": ["gpu", f"c{n % 5}"]})
        vector = rng.normal(size=DIM).astype(np.float32)
        index.upsert(f"d{n}", [chunk], (vector / np.linalg.norm(vector)).reshape(1, -1))
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    # one metadata key alone, with a date, and with a kind and a date (each its own composite index)
    for where, since, kind in ((["category=c3"], None, None), (["author=a1"], "2026-01-01", None),
                               (["author=a0"], "2025-01-01", "sitemap")):
        f = Filters.parse(now=NOW, where=where, since=since, kind=kind)
        admitted = {f"d{n}" for n in range(30) if f.matches(index.get_chunks([f"d{n}:0"])[0].fields())}
        assert 0 < len(admitted) <= 6
        # a pool of k: only a pre-filter finds every admitted chunk among 30
        assert {h.chunk.document_id for h in index.search("GPU", query, len(admitted), mode="dense",
                                                          filters=f)} == admitted
    for two in (Filters.parse(now=NOW, where=["author=a1", "category=c3"]),
                Filters.parse(now=NOW, where=["author=a1"], source="https://feed.example/rss")):
        with pytest.raises(ConfigError, match="one array-contains per query"):
            index.search("GPU", query, 5, filters=two)
