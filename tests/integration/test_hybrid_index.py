"""The local hybrid index on disk: replace/delete by document, persistence, ANN, fusion, threads."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from shared.adapters.local.embedder import OnnxMiniLMEmbedder
from shared.adapters.local.index import HybridIndex, bm25_tokens
from shared.contract.errors import ConfigError
from shared.contract.ports import Chunk, Index

DIM = 16


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _chunks(document_id: str, texts: list[str], tag: str = "h1") -> list[Chunk]:
    return [
        Chunk(chunk_id=f"{document_id}:{tag}:{n}", document_id=document_id, ordinal=n, text=t,
              title=f"Title of {document_id}", url=f"https://x.example/{document_id}", source="feed")
        for n, t in enumerate(texts)
    ]


def test_implements_the_port(tmp_path):
    assert isinstance(HybridIndex(tmp_path, DIM), Index)


def test_upsert_replace_and_delete_by_document(tmp_path):
    rng = np.random.default_rng(1)
    index = HybridIndex(tmp_path, DIM)
    index.upsert("a", _chunks("a", ["alpha one", "alpha two", "alpha three"]), _unit(rng, 3))
    index.upsert("b", _chunks("b", ["beta one", "beta two"]), _unit(rng, 2))
    assert (index.count_chunks(), index.count_documents()) == (5, 2)
    assert index.document_chunk_ids("a") == ["a:h1:0", "a:h1:1", "a:h1:2"]

    # replace a with fewer, different chunks
    index.upsert("a", _chunks("a", ["alpha revised"], tag="h2"), _unit(rng, 1))
    assert index.document_chunk_ids("a") == ["a:h2:0"]
    assert index.get_chunks(["a:h1:0", "a:h2:0", "b:h1:1"]) == [
        _chunks("a", ["alpha revised"], tag="h2")[0], _chunks("b", ["beta one", "beta two"])[1]]
    hits = index.search("alpha", _unit(rng, 1)[0], 10, mode="bm25")
    assert [h.chunk.chunk_id for h in hits] == ["a:h2:0"]

    assert index.delete_document("a") == 1
    assert index.delete_document("a") == 0
    assert (index.count_chunks(), index.count_documents()) == (2, 1)
    assert {h.chunk.document_id for h in index.search("alpha beta", _unit(rng, 1)[0], 10)} == {"b"}


def test_re_upsert_leaves_no_duplicates(tmp_path):
    rng = np.random.default_rng(2)
    index = HybridIndex(tmp_path, DIM)
    chunks, vectors = _chunks("a", [f"copper quartz {n}" for n in range(6)]), _unit(rng, 6)
    for _ in range(3):
        index.upsert("a", chunks, vectors)
    assert index.count_chunks() == 6
    hits = index.search("copper", vectors[0], 20)
    assert len(hits) == 6 and len({h.chunk.chunk_id for h in hits}) == 6


def test_a_failed_upsert_leaves_the_previous_chunks(tmp_path):
    rng = np.random.default_rng(3)
    index = HybridIndex(tmp_path, DIM)
    index.upsert("a", _chunks("a", ["first", "second"]), _unit(rng, 2))
    generation = index.generation
    broken = [*_chunks("a", ["new"], tag="h2"), Chunk("a:h2:1", "a", 1, None)]  # type: ignore[arg-type]
    with pytest.raises(Exception, match="NOT NULL"):
        index.upsert("a", broken, _unit(rng, 2))
    assert index.document_chunk_ids("a") == ["a:h1:0", "a:h1:1"]
    assert index.generation == generation


def test_bad_input_is_refused(tmp_path):
    index = HybridIndex(tmp_path, DIM)
    with pytest.raises(ValueError, match="shape"):
        index.upsert("a", _chunks("a", ["x"]), np.zeros((2, DIM), dtype=np.float32))
    with pytest.raises(ValueError, match="other documents"):
        index.upsert("a", _chunks("b", ["x"]), np.ones((1, DIM), dtype=np.float32))
    with pytest.raises(ValueError, match="expected 16"):
        index.search("x", np.zeros(3), 5)
    with pytest.raises(ConfigError, match="384"):
        HybridIndex(tmp_path, 384)


def test_a_new_instance_on_the_same_path_sees_the_data_and_loads_the_segments(tmp_path, caplog):
    rng = np.random.default_rng(4)
    vectors = _unit(rng, 40)
    first = HybridIndex(tmp_path, DIM, background_merges=False)
    for d in range(10):
        first.upsert(f"d{d}", _chunks(f"d{d}", [f"river meadow {d} {n}" for n in range(4)]), vectors[d * 4 : d * 4 + 4])
    expected = first.search("meadow 7", vectors[29], 5)
    assert first.maintain(flush=True)["flushed"][0]["rows"] == 40
    assert len(list((tmp_path / "segments").glob("seg-*/complete"))) == 1

    caplog.set_level(logging.INFO, logger="ragbus.index")
    second = HybridIndex(tmp_path, DIM)
    assert (second.count_chunks(), second.count_documents()) == (40, 10)
    got = second.search("meadow 7", vectors[29], 5)
    assert [(h.chunk, round(h.score, 5)) for h in got] == [(h.chunk, round(h.score, 5)) for h in expected]
    assert any("loaded" in r.getMessage() and "1 on disk, 0 rows in memory" in r.getMessage()
               for r in caplog.records)
    # a write through either instance is seen by the other
    second.delete_document("d7")
    assert not [h for h in first.search("meadow 7", vectors[29], 40) if h.chunk.document_id == "d7"]


def test_exact_and_ann_agree_on_a_synthetic_set(tmp_path):
    rng = np.random.default_rng(5)
    n = 3000
    vectors = _unit(rng, n, 32)
    exact = HybridIndex(tmp_path / "exact", 32)
    ann = HybridIndex(tmp_path / "ann", 32, ann_threshold=100)
    for start in range(0, n, 500):
        chunks = _chunks(f"doc{start}", [f"chunk {i}" for i in range(start, start + 500)])
        exact.upsert(f"doc{start}", chunks, vectors[start : start + 500])
        ann.upsert(f"doc{start}", chunks, vectors[start : start + 500])
    assert ann.snapshot().dense.kind == "hnsw" and exact.snapshot().dense.kind == "exact"
    recalls = []
    for query in _unit(rng, 30, 32):
        a = [h.chunk.chunk_id for h in exact.search("", query, 10, mode="dense")]
        b = [h.chunk.chunk_id for h in ann.search("", query, 10, mode="dense")]
        recalls.append(len(set(a) & set(b)) / 10)
        # the scores reported are exact cosines either way
        top = ann.search("", query, 1, mode="dense")[0]
        assert top.dense_score == pytest.approx(float(vectors[int(top.chunk.text.split()[1])] @ query), abs=1e-5)
    assert np.mean(recalls) >= 0.95
    # and a fresh instance loads the persisted graph
    assert HybridIndex(tmp_path / "ann", 32, ann_threshold=100).snapshot().dense.kind == "hnsw"


def test_bm25_tokens_fold_plurals_and_drop_stop_words():
    assert bm25_tokens("The Glaciers and their policies, Lasers, status!") == ["glacier", "policy", "laser", "status"]


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder()


def test_hybrid_ranks_keyword_only_and_semantic_only_matches_sensibly(tmp_path, embedder):
    keyword_only = "Order XQ7741 left the warehouse in March together with the revised packing list."
    semantic_only = ("Notebook computers get very hot when the cooling fan is clogged with dust, "
                     "and the processor then slows itself down to avoid damage.")
    both = "The XQ7741 laptop overheats under load because its fan curve is too conservative."
    distractors = [
        "The central bank raised interest rates by a quarter point.",
        "The striker scored twice in the second half of the cup final.",
        "Sourdough bread needs a starter and a long, slow fermentation.",
        "Glaciers in the Alps retreated faster than expected last summer.",
        "The orchestra rehearsed the symphony for three weeks before the premiere.",
        "Tomatoes grow best with full sun and regular watering.",
        "The museum reopened its ancient Egypt gallery after renovation.",
        "Satellites in low orbit circle the planet every ninety minutes.",
        "Warehouse staff counted the pallets twice before the audit in March.",
        "Laptop sales rose during the holiday season, retailers reported.",
    ]
    texts = [keyword_only, semantic_only, both, *distractors]
    index = HybridIndex(tmp_path, embedder.dimension)
    for n, text in enumerate(texts):
        index.upsert(f"d{n}", _chunks(f"d{n}", [text]), embedder.embed([text]))

    def ranked(query: str, mode: str) -> list[str]:
        return [h.chunk.text for h in index.search(query, embedder.embed([query])[0], 5, mode=mode)]

    # keywords alone: the code finds its chunks, the paraphrase shares no term
    lexical = ranked("XQ7741 overheating", "bm25")
    assert set(lexical[:2]) == {keyword_only, both} and semantic_only not in lexical
    # meaning alone: the paraphrase is found
    assert semantic_only in ranked("why does my notebook computer get so hot", "dense")[:2]
    # hybrid: the chunk with both first, then both kinds of partial match above the distractors
    hybrid = ranked("XQ7741 laptop overheating", "hybrid")
    assert hybrid[0] == both
    assert keyword_only in hybrid[:4] and semantic_only in hybrid[:4]
    scored = index.search("XQ7741 laptop overheating", embedder.embed(["XQ7741 laptop overheating"])[0], 3)
    assert all(h.dense_score is not None and h.bm25_score is not None for h in scored)
    assert [h.score for h in scored] == sorted((h.score for h in scored), reverse=True)


def test_readers_and_a_writer_in_threads(tmp_path):
    rng = np.random.default_rng(6)
    index = HybridIndex(tmp_path, DIM)
    index.upsert("seed", _chunks("seed", ["seed text harbor"]), _unit(rng, 1))
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            for d in range(30):
                index.upsert(f"w{d}", _chunks(f"w{d}", [f"harbor lantern {d}", f"violet {d}"]), _unit(rng, 2))
                if d % 3 == 0:
                    index.upsert(f"w{d}", _chunks(f"w{d}", [f"harbor replaced {d}"], tag="h2"), _unit(rng, 1))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            done.set()

    def read(seed: int) -> None:
        local = np.random.default_rng(seed)
        try:
            while not done.is_set():
                hits = index.search("harbor lantern", _unit(local, 1)[0], 10)
                ids = [h.chunk.chunk_id for h in hits]
                assert len(ids) == len(set(ids))
                assert all(h.chunk.text for h in hits)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    expected = 1 + sum(1 if d % 3 == 0 else 2 for d in range(30))
    assert index.count_chunks() == expected
    hits = index.search("harbor", _unit(rng, 1)[0], 100, mode="bm25")
    assert len(hits) == 1 + 30  # every w-document has exactly one "harbor" chunk, plus the seed


def test_exact_and_ann_instances_share_one_segment(tmp_path):
    rng = np.random.default_rng(7)
    vectors = _unit(rng, 300)
    exact = HybridIndex(tmp_path, DIM, background_merges=False)
    exact.upsert("a", _chunks("a", [f"ember falcon {n}" for n in range(300)]), vectors)
    expected = [h.chunk.chunk_id for h in exact.search("falcon", vectors[5], 5, mode="dense")]
    exact.maintain(flush=True)
    [folder] = (tmp_path / "segments").glob("seg-*")
    assert (folder / "complete").exists() and not (folder / "hnsw.faiss").exists()
    ann = HybridIndex(tmp_path, DIM, ann_threshold=10)
    assert ann.search("falcon", vectors[5], 5, mode="dense")[0].chunk.chunk_id == expected[0]
    assert (folder / "hnsw.faiss").exists()
    assert HybridIndex(tmp_path, DIM, ann_threshold=10).snapshot().dense.kind == "hnsw"


@pytest.mark.parametrize(("ann_threshold", "one_pass_bytes"), [(10**9, None), (10**9, 0), (100, None)],
                         ids=["exact-per-query", "exact-one-product", "hnsw"])
def test_search_many_answers_as_each_search_would_on_one_snapshot(tmp_path, monkeypatch, ann_threshold,
                                                                   one_pass_bytes):
    if one_pass_bytes is not None:  # as a matrix too large for the cache is searched
        monkeypatch.setattr("shared.adapters.local.dense._ONE_PASS_BYTES", one_pass_bytes)
    rng = np.random.default_rng(9)
    words = ["fusion", "ranking", "vectors", "poller", "feeds", "lease", "retry", "tokens"]
    index = HybridIndex(tmp_path / "index", DIM, ann_threshold=ann_threshold)
    vectors = _unit(rng, 400)
    for start in range(0, 400, 100):
        texts = [" ".join(rng.choice(words, 6)) + f" chunk {i}" for i in range(start, start + 100)]
        index.upsert(f"doc{start}", _chunks(f"doc{start}", texts), vectors[start : start + 100])
    texts = ["fusion ranking", "lease retry", "tokens", "nothing matches this"]
    queries = _unit(rng, len(texts))
    for mode in ("hybrid", "dense", "bm25"):
        together = index.search_many(texts, queries, 7, mode=mode)
        alone = [index.search(t, q, 7, mode=mode) for t, q in zip(texts, queries, strict=True)]
        assert [[h.chunk.chunk_id for h in hits] for hits in together] == [
            [h.chunk.chunk_id for h in hits] for hits in alone]
        for a, b in zip(together, alone, strict=True):
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    # one snapshot for all: a write between two calls of search_many never splits a batch
    generations = []
    real_snapshot = index.snapshot

    def counting_snapshot():
        snap = real_snapshot()
        generations.append(snap.generation)
        return snap

    index.snapshot = counting_snapshot
    index.search_many(texts, queries, 5)
    assert len(generations) == 1
    with pytest.raises(ValueError, match="vector"):
        index.search_many(texts, queries[:2], 5)
    assert index.search_many([], np.zeros((0, DIM)), 5) == []
