"""bench/fit_reader.py's verdict fit judged for unseen writers (issue 36): a feature whose weight changes sign
from one writer to another is left out, and ``answered_from`` holds the precision goal for each writer, not
only over all of them."""

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


def test_answered_from_holds_the_precision_for_each_writer():
    # writer a: the top two of five answers right (0.4 precision at 0.5); writer b: all right
    p_right = np.array([0.95, 0.9, 0.7, 0.6, 0.5, 0.9, 0.8, 0.7, 0.6, 0.5])
    right = np.array([1, 1, 0, 0, 0, 1, 1, 1, 1, 1], dtype=bool)
    none = np.zeros(10, dtype=bool)
    groups = np.array(list("aaaaabbbbb"))
    kwargs = {"precision": 0.7, "refused": 0.0}
    pooled, _, _ = fit_reader.choose_thresholds(p_right, np.zeros(10), right, none, none, none, ~none, **kwargs)
    assert pooled == 0.5  # 7 right of 10 over both writers
    each, _, _ = fit_reader.choose_thresholds(p_right, np.zeros(10), right, none, none, none, ~none, groups=groups,
                                              min_answered=2, **kwargs)
    assert each == 0.8  # a: 2 of 2 right from 0.9 up; b: 2 of 2 at 0.8 (from 0.7, a is 2 of 3)


def test_refuse_from_holds_the_refusal_budget_for_each_writer():
    # writer a's answerable questions look like near misses (0.6), writer b's do not: pooled, 1 of 10 answerable
    # refused (0.1) lets 0.6 refuse; for each writer, 1 of a's 5 is 0.2, over its 0.1
    p_near = np.array([0.6, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.7, 0.65])
    near = np.array([0] * 10 + [1, 1], dtype=bool)
    none, groups = np.zeros(12, dtype=bool), np.array(list("aaaaabbbbbab"))
    args = (np.zeros(12), p_near, none, near, none, none, ~none)
    _, pooled, _ = fit_reader.choose_thresholds(*args, precision=0.9, refused=0.1)
    assert pooled == 0.6
    _, each, _ = fit_reader.choose_thresholds(*args, precision=0.9, refused=0.1, groups=groups)
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
