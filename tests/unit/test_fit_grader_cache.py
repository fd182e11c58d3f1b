"""bench/fit_grader.py's cache of first-iteration contexts is keyed on what the contexts depend on: a changed
retrieval setting, pipeline switch, embedder or line of retrieval code misses it instead of reusing stale
contexts."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fit_grader  # noqa: E402

CONTEXTS = {"q1": [{"chunk_id": "p1:0", "document_id": "p1"}], "q2": []}


def _key(settings=None, config=fit_grader.FIRST_ITERATION, code="c0de", embedder="all-MiniLM-L6-v2"):
    settings = settings or fit_grader.pipeline_settings(Path("."), config)
    return fit_grader.contexts_key("fitzgov-abc", "calibration", settings=settings, config=config,
                                   embedder=embedder, code=code)


def test_the_same_key_hits_and_a_changed_retrieval_setting_misses(tmp_path):
    key = _key()
    path = fit_grader.store_contexts(tmp_path, key, CONTEXTS)
    assert path.name.startswith("fit-grader-first-contexts-fitzgov-abc-calibration-")
    assert fit_grader.cached_contexts(tmp_path, _key(), {"q1", "q2"}) == CONTEXTS
    settings = fit_grader.pipeline_settings(Path("."), fit_grader.FIRST_ITERATION)
    for changed in (settings.with_(top_k=5), settings.with_(max_sub_queries=3)):
        other = _key(settings=changed)
        assert fit_grader.contexts_cache_path(tmp_path, other) != path
        assert fit_grader.cached_contexts(tmp_path, other, {"q1"}) is None


@pytest.mark.parametrize("change", [
    {"config": replace(fit_grader.FIRST_ITERATION, dense_weight=1.0)},  # the hybrid weight
    {"config": replace(fit_grader.FIRST_ITERATION, decompose=False)},
    {"code": "0ther"},
    {"embedder": "another-model"},
])
def test_a_changed_pipeline_code_or_embedder_misses(tmp_path, change):
    fit_grader.store_contexts(tmp_path, _key(), CONTEXTS)
    assert fit_grader.cached_contexts(tmp_path, _key(**change), {"q1"}) is None


def test_a_cache_without_every_question_or_in_the_old_format_misses(tmp_path):
    key = _key()
    fit_grader.store_contexts(tmp_path, key, CONTEXTS)
    assert fit_grader.cached_contexts(tmp_path, key, {"q1", "q3"}) is None
    fit_grader.contexts_cache_path(tmp_path, key).write_text(json.dumps(CONTEXTS))  # {query id: contexts}
    assert fit_grader.cached_contexts(tmp_path, key, {"q1"}) is None


def test_the_code_fingerprint_changes_with_any_source_file_and_ignores_compiled_caches(tmp_path):
    (tmp_path / "services" / "retriever" / "__pycache__").mkdir(parents=True)
    handler = tmp_path / "services" / "retriever" / "handler.py"
    handler.write_text("TOP = 10\n")
    (tmp_path / "index.py").write_text("WEIGHT = 0.7\n")
    sources = ("services/retriever", "index.py")
    before = fit_grader.code_fingerprint(tmp_path, sources)
    (tmp_path / "services" / "retriever" / "__pycache__" / "handler.cpython-311.pyc").write_bytes(b"\0")
    assert fit_grader.code_fingerprint(tmp_path, sources) == before
    handler.write_text("TOP = 20\n")
    assert fit_grader.code_fingerprint(tmp_path, sources) != before
    with pytest.raises(FileNotFoundError, match="CONTEXT_SOURCES"):
        fit_grader.code_fingerprint(tmp_path, ("services/transformer",))


def test_the_listed_sources_exist_and_include_the_retrieval_code():
    assert {"services/transformer", "services/retriever", "shared/query",
            "shared/adapters/local/index.py"} <= set(fit_grader.CONTEXT_SOURCES)
    assert len(fit_grader.code_fingerprint()) == 16


def test_the_threshold_refuses_at_most_the_allowed_share():
    import numpy as np

    probabilities = np.array([0.9, 0.2, 0.5, 0.7, 0.3, 0.8, 0.6, 0.4, 0.95, 0.1])
    assert fit_grader.refusing_at_most(probabilities, 0.0) == 0.1  # refuses none (p < 0.1)
    assert fit_grader.refusing_at_most(probabilities, 0.2) == 0.3  # refuses 0.1 and 0.2: two of ten
    assert fit_grader.refusing_at_most(probabilities, 0.25) == 0.3  # not a third
    assert fit_grader.refusing_at_most(probabilities, 1.0) == 0.95
