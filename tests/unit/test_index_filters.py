"""The local index pre-filters: candidates are restricted by metadata before scoring."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import numpy as np
import pytest

from shared.adapters.local.index import HybridIndex
from shared.contract.filters import Filters
from shared.contract.ports import Chunk

NOW = datetime(2026, 11, 26, tzinfo=UTC)
DIM = 16


def _unit(rng, n):
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _corpus(rng, documents=60):
    """60 two-chunk documents over three feeds, dated the 10th of each month of 2025, 2026, 2025, ..., all about GPUs."""
    docs = []
    for n in range(documents):
        feed = f"https://feed{n % 3}.example/rss"
        published = f"{2025 + (n // 12) % 2}-{n % 12 + 1:02d}-10T09:00:00+00:00"
        chunks = [
            Chunk(chunk_id=f"d{n}:{o}", document_id=f"d{n}", ordinal=o,
                  text=f"GPU kernel note {n} part {o} about memory bandwidth and CUDA graphs",
                  title=f"Post {n}", url=f"https://feed{n % 3}.example/p/{n}", published=published,
                  source="feed", origin=feed, metadata={"team": "a" if n % 2 else "b"})
            for o in range(2)
        ]
        docs.append((f"d{n}", chunks, _unit(rng, 2)))
    return docs


def _fill(index, docs):
    for document_id, chunks, vectors in docs:
        index.upsert(document_id, chunks, vectors)


@pytest.fixture
def corpus():
    return _corpus(np.random.default_rng(7))


def _ids(hits):
    return [(h.chunk.chunk_id, round(h.score, 5)) for h in hits]


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
@pytest.mark.parametrize("ann_threshold", [100_000, 10])
def test_a_narrow_filter_still_fills_k_and_matches_a_corpus_of_only_the_admitted(tmp_path, corpus, mode, ann_threshold):
    f = Filters.parse(now=NOW, source="https://feed1.example/rss", since="2026-01-01", until="2026-06-30")
    admitted = [d for d in corpus if f.matches(d[1][0].fields())]
    assert len(admitted) == 4  # 8 chunks out of 120
    full = HybridIndex(tmp_path / "full", DIM, ann_threshold=ann_threshold)
    only = HybridIndex(tmp_path / "only", DIM, ann_threshold=ann_threshold)
    _fill(full, corpus)
    _fill(only, admitted)
    query = _unit(np.random.default_rng(3), 1)[0]
    filtered = full.search("CUDA graphs memory", query, 8, mode=mode, filters=f)
    assert len(filtered) == 8
    assert {h.chunk.document_id for h in filtered} == {d[0] for d in admitted}
    # Top-k then filter would have found almost nothing at this k.
    unfiltered = full.search("CUDA graphs memory", query, 8, mode=mode)
    assert sum(f.matches(h.chunk.fields()) for h in unfiltered) < 8
    reference = only.search("CUDA graphs memory", query, 8, mode=mode)
    # Identical, scores included: BM25's N, document frequencies and average length are those of
    # the admitted rows, as in an index holding only them.
    assert _ids(filtered) == _ids(reference)
    assert [round(h.bm25_score, 4) for h in filtered] == [round(h.bm25_score, 4) for h in reference]


def test_search_many_applies_the_filter_to_every_query(tmp_path, corpus):
    index = HybridIndex(tmp_path, DIM)
    _fill(index, corpus)
    f = Filters.parse(now=NOW, where=["team=a"], until="2025-06-30")
    queries = _unit(np.random.default_rng(4), 3)
    admitted = sum(len(chunks) for _, chunks, _ in corpus if f.matches(chunks[0].fields()))
    assert admitted == 18  # d1, d3, d5, d25, ... x 2 chunks
    results = index.search_many(["GPU", "memory", "kernel"], queries, 30, filters=f)
    assert all(f.matches(h.chunk.fields()) for hits in results for h in hits)
    assert [len(hits) for hits in results] == [18, 18, 18]


def test_a_filter_that_admits_nothing_returns_nothing(tmp_path, corpus):
    index = HybridIndex(tmp_path, DIM)
    _fill(index, corpus)
    query = _unit(np.random.default_rng(5), 1)[0]
    assert index.search("GPU", query, 5, filters=Filters.parse(now=NOW, source="https://nowhere.example/")) == []
    assert index.search("GPU", query, 5, filters=Filters.parse(now=NOW, kind="gcs")) == []
    assert index.search_many([], np.zeros((0, DIM)), 5, filters=Filters.parse(now=NOW, kind="gcs")) == []


def test_deleted_and_replaced_documents_leave_the_filtered_results(tmp_path, corpus):
    index = HybridIndex(tmp_path, DIM)
    _fill(index, corpus)
    f = Filters.parse(now=NOW, source="https://feed0.example/rss", since="2026-01-01")
    query = _unit(np.random.default_rng(6), 1)[0]
    before = {h.chunk.document_id for h in index.search("GPU", query, 50, filters=f)}
    assert before == {f"d{n}" for n in [*range(12, 24), *range(36, 48)] if n % 3 == 0}
    index.delete_document("d12")
    # d15 moves to another feed: the filter follows the stored fields, not the old mask.
    moved = [Chunk(chunk_id="d15:new", document_id="d15", ordinal=0, text="GPU moved", published="2026-04-10",
                   source="feed", origin="https://feed2.example/rss", url="https://feed2.example/p/15")]
    index.upsert("d15", moved, _unit(np.random.default_rng(8), 1))
    after = {h.chunk.document_id for h in index.search("GPU", query, 50, filters=f)}
    assert after == before - {"d12", "d15"}
    assert "d15" in {h.chunk.document_id for h in index.search(
        "GPU", query, 50, filters=Filters.parse(now=NOW, source="https://feed2.example/rss"))}


def test_stored_origin_and_metadata_come_back_and_older_databases_gain_the_columns(tmp_path):
    folder = tmp_path / "old"
    folder.mkdir()
    # A chunks.db written before origin and metadata existed.
    conn = sqlite3.connect(folder / "chunks.db")
    conn.executescript(
        "CREATE TABLE chunks (chunk_id TEXT PRIMARY KEY, document_id TEXT NOT NULL, ordinal INTEGER NOT NULL,"
        " text TEXT NOT NULL, title TEXT NOT NULL DEFAULT '', url TEXT NOT NULL DEFAULT '', published TEXT,"
        " source TEXT NOT NULL DEFAULT '', vector BLOB NOT NULL);"
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('generation', '1'), ('dimension', '16');"
    )
    vector = _unit(np.random.default_rng(1), 1)[0]
    conn.execute("INSERT INTO chunks VALUES ('old:0', 'old', 0, 'an old GPU note', 't', 'https://o.example/1',"
                 " '2024-01-01', 'feed', ?)", (vector.tobytes(),))
    conn.commit()
    conn.close()
    index = HybridIndex(folder, DIM)
    [old] = index.get_chunks(["old:0"])
    assert (old.origin, dict(old.metadata), old.heading) == ("", {}, "")
    new = Chunk(chunk_id="new:0", document_id="new", ordinal=0, text="a new GPU note", origin="https://n.example/rss",
                metadata={"team": "a"}, published="2026-01-01", source="feed", heading="Release 2.4 > Fixes")
    index.upsert("new", [new], vector.reshape(1, -1))
    assert index.get_chunks(["new:0"]) == [new]
    hits = index.search("GPU", vector, 5, filters=Filters.parse(now=NOW, where=["team=a"]))
    assert [h.chunk.chunk_id for h in hits] == ["new:0"]
    hits = index.search("GPU", vector, 5, filters=Filters.parse(now=NOW, until="2025-01-01"))
    assert [h.chunk.chunk_id for h in hits] == ["old:0"]


def test_a_new_date_range_reuses_the_segments_filter_columns(tmp_path, corpus, monkeypatch):
    # A relative date ("7d", "latest") is a new instant in every query: the masks are computed
    # from the columns each segment carries, never by reading the stored fields again.
    index = HybridIndex(tmp_path, DIM)
    _fill(index, corpus)
    reads = []
    original = index._stored_fields
    monkeypatch.setattr(index, "_stored_fields", lambda seg: reads.append(seg) or original(seg))
    query = _unit(np.random.default_rng(9), 1)[0]
    first = index.search("GPU", query, 50, filters=Filters.parse(now=NOW, since="400d"))
    for days in (401, 500, 650):
        f = Filters.parse(now=NOW, since=f"{days}d", source="https://feed2.example/rss")
        hits = index.search("GPU", query, 50, filters=f)
        assert hits and all(f.matches(h.chunk.fields()) for h in hits)
    assert reads == [] and first


def test_a_segment_on_disk_carries_its_filter_columns_to_the_next_process(tmp_path, corpus, monkeypatch):
    # Read back from chunks.db, the first filtered search of a process took 12.8 s over a 100k-row
    # segment; the columns are written with the segment and read from its folder instead.
    index = HybridIndex(tmp_path, DIM, background_merges=False)
    _fill(index, corpus)
    index.maintain(flush=True)
    index.delete_document("d12")
    f = Filters.parse(now=NOW, source="https://feed0.example/rss", since="2026-01-01", where=["team=b"])
    query = _unit(np.random.default_rng(10), 1)[0]
    expected = _ids(index.search("GPU memory", query, 20, filters=f))
    reopened = HybridIndex(tmp_path, DIM, background_merges=False)
    monkeypatch.setattr(reopened, "_stored_fields", lambda seg: pytest.fail("read the stored fields"))
    assert reopened.snapshot().disk_segments[0].folder is not None
    got = reopened.search("GPU memory", query, 20, filters=f)
    assert _ids(got) == expected and got and "d12" not in {h.chunk.document_id for h in got}
    # a damaged fields file, read when a source filter first needs it: chunks.db answers instead
    folder = reopened.snapshot().disk_segments[0].folder
    (folder / "filter_fields.json").write_text("[1, 2")
    damaged = HybridIndex(tmp_path, DIM, background_merges=False)
    assert _ids(damaged.search("GPU memory", query, 20, filters=f)) == expected
    # a segment written before the columns existed is still filtered, from chunks.db
    for name in ("filter_fields.json", "filter_kinds.json", "filter_published.npy", "filter_kind.npy"):
        (reopened.snapshot().disk_segments[0].folder / name).unlink()
    older = HybridIndex(tmp_path, DIM, background_merges=False)
    assert _ids(older.search("GPU memory", query, 20, filters=f)) == expected

def test_a_narrow_filter_over_an_hnsw_segment_ranks_as_an_exact_search_of_the_admitted(tmp_path):
    # A graph walk with a filter passes excluded nodes without keeping them: with 1 document in
    # 40 admitted it missed some of the true top 10; the admitted rows are searched exactly
    # instead, as an index holding only them is.
    rng = np.random.default_rng(31)
    full = HybridIndex(tmp_path / "full", DIM, ann_threshold=500, background_merges=False)
    only = HybridIndex(tmp_path / "only", DIM, ann_threshold=500, background_merges=False)
    for d in range(160):
        team = "rare" if d % 40 == 0 else "common"
        chunks = [Chunk(chunk_id=f"d{d}:{i}", document_id=f"d{d}", ordinal=i, text=f"word{d % 7} note {i}",
                        title=f"T{d}", url=f"https://x.example/{d}", metadata={"team": team}) for i in range(25)]
        vectors = _unit(rng, 25)
        full.upsert(f"d{d}", chunks, vectors)
        if team == "rare":
            only.upsert(f"d{d}", chunks, vectors)
    full.maintain(flush=True)
    full.delete_document("d80")  # a tombstone too: the admitted rows are the live ones
    only.delete_document("d80")
    assert full.snapshot().dense.kind == "hnsw" and only.snapshot().dense.kind == "exact"
    f = Filters.parse(now=NOW, where=["team=rare"])
    for query in _unit(rng, 10):
        for mode in ("dense", "hybrid"):
            assert _ids(full.search("word0 note", query, 10, mode=mode, filters=f)) == _ids(
                only.search("word0 note", query, 10, mode=mode)), mode
