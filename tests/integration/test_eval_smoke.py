"""Smoke test of the fitz-gov evaluation on a fixed slice (real embedder, real HybridIndex).

The slice is the first 60 answerable queries and the first 30 abstain cases of
fitz-gov 4.1.0's core tier, over a corpus of exactly their contexts. The expected
figures were measured once with this code (all-MiniLM-L6-v2 int8, bm25s); a change
in retrieval, fusion, tokenisation or the embedder moves them, and this test says by
how much. The full evaluation runs with `make eval` / `bench/eval_quality.py`.
"""

from __future__ import annotations

import pytest

fitz_gov = pytest.importorskip("fitz_gov", reason="fitz-gov is not installed: pip install fitz-gov==4.1.0")

from shared.adapters.local.embedder import OnnxMiniLMEmbedder  # noqa: E402
from shared.tools.eval.dataset import build_fitz_gov  # noqa: E402
from shared.tools.eval.metrics import (  # noqa: E402
    element_coverage,
    ndcg_at_k,
    reciprocal_rank,
    roc_curve,
    youden_threshold,
)
from shared.tools.eval.pipeline import FULL, run_pipeline  # noqa: E402
from shared.tools.eval.quality import answer_quality, calibration  # noqa: E402
from shared.tools.eval.retrieval import (  # noqa: E402
    embed_cached,
    fill_index,
    open_index,
    retrieval_rows,
    texts_key,
)

SLICE = 60

# Measured once (see the module docstring); nDCG@10, recall@10, MRR per configuration.
EXPECTED = {
    "dense": (0.844, 0.9, 0.908),
    "bm25 (HybridIndex: title + text, plurals folded)": (0.661, 0.688, 0.785),
    "rrf k=60 (dense + HybridIndex bm25)": (0.787, 0.829, 0.847),
    # bm25s's tied scores in passage order since its top-k ordered them by the CPU (0.63/0.753 and 0.781/0.829 before)
    "bm25s (own tokenizer, English stop words)": (0.629, 0.661, 0.751),
    "rrf k=60 (dense + bm25s own tokenizer)": (0.785, 0.829, 0.846),
    "hybrid (dense_weight 0.7) [default]": (0.824, 0.875, 0.875),
    "dense, passages < 100 chars dropped (as the retriever does)": (0.363, 0.344, 0.454),
}


@pytest.fixture(scope="module")
def evalset():
    return build_fitz_gov().slice(SLICE)


@pytest.fixture(scope="module")
def embedder():
    return OnnxMiniLMEmbedder()


@pytest.fixture(scope="module")
def index_path(evalset, embedder, tmp_path_factory):
    path = tmp_path_factory.mktemp("eval-index")
    vectors = embed_cached([p.text for p in evalset.passages], embedder, None, evalset.key)
    index = open_index(path, embedder.dimension)
    assert fill_index(index, evalset, vectors) is True
    assert fill_index(index, evalset, vectors) is False  # already holds exactly these passages
    index.close()
    return path


def test_the_full_set_has_the_specified_size():
    full = build_fitz_gov()
    assert (len(full.passages), len(full.queries), len(full.abstain)) == (5899, 2235, 685)
    assert all(q.relevant for q in full.queries) and not any(q.relevant for q in full.abstain)


def test_metrics_by_hand():
    assert ndcg_at_k(["a", "x", "b"], {"a", "b"}) == pytest.approx((1 + 1 / 2) / (1 + 1 / 1.5849625007211563))
    assert reciprocal_rank(["x", "y", "a"], {"a"}) == pytest.approx(1 / 3)
    assert element_coverage(["Not specified", "contact sales"], "The price is not specified.") == 0.5
    curve = roc_curve([0.9, 0.8, 0.3, 0.1], [True, False, True, False])
    assert curve["auc"] == pytest.approx(0.75)
    assert youden_threshold(curve)["threshold"] == pytest.approx(0.3)  # J=0.5 at 0.9 and 0.3: the lower wins


def test_retrieval_figures_on_the_fixed_slice(evalset, embedder, index_path):
    assert (len(evalset.passages), len(evalset.queries), len(evalset.abstain)) == (307, SLICE, SLICE // 2)
    texts = [q.text for q in evalset.queries]
    vectors = embed_cached(texts, embedder, None, "queries-" + texts_key(texts))
    runs = {r.name: r for r in retrieval_rows(index_path, evalset, vectors, dimension=embedder.dimension,
                                              weights=(0.7,))}
    measured = {name: tuple(round(runs[name].metrics[m], 3) for m in ("ndcg@10", "recall@10", "mrr"))
                for name in EXPECTED}
    assert measured == EXPECTED


def test_the_pipeline_answers_every_slice_query_through_the_runtime(evalset, embedder, index_path, tmp_path):
    queries, abstain = evalset.queries[:12], evalset.abstain[:6]
    ran = run_pipeline(queries, FULL, home=tmp_path / "a", index_path=index_path, embedder=embedder,
                       dimension=embedder.dimension, concurrency=1)
    ran_abstain = run_pipeline(abstain, FULL, home=tmp_path / "b", index_path=index_path, embedder=embedder,
                               dimension=embedder.dimension, concurrency=1)
    assert ran.errors == [] and ran_abstain.errors == []
    assert len(ran.results) == len(queries)
    assert all(r.status == "answered" and r.first_grade is not None for r in ran.results)
    # Every answered query's citations point at passages of its own ranking.
    for r in ran.results:
        assert set(r.cited) <= set(r.ranking)
    quality = answer_quality(ran.results, ran_abstain.results, [*queries, *abstain])
    assert quality["answerable_cases"] == 12 and quality["abstain_cases"] == 6
    assert 0.0 <= quality["abstention_accuracy"] <= 1.0
    cal = calibration(ran.results, ran_abstain.results, [*queries, *abstain])
    assert cal["cases"] == 18 and cal["negatives"] >= 6
