"""The reader's sentence score (issue 36 item 3): weights learned by bench/fit_scorer.py, shipped in a file that is
loaded and checked like the verdict's; the reader scores each sentence it embeds with them. The passages are
written for these tests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shared.adapters.local.embedder import OnnxMiniLMEmbedder
from shared.contract.errors import ConfigError
from shared.contract.ports import NumberedContext
from shared.query.reading.answer_types import question_names, sentence_states, states_value
from shared.query.reading.extractive import extractive_answer
from shared.query.reading.sentence_score import SCORED_ON, SentenceScore, shipped_sentence_score

pytestmark = pytest.mark.unit


def test_the_shipped_score_loads_and_a_damaged_one_is_refused():
    score = shipped_sentence_score()
    assert len(score.weights) == len(SCORED_ON) and all(np.isfinite(score.weights))
    data = score.to_json()
    assert SentenceScore.from_json(json.loads(json.dumps(data))).weights == score.weights
    for damage, message in ((lambda d: d.update(columns=["cosine"]), "fit on columns"),
                            (lambda d: d.update(score_version=0), "fit on columns"),
                            (lambda d: d.update(weights=[1e999] * len(SCORED_ON)), "not a finite number"),
                            (lambda d: d.update(weights=[0.5]), "one number per feature"),
                            (lambda d: d.update(weights=None), "one number per feature"),
                            (lambda d: d.update(fitted=[1]), "'fitted' is not an object")):
        broken = json.loads(json.dumps(data))
        damage(broken)
        with pytest.raises(ConfigError, match=message):
            SentenceScore.from_json(broken)
    with pytest.raises(ConfigError, match="not the score's object"):
        SentenceScore.from_json([1, 2])


def _reader(question: str, *passages: str):
    embedder = OnnxMiniLMEmbedder()
    contexts = [NumberedContext(number=n, source=f"file:///doc{n}.txt", text=t) for n, t in enumerate(passages, 1)]
    q = embedder.embed([question])[0]
    closeness = embedder.embed(list(passages)) @ q
    seen = []
    extractive_answer(question, contexts, context_similarity={n: float(s) for n, s in enumerate(closeness, 1)},
                      names=question_names(question), value_check=states_value, question_vector=q,
                      sentence_embed=embedder.embed, fact_check=sentence_states,
                      observe=lambda features, answer, reader: seen.append(reader))
    return seen[-1]


def test_the_reader_scores_each_embedded_sentence_with_the_shipped_weights():
    reader = _reader("Which TCP port does the frobnicator daemon listen on by default?",
                     "Configuration\n\nThe frobnicator daemon reads its settings from /etc/frob.conf at start. "
                     "It listens on TCP port 7412 by default; the port directive changes it.",
                     "Logging\n\nThe daemon writes its log to /var/log/frob.log. Log rotation is handled by logrotate.")
    assert reader.scored_on.shape == (len(reader.pool), len(SCORED_ON))
    assert np.allclose(reader.relevance[reader.pool], reader.scored_on @ shipped_sentence_score().vector())
    assert "7412" in reader.quoted_text(reader.ranked[0])


def test_the_sentence_stating_the_value_is_told_from_the_one_before_it_restating_the_subject():
    # issue 36: the first sentence restates the asked subject, the next states the value without repeating it
    reader = _reader("Which error are the deferred jobs of the quarn scheduler rejected with when they are cancelled?",
                     "Deferred jobs\n\nThe quarn scheduler can cancel its deferred jobs with a cancellation token. "
                     "On cancellation the returned handles are rejected with a CancelledJob error.")
    restating, stating = (next(i for i in reader.usable if reader.candidates[i].text.startswith(opening))
                          for opening in ("The quarn", "On cancellation"))
    # the sentence before it names the subject it states the value of
    assert reader.column["before"][stating] > 0.3 and reader.column["before"][restating] == 0.0
    assert reader.ranked[0] == stating
    # a table's row or a list's item does not lean on its sibling before it
    rows = _reader("Which pstree option shows the command line arguments?",
                   "| Option | Effect |\n|---|---|\n| -p | show the PID of each process after its name |\n"
                   "| -a | show the command line arguments |\n")
    assert all(rows.candidates[i].item for i in rows.usable) and not rows.column["before"].any()
