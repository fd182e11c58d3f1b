"""The segmented local index: a change costs what it changes, the ranking stays that of one
fresh build, deletes reach every segment, merges, concurrent readers, a kill -9 mid-merge."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from shared.adapters.local.index import HybridIndex, bm25_tokens, import_bm25s
from shared.adapters.local.segments import merge_plan
from shared.contract.ports import Chunk

DIM = 16
REPO = Path(__file__).resolve().parents[2]
WORDS = ["glacier", "policy", "fusion", "ranking", "poller", "lease", "retry", "token", "segment", "merge",
         "harbor", "falcon", "ember", "meadow", "river", "cobalt"]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _document(rng: np.random.Generator, doc: str, n: int, tag: str = "v1") -> tuple[list[Chunk], np.ndarray]:
    chunks = [Chunk(chunk_id=f"{doc}:{tag}:{i}", document_id=doc, ordinal=i,
                    text=" ".join(rng.choice(WORDS, int(rng.integers(3, 12)))) + f" {doc}x{i}",
                    title=f"Title {doc}", url=f"https://x.example/{doc}", source="feed")
              for i in range(n)]
    return chunks, _unit(rng, n)


def _history(index: HybridIndex, seed: int, *, maintain: bool) -> dict[str, tuple[list[Chunk], np.ndarray]]:
    """Sixty documents written, a third replaced and some deleted, maintenance in between;
    returns the documents as they finally are."""
    rng = np.random.default_rng(seed)
    final: dict[str, tuple[list[Chunk], np.ndarray]] = {}
    for d in range(60):
        final[f"d{d}"] = _document(rng, f"d{d}", int(rng.integers(2, 9)))
        index.upsert(f"d{d}", *final[f"d{d}"])
        if maintain and d % 7 == 6:
            index.maintain()
    for d in range(0, 60, 3):
        final[f"d{d}"] = _document(rng, f"d{d}", int(rng.integers(1, 6)), tag="v2")
        index.upsert(f"d{d}", *final[f"d{d}"])
    if maintain:
        index.maintain()
    for d in range(1, 60, 5):
        index.delete_document(f"d{d}")
        final.pop(f"d{d}")
    return final


def _fresh_build(path: Path, final: dict[str, tuple[list[Chunk], np.ndarray]]) -> HybridIndex:
    single = HybridIndex(path, DIM, background_merges=False)
    for doc, (chunks, vectors) in final.items():
        single.upsert(doc, chunks, vectors)
    single.maintain(flush=True)
    return single


def _ranking(index: HybridIndex, text: str, vector: np.ndarray, mode: str) -> list[tuple[str, float, float, float]]:
    return [(h.chunk.chunk_id, round(h.score, 5), round(h.dense_score, 5), round(h.bm25_score, 4))
            for h in index.search(text, vector, 12, mode=mode)]


def test_many_segments_with_tombstones_rank_as_one_fresh_build(tmp_path):
    segmented = HybridIndex(tmp_path / "seg", DIM, flush_rows=20, merge_factor=3, background_merges=False)
    final = _history(segmented, 11, maintain=True)
    final["late"] = _document(np.random.default_rng(12), "late", 4)
    segmented.upsert("late", *final["late"])
    view = segmented.snapshot()
    assert len(view.disk_segments) >= 2 and any(d is not None and d.any() for d in view.dead)
    assert view.memory_rows == 4  # written since the last maintenance: searched from memory
    single = _fresh_build(tmp_path / "one", final)
    assert len(single.snapshot().segments) == 1
    assert segmented.snapshot().size == single.snapshot().size == sum(len(c) for c, _ in final.values())
    rng = np.random.default_rng(3)
    for text, vector in zip(["glacier policy", "fusion ranking retry", "meadow", "d5x1 cobalt"], _unit(rng, 4),
                            strict=True):
        for mode in ("hybrid", "dense", "bm25"):
            # The statistics are summed over live rows, so the tolerance is float32 rounding only.
            assert _ranking(segmented, text, vector, mode) == _ranking(single, text, vector, mode), (text, mode)
    assert segmented.document_frequency(["glacier", "merge", "nothing"]) == single.document_frequency(
        ["glacier", "merge", "nothing"])


def test_bm25_scores_are_those_of_bm25s_over_the_same_corpus(tmp_path):
    index = HybridIndex(tmp_path, DIM, flush_rows=15, background_merges=False)
    final = _history(index, 5, maintain=True)
    corpus = sorted((c.chunk_id, bm25_tokens(f"{c.title}\n{c.text}")) for chunks, _ in final.values() for c in chunks)
    bm25s = import_bm25s()
    reference = bm25s.BM25()
    reference.index([tokens for _, tokens in corpus], show_progress=False)
    query = "glacier fusion token"
    ids = [reference.vocab_dict[t] for t in bm25_tokens(query)]
    expected = dict(zip([c for c, _ in corpus], reference.get_scores(ids), strict=True))
    got = {h.chunk.chunk_id: h.bm25_score for h in index.search(query, np.ones(DIM) / 4, 30, mode="bm25")}
    assert got and all(abs(score - expected[chunk_id]) < 1e-4 for chunk_id, score in got.items())


def test_a_write_is_searchable_at_once_and_costs_only_its_rows(tmp_path):
    rng = np.random.default_rng(2)
    index = HybridIndex(tmp_path, DIM, flush_rows=10_000, background_merges=False)
    for d in range(40):
        index.upsert(f"d{d}", *_document(rng, f"d{d}", 50))
    index.maintain(flush=True)
    index.search("glacier", _unit(rng, 1)[0], 5)
    big = index.snapshot().segments[0]
    chunks, vectors = _document(rng, "fresh", 3)
    chunks = [Chunk(**{**c.__dict__, "text": "quasar nebula"}) for c in chunks]
    index.upsert("fresh", chunks, vectors)
    hits = index.search("quasar", vectors[1], 3, mode="hybrid")
    assert hits[0].chunk.chunk_id == "fresh:v1:1"
    view = index.snapshot()
    # the 2,000-row segment is the same object: only the three new rows were read
    assert view.segments[0] is big and [len(s) for s in view.segments] == [2000, 3]
    index.delete_document("d3")
    view = index.snapshot()
    assert view.segments[0] is big and int(view.dead[0].sum()) == 50
    assert not [h for h in index.search("d3x7", vectors[0], 50, mode="bm25") if h.chunk.document_id == "d3"]


def test_a_replaced_document_is_found_once_with_its_new_text_across_segments(tmp_path):
    rng = np.random.default_rng(4)
    index = HybridIndex(tmp_path, DIM, flush_rows=5, merge_factor=2, background_merges=False)
    for d in range(8):
        index.upsert(f"d{d}", *_document(rng, f"d{d}", 4))
        index.maintain()
    chunks, vectors = _document(rng, "d2", 4)  # the same chunk ids, other text and vectors
    chunks = [Chunk(**{**c.__dict__, "text": f"zephyr {i}"}) for i, c in enumerate(chunks)]
    index.upsert("d2", chunks, vectors)
    hits = index.search("zephyr", vectors[0], 10)
    ids = [h.chunk.chunk_id for h in hits]
    assert len(ids) == len(set(ids)) and hits[0].chunk.text == "zephyr 0"
    assert hits[0].dense_score == pytest.approx(1.0, abs=1e-5)
    report = index.maintain(flush=True)
    assert report["flushed"] and not index.snapshot().memory_rows
    assert [h.chunk.chunk_id for h in index.search("zephyr", vectors[0], 10)] == ids


def test_merges_keep_the_number_of_segments_logarithmic():
    assert merge_plan([100, 90, 80, 70], flush_rows=50, merge_factor=4) == (0, 4)
    assert merge_plan([1000, 100, 90, 80], flush_rows=50, merge_factor=4) is None
    assert merge_plan([1000, 100, 90, 80, 60], flush_rows=50, merge_factor=4) == (1, 5)


def test_maintenance_merges_and_collects_old_segments(tmp_path):
    rng = np.random.default_rng(6)
    index = HybridIndex(tmp_path, DIM, flush_rows=10, merge_factor=3, background_merges=False)
    merged = 0
    for d in range(40):
        index.upsert(f"d{d}", *_document(rng, f"d{d}", 5))
        merged += len(index.maintain()["merged"])
    assert merged >= 3
    names = {d["name"] for d in index.snapshot().manifest}
    assert len(names) <= 2 * 3  # at most merge_factor - 1 segments on each of a few levels
    on_disk = {p.name for p in (tmp_path / "segments").iterdir() if p.is_dir()}
    assert names <= on_disk and len(on_disk) <= 2 * len(names) + 2  # the previous manifest's are kept
    assert index.snapshot().size == 200


def test_background_maintenance_flushes_while_searches_go_on(tmp_path):
    rng = np.random.default_rng(8)
    index = HybridIndex(tmp_path, DIM, flush_rows=50)
    for d in range(30):
        index.upsert(f"d{d}", *_document(rng, f"d{d}", 5))
        assert index.search(f"d{d}x0", _unit(rng, 1)[0], 1, mode="bm25")[0].chunk.document_id == f"d{d}"
    deadline = time.monotonic() + 20
    while index.snapshot().memory_rows >= 50 and time.monotonic() < deadline:
        time.sleep(0.05)
        index.upsert("tick", *_document(rng, "tick", 1))
    assert index.snapshot().disk_segments


def test_readers_in_two_instances_see_one_consistent_generation(tmp_path):
    """A second instance (another process's view) reads while this one writes and merges:
    every answer is a whole generation, never a document half replaced or seen twice."""
    rng = np.random.default_rng(9)
    writer = HybridIndex(tmp_path, DIM, flush_rows=30, merge_factor=2, background_merges=False)
    reader = HybridIndex(tmp_path, DIM, background_merges=False)
    for d in range(10):
        writer.upsert(f"d{d}", *_document(rng, f"d{d}", 6))
    problems: list[str] = []
    stop = threading.Event()

    def read() -> None:
        query = _unit(np.random.default_rng(1), 1)[0]
        while not stop.is_set():
            hits = reader.search("glacier policy", query, 60)
            ids = [h.chunk.chunk_id for h in hits]
            if len(ids) != len(set(ids)):
                problems.append(f"duplicates in {ids}")
            versions: dict[str, set[str]] = {}
            for chunk_id in ids:
                doc, tag, _ = chunk_id.split(":")
                versions.setdefault(doc, set()).add(tag)
            problems.extend(f"{doc} mixes {tags}" for doc, tags in versions.items() if len(tags) > 1)

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for round_ in range(12):
            for d in range(10):
                writer.upsert(f"d{d}", *_document(rng, f"d{d}", 6, tag=f"r{round_}"))
            writer.maintain()
    finally:
        stop.set()
        thread.join()
    assert not problems, problems[:3]
    assert reader.snapshot().generation == writer.generation
    assert reader.snapshot().manifest == writer.snapshot().manifest


_MERGER = textwrap.dedent("""
    import sys, numpy as np
    from shared.adapters.local.index import HybridIndex
    from shared.contract.ports import Chunk
    index = HybridIndex(sys.argv[1], 16, flush_rows=400, merge_factor=2, background_merges=False)
    rng = np.random.default_rng(int(sys.argv[2]))
    n = 0
    while True:  # until killed: documents of 100 chunks, maintenance after each
        doc = f"m{sys.argv[2]}-{n}"
        chunks = [Chunk(chunk_id=f"{doc}:{i}", document_id=doc, ordinal=i, text=f"kill merge {doc} {i}")
                  for i in range(100)]
        vectors = rng.normal(size=(100, 16)).astype(np.float32)
        index.upsert(doc, chunks, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
        print(doc, flush=True)
        index.maintain()
        n += 1
""")


def test_a_kill_9_in_the_middle_of_a_merge_loses_nothing_and_duplicates_nothing(tmp_path):
    path = tmp_path / "index"
    killed_mid_merge = 0
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _MERGER, str(path), str(attempt)], cwd=REPO,
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        try:
            deadline = time.monotonic() + 40
            # kill while a segment is being written (its temporary folder exists), after a merge or two
            while time.monotonic() < deadline:
                building = list((path / "segments").glob(".tmp-*")) if (path / "segments").exists() else []
                if building and len(list((path / "segments").glob("seg-*"))) >= 2:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed_mid_merge += 1
                    break
                time.sleep(0.002)
            else:
                pytest.fail("no merge was seen in 40 s")
        finally:
            proc.kill()
            proc.wait()
            written = proc.stdout.read().split()
            proc.stdout.close()
        index = HybridIndex(path, DIM, flush_rows=400, merge_factor=2, background_merges=False)
        documents = {r[0] for r in index.store.connection().execute("SELECT DISTINCT document_id FROM chunks")}
        assert set(written) <= documents  # each printed after its commit: none lost
        view = index.snapshot()
        assert view.size == index.count_chunks() == 100 * len(documents)
        live = view.live_chunk_ids()
        stored = [r[0] for r in index.store.connection().execute("SELECT chunk_id FROM chunks")]
        assert len(live) == len(set(live)) == view.size and set(live) == set(stored)  # none lost, none twice
        for chunk_id, vector in list(index.get_vectors(stored[:: max(1, len(stored) // 5)]).items()):
            assert index.search("", vector, 1, mode="dense")[0].chunk.chunk_id == chunk_id
        index.maintain()  # the crashed build's folder goes, and maintenance carries on
        assert not list((path / "segments").glob(".tmp-*"))
        index.close()
    assert killed_mid_merge == 3


def test_a_filter_on_many_segments_answers_as_an_index_of_only_the_admitted_chunks(tmp_path):
    from datetime import UTC, datetime

    from shared.contract.filters import Filters

    def dated(final):
        out = {}
        for doc, (chunks, vectors) in final.items():
            n = int(doc[1:]) if doc[1:].isdigit() else 99
            out[doc] = ([Chunk(**{**c.__dict__, "origin": f"https://feed{n % 3}.example/rss",
                                  "published": f"2026-{n % 12 + 1:02d}-10", "metadata": {"team": "ab"[n % 2]}})
                         for c in chunks], vectors)
        return out

    segmented = HybridIndex(tmp_path / "seg", DIM, flush_rows=20, merge_factor=3, background_merges=False)
    final = dated(_history(segmented, 13, maintain=False))
    for doc, (chunks, vectors) in final.items():  # rewrite with dates and origins, over several segments
        segmented.upsert(doc, chunks, vectors)
        segmented.maintain()
    segmented.delete_document("d3")
    final.pop("d3")
    f = Filters.parse(now=datetime(2026, 11, 26, tzinfo=UTC), source="https://feed0.example/rss", since="2026-03-01")
    admitted = {doc: cv for doc, cv in final.items() if f.matches(cv[0][0].fields())}
    assert 3 <= len(admitted) < len(final) // 2 and len(segmented.snapshot().disk_segments) >= 2
    only = _fresh_build(tmp_path / "only", admitted)
    rng = np.random.default_rng(14)
    for text, vector in zip(["glacier policy", "merge token", "d6x1"], _unit(rng, 3), strict=True):
        for mode in ("hybrid", "dense", "bm25"):
            got = [(h.chunk.chunk_id, round(h.score, 5), round(h.bm25_score, 4))
                   for h in segmented.search(text, vector, 8, mode=mode, filters=f)]
            want = [(h.chunk.chunk_id, round(h.score, 5), round(h.bm25_score, 4))
                    for h in only.search(text, vector, 8, mode=mode)]
            assert got == want, (text, mode)


def test_a_segment_mostly_replaced_is_rewritten_without_its_dead_rows(tmp_path):
    rng = np.random.default_rng(15)
    index = HybridIndex(tmp_path, DIM, flush_rows=100, merge_factor=4, background_merges=False)
    for d in range(20):
        index.upsert(f"d{d}", *_document(rng, f"d{d}", 5))
    index.maintain(flush=True)
    [first] = index.snapshot().manifest
    for d in range(8):  # 40 of its 100 rows replaced, 40% dead
        index.upsert(f"d{d}", *_document(rng, f"d{d}", 5, tag="v2"))
    report = index.maintain(flush=True)
    assert report["flushed"] and report["merged"] == [{"rows": 60, "segments_in": 1,
                                                        "seconds": report["merged"][0]["seconds"]}]
    view = index.snapshot()
    assert [d["rows"] for d in view.manifest] == [60, 40] and first not in view.manifest
    assert all(d is None or not d.any() for d in view.dead) and view.size == 100


def test_a_reader_process_sees_whole_generations_while_another_process_writes_and_merges(tmp_path):
    """The CLI, serve and the eval are separate processes over one index: every view a reader
    takes is one generation, each document whole and no chunk twice, merges or not."""
    path = tmp_path / "index"
    proc = subprocess.Popen([sys.executable, "-c", _MERGER, str(path), "7"], cwd=REPO, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        reader = HybridIndex(path, DIM, background_merges=False)
        views, manifests = 0, set()
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            view = reader.snapshot()
            live = view.live_chunk_ids()
            per_document: dict[str, int] = {}
            for chunk_id in live:
                doc = chunk_id.rsplit(":", 1)[0]
                per_document[doc] = per_document.get(doc, 0) + 1
            assert len(live) == len(set(live)) == view.size
            assert all(n == 100 for n in per_document.values()), per_document
            views += 1
            manifests.add(view.manifest_version)
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert views > 20 and len(manifests) >= 2  # the reader saw the writer's merges land


def test_postings_packed_in_batches_are_those_of_one_pass(monkeypatch):
    # A large segment's postings are packed batch by batch (bounded memory at 1M rows); the
    # packing must not change a term's rows, their order or their frequencies.
    from shared.adapters.local.segments import PostingsBuilder

    rng = np.random.default_rng(21)
    documents = [list(rng.choice(WORDS, int(rng.integers(0, 20)))) for _ in range(300)]
    whole = PostingsBuilder()
    for tokens in documents:
        whole.add(tokens)
    expected = whole.finish()
    monkeypatch.setattr(PostingsBuilder, "_BATCH", 1)  # a pack every 64 postings
    packed = PostingsBuilder()
    for tokens in documents:
        packed.add(tokens)
    got = packed.finish()
    assert len(packed._parts) == 0 and got.vocab == expected.vocab
    np.testing.assert_array_equal(got.lengths, [len(t) for t in documents])
    for term in WORDS:
        rows, tfs = got.term(term)
        want = [(r, d.count(term)) for r, d in enumerate(documents) if term in d]
        assert list(zip(rows.tolist(), tfs.tolist(), strict=True)) == want
        np.testing.assert_array_equal(rows, expected.term(term)[0])


def test_a_trickle_of_writes_never_makes_a_search_fold_more_than_a_few_rows(tmp_path, monkeypatch):
    # Refolding every in-memory row each 8 deltas cost the unlucky search 1 s at 2,000 rows; the
    # search's own path now folds at most _FOLD_ROWS rows, the rest waits for the background flush.
    from shared.adapters.local import index as local_index

    rng = np.random.default_rng(23)
    index = HybridIndex(tmp_path / "seg", DIM, flush_rows=10_000, background_merges=False)
    built: list[int] = []
    real = HybridIndex._segment_from_rows
    monkeypatch.setattr(HybridIndex, "_segment_from_rows",
                        lambda self, *a: (lambda seg: built.append(len(seg)) or seg)(real(self, *a)))
    final = {}
    for d in range(150):
        final[f"t{d}"] = _document(rng, f"t{d}", 4)
        index.upsert(f"t{d}", *final[f"t{d}"])
        index.snapshot()  # a search after every write
    view = index.snapshot()
    assert view.memory_rows == 600 and max(built) <= local_index._FOLD_ROWS
    assert len(view.segments) <= local_index._MEMORY_DELTAS + 600 // (local_index._FOLD_ROWS // 2)
    single = _fresh_build(tmp_path / "one", final)
    for text, vector in zip(["glacier policy", "t7x1 cobalt"], _unit(rng, 2), strict=True):
        assert _ranking(index, text, vector, "hybrid") == _ranking(single, text, vector, "hybrid")


def test_a_segments_chunk_ids_are_not_walked_by_every_full_garbage_collection(tmp_path):
    # As a list, a 1M-row segment's chunk ids made every full collection 57 ms instead of 9.6 ms.
    import gc

    index = HybridIndex(tmp_path, DIM, background_merges=False)
    index.upsert("d0", *_document(np.random.default_rng(24), "d0", 5))
    index.maintain(flush=True)
    index.upsert("d1", *_document(np.random.default_rng(25), "d1", 3))
    reopened = HybridIndex(tmp_path, DIM, background_merges=False)
    view = reopened.snapshot()
    assert len(view.disk_segments) == 1 and view.memory_rows == 3
    assert not any(gc.is_tracked(seg.chunk_ids) for seg in view.segments)
    assert reopened.search("", _unit(np.random.default_rng(26), 1)[0], 8, mode="dense")
