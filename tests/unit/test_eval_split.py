"""The calibration / held-out split of the evaluation set: decided by the case id alone,
disjoint, covering, and the same from run to run (thresholds fit on one half are
reported on the other, so a case must never change sides)."""

from __future__ import annotations

import pytest

from shared.contract.errors import ConfigError
from shared.tools.eval.dataset import (
    CALIBRATION,
    HELDOUT,
    EvalQuery,
    EvalSet,
    Passage,
    calibration_cases,
    heldout_cases,
    split_of,
)


def _query(qid: str, mode: str = "trustworthy") -> EvalQuery:
    own = frozenset({f"p-{qid}"})
    return EvalQuery(qid, f"question {qid}?", frozenset() if mode == "abstain" else own, mode, "cat", own)


def _evalset(n: int = 400) -> EvalSet:
    queries = [_query(f"t1_case_{i:04d}") for i in range(n)]
    abstain = [_query(f"t1_abstain_{i:04d}", "abstain") for i in range(n // 2)]
    passages = [Passage(f"p-{q.query_id}", f"text of {q.query_id}") for q in (*queries, *abstain)]
    return EvalSet("test", passages, queries, abstain)


def test_a_case_keeps_its_split_across_versions_of_the_code():
    # Pinned: fitz-gov 4.1.0 case ids and the sides the documented rule puts them on.
    # If this fails, every published held-out figure silently changed population.
    assert [split_of(i) for i in ("t1_dispute_hard_001", "t1_dispute_hard_002", "t1_dispute_hard_003",
                                  "t1_abstain_hard_001", "t1_abstain_hard_003")] == [
        CALIBRATION, HELDOUT, HELDOUT, CALIBRATION, HELDOUT]


def test_the_splits_are_disjoint_and_cover_the_set():
    full = _evalset()
    cal, held = calibration_cases(full), heldout_cases(full)
    for attr in ("queries", "abstain"):
        a = {q.query_id for q in getattr(cal, attr)}
        b = {q.query_id for q in getattr(held, attr)}
        assert a and b and not a & b
        assert a | b == {q.query_id for q in getattr(full, attr)}
    assert all(split_of(q.query_id) == CALIBRATION for q in (*cal.queries, *cal.abstain))
    assert (cal.split_name, held.split_name, full.split("all") is full) == (CALIBRATION, HELDOUT, True)


def test_about_half_the_cases_fall_on_each_side():
    held = heldout_cases(_evalset(2000))
    assert 900 <= len(held.queries) <= 1100


def test_a_split_keeps_the_corpus_and_its_cache_key():
    full = _evalset()
    for part in (calibration_cases(full), heldout_cases(full)):
        assert part.passages == full.passages and part.key == full.key


def test_the_split_of_a_slice_is_the_slice_of_the_split():
    full = _evalset()
    sliced = full.slice(100).split(HELDOUT)
    assert [q.query_id for q in sliced.queries] == [q.query_id for q in heldout_cases(full).queries
                                                    if q in full.queries[:100]]


def test_an_unknown_split_is_a_clear_error():
    with pytest.raises(ConfigError, match="unknown split 'test'.*calibration, heldout"):
        _evalset().split("test")
