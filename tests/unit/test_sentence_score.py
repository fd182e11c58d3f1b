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


def test_the_reader_scores_each_embedded_sentence_with_the_shipped_weights():
    embedder = OnnxMiniLMEmbedder()
    question = "Which TCP port does the frobnicator daemon listen on by default?"
    passages = ("Configuration\n\nThe frobnicator daemon reads its settings from /etc/frob.conf at start. "
                "It listens on TCP port 7412 by default; the port directive changes it.",
                "Logging\n\nThe daemon writes its log to /var/log/frob.log. Log rotation is handled by logrotate.")
    contexts = [NumberedContext(number=n, source=f"file:///doc{n}.txt", text=t) for n, t in enumerate(passages, 1)]
    q = embedder.embed([question])[0]
    closeness = embedder.embed(list(passages)) @ q
    seen = []
    extractive_answer(question, contexts, context_similarity={n: float(s) for n, s in enumerate(closeness, 1)},
                      names=question_names(question), value_check=states_value, question_vector=q,
                      sentence_embed=embedder.embed, fact_check=sentence_states,
                      observe=lambda features, answer, reader: seen.append(reader))
    (reader,) = seen
    assert reader.scored_on.shape == (len(reader.pool), len(SCORED_ON))
    assert np.allclose(reader.relevance[reader.pool], reader.scored_on @ shipped_sentence_score().vector())
    assert "7412" in reader.quoted_text(reader.ranked[0])
