"""bench/fit_scorer.py's sentence score (issue 36 item 3): a ranking model over each question's scored sentences,
judged for writers it never saw; a column that means one thing for one writer and the opposite for another weighs 0."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fit_reader  # noqa: E402
import fit_scorer  # noqa: E402

pytestmark = pytest.mark.unit


def _questions(rng, n, flip_sign):
    """``n`` questions of 6 sentences; the right one is likelier where column 0 is high, and column 1 high
    (``flip_sign`` 1) or low (-1); column 2 is noise."""
    out = []
    for _ in range(n):
        x = rng.normal(size=(6, 3))
        z = 2.0 * x[:, 0] + flip_sign * 2.0 * x[:, 1]
        p = np.exp(z - z.max())
        right = np.zeros(6, dtype=bool)
        right[rng.choice(6, p=p / p.sum())] = True
        out.append((x, right))
    return out


def test_the_softmax_learns_what_marks_the_right_sentence():
    rng = np.random.default_rng(3)
    questions = _questions(rng, 400, 1)
    weights = fit_scorer.fit_softmax(questions, l2=1.0)
    assert weights[0] > 1.0 and weights[1] > 1.0 and abs(weights[2]) < 0.3
    held_out = _questions(rng, 200, 1)
    assert fit_scorer.top_right(weights, held_out) > fit_scorer.top_right(np.array([0.0, 0.0, 1.0]), held_out) + 40
    # a question without a right sentence teaches nothing (and no question with one is an error)
    unanswered = [(x, np.zeros(6, dtype=bool)) for x, _ in questions[:50]]
    assert np.allclose(fit_scorer.fit_softmax(questions + unanswered, l2=1.0), weights)
    with pytest.raises(ValueError, match="right sentence"):
        fit_scorer.fit_softmax(unanswered, l2=1.0)


def test_a_column_whose_sign_changes_between_writers_weighs_nothing():
    rng = np.random.default_rng(5)
    questions = _questions(rng, 200, 1) + _questions(rng, 200, 1) + _questions(rng, 200, -1) + _questions(rng, 200, -1)
    writer = np.repeat(["a", "b", "c", "d"], 200)
    weights = fit_scorer.fit_stable_softmax(questions, writer, l2=1.0)
    assert weights[0] > 1.0 and weights[1] == 0.0
    # held out: each writer judged by weights fit on the others only
    fits = fit_scorer.held_out_weights(questions, writer, l2=1.0)
    assert sorted(fits) == ["a", "b", "c", "d"] and all(f[0] > 1.0 for f in fits.values())


def test_a_right_sentence_holds_every_key_and_comes_from_the_questions_file():
    row = {"pool": [{"scored_on": [0.9, 1.0], "keys": True, "own_file": False},  # a neighbour's copy of the value
                    {"scored_on": [0.5, 0.5], "keys": True, "own_file": True},
                    {"scored_on": [0.7, 1.0], "keys": False, "own_file": True}]}
    ((x, right),) = fit_scorer.questions_of([row, {"pool": []}, {}])
    assert x.shape == (3, 2) and right.tolist() == [False, True, False]


def test_fitted_weights_are_scaled_to_the_size_of_those_in_use():
    scaled = fit_scorer.scaled_like(np.array([2.0, -6.0]), np.array([0.5, 0.25, -0.25]))
    assert np.allclose(scaled, [0.25, -0.75])
    assert np.allclose(fit_scorer.scaled_like(np.zeros(2), np.ones(2)), 0.0)


def test_each_answerable_question_says_where_its_keys_were_lost():
    # issue 36: the first stage at which the key strings are lost between the retrieved passages and the answer
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder
    from shared.adapters.local.llm import LocalLanguageModel

    port = ("Configuration\n\nThe frobnicator daemon reads its settings from /etc/frob.conf at start. "
            "It listens on TCP port 7412 by default; the port directive changes it.")
    logs = "Logging\n\nThe daemon writes its log to /var/log/frob.log. Log rotation is handled by logrotate."
    contexts = [{"url": "file:///port.txt", "text": port}, {"url": "file:///logs.txt", "text": logs}]
    llm = LocalLanguageModel(None, OnnxMiniLMEmbedder())

    def stage(question, keys, file="port.txt"):
        row = {"id": "q", "near_miss": False, "keys": keys, "language": "en", "file": file, "question": question,
               "contexts": contexts}
        fit_reader.read_row(row, llm)
        return row["lost_at"]

    asked = "Which TCP port does the frobnicator daemon listen on by default?"
    assert stage(asked, ["7412"]) == "right"
    assert stage(asked, ["7413"]) == "not_in_contexts"
    assert stage(asked, ["logrotate"]) == "other_file_only"  # in the contexts, not in the question's file
    # the keys are in the file, in two sentences the answer never quotes together
    assert stage("Where does the frobnicator daemon write its log?", ["/etc/frob.conf", "7412"]) == "spans_sentences"
    rows = [{"file": "port.txt", "near_miss": False, "lost_at": "right"},
            {"file": "logs.txt", "near_miss": False, "lost_at": "not_first"},
            {"file": "port.txt", "near_miss": False},  # nothing read (no passage kept)
            {"file": "port.txt", "near_miss": True}]
    assert fit_scorer.losses_by_writer(rows, {"port.txt": "a", "logs.txt": "b"}) == {
        "a": {"right": 1, "no_reading": 1}, "b": {"not_first": 1}}
