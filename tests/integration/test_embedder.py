"""The real MiniLM embedder: shape, normalisation, quality sanity, token spans, threads, and its
optimised graph cached (the same vectors)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from shared.adapters.local.embedder import OnnxMiniLMEmbedder, _tokenizer_path
from shared.adapters.local.graph_cache import GRAPH, MANIFEST, WEIGHTS, file_digests
from shared.contract.ports import Embedder


@pytest.fixture(scope="module")
def embedder() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder()


def test_implements_the_port(embedder):
    assert isinstance(embedder, Embedder)
    assert (embedder.model_name, embedder.dimension, embedder.max_tokens) == ("all-MiniLM-L6-v2", 384, 254)
    assert _tokenizer_path().name == "tokenizer.json"


def test_vectors_are_unit_float32_rows(embedder):
    vectors = embedder.embed(["a short one", "a much longer sentence " * 20, ""])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 384)


def test_related_sentences_score_clearly_higher_than_unrelated(embedder):
    a, b, c, d = embedder.embed([
        "The volcano erupted and lava flowed down the mountain.",
        "Molten rock poured from the erupting volcano.",
        "The central bank raised interest rates to fight inflation.",
        "The volcano erupted and lava flowed down the mountain.",
    ])
    related, unrelated = float(a @ b), float(a @ c)
    assert related > 0.5 and unrelated < 0.2 and related - unrelated > 0.35
    assert float(a @ d) == pytest.approx(1.0, abs=1e-5)


def test_a_question_finds_its_answer_among_distractors(embedder):
    passages = [
        "Interest rates were raised by a quarter point at the central bank's meeting.",
        "The striker scored twice in the second half to win the cup final.",
        "Graphics processors run thousands of threads in parallel, which suits matrix multiplication.",
        "Sourdough needs a starter culture and a long, slow fermentation.",
    ]
    query, *rows = embedder.embed(["Why are GPUs good at linear algebra?", *passages])
    scores = np.array(rows) @ query
    assert int(np.argmax(scores)) == 2 and scores[2] - np.delete(scores, 2).max() > 0.15


def test_batch_order_and_padding_do_not_change_a_text_vector(embedder):
    texts = ["short", "a sentence of medium length about glaciers", "word " * 300, "another text"]
    together = embedder.embed(texts)
    for text, row in zip(texts, together, strict=True):
        assert np.allclose(embedder.embed([text])[0], row, atol=1e-4)


def test_text_beyond_the_window_is_truncated_not_refused(embedder):
    long = "glacier " * 600
    assert len(embedder.token_spans(long)) == 600  # spans see everything
    head = " ".join(["glacier"] * 254)
    assert float(embedder.embed([long])[0] @ embedder.embed([head])[0]) > 0.999


def test_token_spans_are_character_offsets_of_content_tokens(embedder):
    text = "Tokenization of Café prices: 4€."
    spans = embedder.token_spans(text)
    pieces = [text[s:e] for s, e in spans]
    assert pieces[0] == "Token" and pieces[1] == "ization"
    assert "Café" in pieces and pieces[-1] == "."
    assert all(0 <= s < e <= len(text) for s, e in spans)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)


def test_threads_share_one_embedder(embedder):
    texts = [f"sentence number {n} about copper and quartz" for n in range(12)]
    expected = embedder.embed(texts)
    with ThreadPoolExecutor(4) as pool:
        rows = list(pool.map(lambda t: embedder.embed([t])[0], texts))
    assert np.allclose(np.array(rows), expected, atol=1e-4)


def test_batches_keep_padding_small_and_cover_every_text():
    embedder = OnnxMiniLMEmbedder(batch_size=4)
    lengths = [246, 242, 145, 10, 11, 250, 12, 12, 12, 12, 12, 140]
    batches = embedder._batches(lengths)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        widths = [lengths[i] for i in batch]
        assert len(batch) <= 4
        if max(widths) > 32:  # short texts are padded freely (see the next test)
            assert 1 - sum(widths) / (max(widths) * len(widths)) <= 0.10
    assert [sorted(lengths[i] for i in b) for b in batches if 145 in [lengths[i] for i in b]] == [[140, 145]]


def test_a_question_and_its_sub_queries_are_embedded_in_one_run():
    embedder = OnnxMiniLMEmbedder()
    # token counts of a rewritten query and five sub-queries: split by the 10% rule, they took two runs
    assert embedder._batches([11, 9, 10, 11, 12, 10]) == [[1, 2, 5, 0, 3, 4]]
    assert len(embedder._batches([9, 30, 60])) == 2  # beyond 32 tokens padding counts again


def test_a_batch_of_long_texts_is_bounded_by_its_attention_memory():
    # ONNX Runtime's memory follows the largest run: 32 full chunks took the ingesting process past
    # 1 GB on a 1,000-page PDF (issue 31); a run is bounded by texts x padded length^2, not texts
    embedder = OnnxMiniLMEmbedder()
    full = embedder._batches([256] * 40)
    assert [len(b) for b in full] == [8] * 5
    assert [len(b) for b in embedder._batches([180] * 40)] == [16, 16, 8]
    # a question's runs and the reader's sentences' are unchanged: 32 texts of up to 128 tokens
    assert [len(b) for b in embedder._batches([20] * 40)] == [32, 8]
    assert [len(b) for b in embedder._batches([128] * 40)] == [32, 8]


def test_the_cached_optimised_graph_gives_the_uncached_vectors(embedder, tmp_path):
    # (a damaged, stale or unwritable cache: tests/unit/test_graph_cache.py)
    texts = ["The volcano erupted and lava flowed down the mountain.", "a much longer sentence " * 40, "x"]
    expected = embedder.embed(texts)  # optimised in memory, as without a cache
    built = OnnxMiniLMEmbedder(cache_dir=tmp_path)
    assert np.array_equal(built.embed(texts), expected)
    (entry,) = tmp_path.iterdir()
    assert {p.name for p in entry.iterdir()} == {GRAPH, WEIGHTS, MANIFEST}
    assert file_digests(entry / WEIGHTS) == json.loads((entry / MANIFEST).read_text())["files"][WEIGHTS]
    loaded = OnnxMiniLMEmbedder(cache_dir=tmp_path)
    assert np.array_equal(loaded.embed(texts), expected)
    assert loaded._session.get_session_options().graph_optimization_level.name == "ORT_DISABLE_ALL"
    assert loaded.token_spans("Café prices") == embedder.token_spans("Café prices")
