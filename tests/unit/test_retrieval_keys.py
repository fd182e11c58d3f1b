"""bench/retrieval_keys.py (issue 36: where key facts are lost before the reader): the embedding cache it
ingests through, the query path it asks (the transformer's and retriever's own stages), and its figures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from shared.tools.eval.retrieval import CachedEmbedder
from tests.unit.loop_fakes import CORPUS, HashingEmbedder, make_loop

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "retrieval_keys.py"


def _bench():
    spec = importlib.util.spec_from_file_location("retrieval_keys_bench", _BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_cache_embeds_each_text_once_and_a_new_instance_reads_it_back(tmp_path):
    inner = HashingEmbedder()
    cached = CachedEmbedder(inner, tmp_path)
    first = cached.embed(["alpha beta", "gamma", "alpha beta"])
    assert inner.batches == [["alpha beta", "gamma"]] and (cached.hits, cached.misses) == (1, 2)
    cached.save()
    again = CachedEmbedder(HashingEmbedder(), tmp_path)
    second = again.embed(["gamma", "alpha beta"])
    assert again.inner.batches == [] and again.hits == 2
    assert np.array_equal(second, first[[1, 0]])
    assert again.embed([]).shape == (0, inner.dimension)


def test_a_cache_of_the_wrong_shape_is_started_again(tmp_path):
    cached = CachedEmbedder(HashingEmbedder(), tmp_path)
    cached.embed(["one", "two"])
    cached.save()
    keys = next(tmp_path.glob("*.json"))
    keys.write_text('["only one digest"]', encoding="utf-8")
    fresh = CachedEmbedder(HashingEmbedder(), tmp_path)
    fresh.embed(["one"])
    assert fresh.misses == 1


def test_the_contexts_are_the_retriever_stage_s_for_the_transformed_question():
    bench = _bench()
    loop = make_loop(CORPUS, real_local_llm=True)
    query, contexts = bench.retrieve_contexts(loop.deps, "Which keyword ranking function do Lucene and Elasticsearch use?")
    assert query.startswith("Which keyword ranking function do Lucene and Elasticsearch use")
    assert contexts and contexts[0]["document_id"] == CORPUS[1].document_id
    assert len(contexts) <= loop.deps.settings.top_k
    assert all(c["text"].strip() for c in contexts)  # the header-only chunk is dropped, as the stage does


def test_keys_count_within_the_first_k_passages_together_alternatives_allowed():
    bench = _bench()
    row = bench.Retrieved("q", "a", "Which port and which protocol?", "right.html", ("8080", ("TCP", "tcp/ip")), "",
                          ["other.html", "right.html", "right.html"],
                          ["nothing here", "listens on  port\n8080", "speaks TCP/IP"])
    assert not row.keys_within(1) and not row.keys_within(2) and row.keys_within(3)
    assert not row.keys_in_one(3)
    assert not row.file_within(1) and row.file_within(2)
    figs = bench.figures([row])
    assert figs["keys@1"] == 0.0 and figs["keys@3"] == 1.0 and figs["keys_lost@10"] == 0
    assert figs["file@1"] == 0.0 and figs["file@3"] == 1.0


def test_a_held_out_writer_s_questions_are_never_listed():
    bench = _bench()
    rows = [bench.Retrieved("seen-q", "a", "asked by writer a?", "f", ("absent key",), "", ["f"], ["text"]),
            bench.Retrieved("held-q", "d", "asked by writer d?", "g", ("absent key",), "", ["g"], ["text"])]
    listed = bench.missed_rows(rows)
    assert "seen-q" in listed and "held-q" not in listed and "writer d" not in listed
