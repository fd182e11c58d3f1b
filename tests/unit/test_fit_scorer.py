"""bench/fit_scorer.py's sentence score (issue 36 item 3): a ranking model over each question's scored sentences,
judged for writers it never saw; a column that means one thing for one writer and the opposite for another weighs 0."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from shared.contract.ports import NumberedContext

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fit_reader  # noqa: E402
import fit_scorer  # noqa: E402

from tests.unit.loop_fakes import bag_of_words

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


@pytest.mark.parametrize("keys, passage, stage", [
    # the keys in one passage of the file, sentences apart, and never in a quotable sentence
    (["7412", "logrotate"], "Frob listens on TCP port 7412. " + "The weather report for the coast says rain again. " * 3
     + "Log rotation is done by logrotate.", "spread_in_passage"),
    (["7412"], "Is the TCP port of the frobnicator daemon 7412 or not?", "not_quotable"),
    # the 41st quotable sentence of a passage (the reader screens 40 of each)
    (["7412"], "A filler sentence that says nothing of note here. " * 40 + "Frob listens on TCP port 7412.",
     "candidate_cap"),
    # leans back on a sentence that cannot be quoted (a question)
    (["7412"], "Why does the frobnicator daemon need a TCP port?\n\nIt listens there on 7412.",
     "leans_on_nothing"),
    # holds no term of the question, from a passage far from it: never embedded
    (["7412"], "Seventy-four twelve: 7412 it is, said Bob once.", "outside_pool"),
])
def test_each_stage_where_the_keys_are_lost_is_told_apart(keys, passage, stage):
    # issue 36: lost_at's stages past "other_file_only" (the test above reads the first four through the local model)
    from shared.query.reading import extractive

    asked = "Which TCP port does the frobnicator daemon listen on by default?"
    related = "The frobnicator daemon is a small TCP server. The frobnicator daemon listens on a port by default."
    contexts = [NumberedContext(number=1, source="file:///port.txt", text=passage),
                NumberedContext(number=2, source="file:///other.txt", text=related)]
    seen = []
    extractive.extractive_answer(asked, contexts, question_vector=bag_of_words([asked])[0],
                                 sentence_embed=bag_of_words, context_similarity={1: 0.0, 2: 0.7},
                                 verdict=fit_reader.NEUTRAL, observe=lambda _, __, reader: seen.append(reader))
    file_of = {1: "port.txt", 2: "other.txt"}
    assert fit_reader.lost_at(seen[-1], keys, "port.txt", file_of, right=False) == stage


def test_keys_in_the_pool_but_not_its_lead_are_lost_as_not_first_and_a_right_lead_as_composed_wrong():
    from shared.query.reading import extractive

    asked = "Which TCP port does the frobnicator daemon listen on by default?"
    passage = ("The frobnicator daemon listens on a TCP port by default, which the frobnicator daemon opens at start. "
               "Messages go to the system journal. The shipped configuration file sets 7412.")
    seen = []
    extractive.extractive_answer(asked, [NumberedContext(number=1, source="file:///port.txt", text=passage)],
                                 question_vector=bag_of_words([asked])[0], sentence_embed=bag_of_words,
                                 context_similarity={1: 0.7}, verdict=fit_reader.NEUTRAL,
                                 observe=lambda _, __, reader: seen.append(reader))
    reader = seen[-1]
    assert fit_reader.lost_at(reader, ["7412"], "port.txt", {1: "port.txt"}, right=False) == "not_first"
    assert fit_reader.lost_at(reader, ["frobnicator"], "port.txt", {1: "port.txt"}, right=False) == "composed_wrong"
    assert fit_reader.lost_at(reader, ["frobnicator"], "port.txt", {1: "port.txt"}, right=True) == "right"


def test_where_the_first_sentence_holding_the_keys_ranks_and_what_ranks_first_instead():
    # issue 36: the keys are in the pool but another sentence opens the answer; scored on (cosine, states)
    states = fit_scorer.SCORED_ON.index("states")

    def sentence(score, keys=False, own=True, stated=False):
        columns = [0.0] * len(fit_scorer.SCORED_ON)
        columns[0], columns[states] = score, float(stated)
        return {"scored_on": columns, "keys": keys, "own_file": own}

    weights = np.zeros(len(fit_scorer.SCORED_ON))
    weights[0] = 1.0
    rows = [{"file": "x", "near_miss": False, "lost_at": "right", "pool": [sentence(0.2), sentence(0.9, keys=True)]},
            {"file": "x", "near_miss": False, "lost_at": "not_first",
             "pool": [sentence(0.5, keys=True), sentence(0.9), sentence(0.7)]},  # below a restatement of the subject
            {"file": "x", "near_miss": False, "lost_at": "not_first",
             "pool": [sentence(0.9, stated=True), *(sentence(0.8) for _ in range(3)), sentence(0.1, keys=True)]},
            {"file": "y", "near_miss": False, "lost_at": "not_first",  # another file's copy of the value ranks first
             "pool": [sentence(0.9, keys=True, own=False), sentence(0.3, keys=True)]},
            {"file": "y", "near_miss": False, "lost_at": "outside_pool", "pool": [sentence(0.9)]},
            {"file": "y", "near_miss": False, "lost_at": "spans_sentences", "pool": [sentence(0.9)]},
            {"file": "y", "near_miss": False, "lost_at": "not_in_contexts", "pool": [sentence(0.9)]},  # not counted
            {"file": "y", "near_miss": True, "pool": []}]
    ranks = fit_scorer.key_ranks_by_writer(rows, {"x": "a", "y": "b"}, {"a": weights, "b": weights})
    assert ranks["a"] == {"rank": {"first": 1, "second_third": 1, "lower": 1, "outside_pool": 0, "no_sentence": 0},
                          "instead": {"other_file": 0, "states_other_value": 1, "restates_subject": 1}}
    assert ranks["b"]["rank"] == {"first": 0, "second_third": 1, "lower": 0, "outside_pool": 1, "no_sentence": 1}
    assert ranks["b"]["instead"]["other_file"] == 1
    # a writer without weights (left out) is not counted
    assert list(fit_scorer.key_ranks_by_writer(rows, {"x": "a", "y": "b"}, {"a": weights})) == ["a"]
