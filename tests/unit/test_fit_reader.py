"""bench/fit_reader.py's verdict fit judged for unseen writers (issue 36): a feature whose weight changes sign
from one writer to another is left out, and ``answered_from`` holds the precision goal with a margin, over all
writers and for each writer, not only on the edge."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fit_reader  # noqa: E402

pytestmark = pytest.mark.unit


def test_a_feature_whose_sign_changes_between_writers_weighs_nothing():
    rng = np.random.default_rng(7)
    n = 300
    writer = np.repeat([0, 1, 2, 3], n)
    general = rng.normal(size=4 * n)  # means the same for every writer
    local = rng.normal(size=4 * n)  # says "right" for writers 0 and 1, "wrong" for writers 2 and 3
    z = 2.0 * general + np.where(writer < 2, 2.0, -2.0) * local
    y = (rng.random(4 * n) < 1 / (1 + np.exp(-z))).astype(float)
    x = np.column_stack([general, local])
    mean, scale, weights, _ = fit_reader.fit_stable(x, y, writer, l2=1.0)
    assert weights[0] > 0.5 and weights[1] == 0.0 and (mean[1], scale[1]) == (0.0, 1.0)
    # one group: nothing to compare, every feature kept
    assert fit_reader.fit_stable(x, y, np.zeros(4 * n), l2=1.0)[2][1] != 0.0


def _choose(p_right, right, checked, groups=None, **goals):
    none = np.zeros(len(right), dtype=bool)
    return fit_reader.choose_thresholds(p_right, np.zeros(len(right)), right, none, none, ~none, checked,
                                        precision=0.9, refused=0.0, groups=groups, **goals)


def test_answered_from_holds_the_precision_with_a_margin_for_each_writer():
    # writer a: 40 answers, the four least likely wrong: 36 of 40 (0.90) is the goal's edge, which a new writer's
    # answers fall under as often as not (issue 36: writer a 0.907 held out, the sealed part 0.882); writer b: 100
    # answers, all right
    p_right = np.concatenate([np.linspace(0.99, 0.60, 40), np.linspace(0.99, 0.60, 100)])
    right = np.ones(140, dtype=bool)
    right[36:40] = False
    a, checked = np.arange(140) < 40, np.ones(140, dtype=bool)
    groups = np.where(a, "a", "b")
    # over both writers 136 of 140 hold the Wilson bound (0.929): the edge passes when writers are pooled
    assert _choose(p_right, right, checked)[0] == 0.6
    # for each writer: a's 36 of 40 counting one more wrong is 36/41 < 0.9; 36 of 39 (36/40) is the lowest that holds
    assert p_right[39] < _choose(p_right, right, checked, groups)[0] <= p_right[38]
    goals = {"precision": 0.9, "group_precision": 0.9}
    assert not fit_reader.holds_with_margin(checked, right, [a, ~a], **goals)
    assert fit_reader.holds_with_margin(p_right >= p_right[38], right, [a, ~a], **goals)
    # a writer with few answers, none wrong, holds whatever the goal (7 of 7; counting one more wrong, 7/8 < 0.95)
    few = np.arange(140) < 7
    assert fit_reader.holds_with_margin(few | ~a, right | few, [few, ~a], precision=0.9, group_precision=0.95)
    # and the pooled bound: 96 of 100 answered is a precision of 0.96 whose bound (0.902) holds; 76 of 80 (0.878) not
    assert fit_reader.holds_with_margin(np.arange(140) >= 40, right | (np.arange(140) >= 136), [], **goals)
    assert not fit_reader.holds_with_margin(np.arange(140) >= 60, np.arange(140) >= 64, [], **goals)


def test_open_questions_are_answered_only_where_their_own_precision_holds():
    # 60 value questions all right, 20 open questions 17 right: pooled they would pass (77 of 80), apart they
    # do not (a Wilson bound of 0.64), so no open answer rides on the value answers' precision
    p_right = np.full(80, 0.95)
    right, checked = np.ones(80, dtype=bool), np.arange(80) < 60
    right[[60, 65, 70]] = False
    answered_from, open_from, _ = _choose(p_right, right, checked)
    assert answered_from == 0.95 and open_from == 1.0
    assert _choose(p_right, np.ones(80, dtype=bool), np.ones(80, dtype=bool))[1] == 1.0  # none open: none answered


def test_the_wilson_interval():
    assert fit_reader.wilson(0, 0) == (0.0, 1.0)
    low, high = fit_reader.wilson(39, 43)  # writer a held out at e2b8f81: 0.907 on the edge
    assert 0.77 < low < 0.80 and 0.96 < high < 0.97
    assert fit_reader.wilson(35, 35)[0] > 0.90 > fit_reader.wilson(34, 34)[0]  # none wrong: 35 answers for 0.90


def test_refuse_from_holds_the_refusal_budget_for_each_writer():
    # writer a's answerable questions look like near misses (0.6), writer b's do not: pooled, 1 of 10 answerable
    # refused (0.1) lets 0.6 refuse; for each writer, 1 of a's 5 is 0.2, over its 0.1
    p_near = np.array([0.6, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.7, 0.65])
    near = np.array([0] * 10 + [1, 1], dtype=bool)
    none, groups = np.zeros(12, dtype=bool), np.array(list("aaaaabbbbbab"))
    args = (np.zeros(12), p_near, none, near, none, ~none, ~none)
    _, _, pooled = fit_reader.choose_thresholds(*args, precision=0.9, refused=0.1)
    assert pooled == 0.6
    _, _, each = fit_reader.choose_thresholds(*args, precision=0.9, refused=0.1, groups=groups)
    assert each == 0.65  # a's answerable question at 0.6 is no longer refused; both near misses still are


def test_a_row_is_read_again_from_its_kept_passages():
    # --reread: the passages the collecting run kept are read again by this checkout's reader, nothing retrieved
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder
    from shared.adapters.local.llm import LocalLanguageModel

    port = ("Configuration\n\nThe frobnicator daemon reads its settings from /etc/frob.conf at start. "
            "It listens on TCP port 7412 by default; the port directive changes it.")
    logs = "Logging\n\nThe daemon writes its log to /var/log/frob.log. Log rotation is handled by logrotate."
    row = {"id": "q", "near_miss": False, "keys": ["7412"], "language": "en", "file": "port.txt",
           "question": "Which TCP port does the frobnicator daemon listen on by default?",
           "contexts": [{"url": "file:///port.txt", "text": port, "document_id": "d1"},
                        {"url": "file:///logs.txt", "text": logs, "document_id": "d2"}]}
    fit_reader.read_row(row, LocalLanguageModel(None, OnnxMiniLMEmbedder()))
    assert row["keys_in_answer"] and row["cited_files"] == ["port.txt"] and row["features"]["states_value"] == 1.0
    # each scored sentence: what it was scored on, whether it holds every key, whether it is from the question's file
    holding = [p for p in row["pool"] if p["keys"]]
    assert holding and all(p["own_file"] for p in holding) and not all(p["own_file"] for p in row["pool"])
    fit_reader.label_rows([row])
    assert row["right"]
    empty = {**row, "contexts": []}
    fit_reader.read_row(empty, None)
    assert empty["features"] is None and not empty["keys_in_answer"]
