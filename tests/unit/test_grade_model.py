"""The local grader's calibrated model (issue 11.1): fitting, the shipped coefficients, stale files
refused loudly, and grades that follow the model and say why they are low.

The near-miss examples are written for these tests, not taken from fitz-gov."""

from __future__ import annotations

import json
import re
from datetime import date

import numpy as np
import pytest

from shared.adapters.local.grade_model import (
    FEATURE_VERSION,
    FEATURES,
    GradeModel,
    fit_logistic,
    shipped_model,
)
from shared.adapters.local.llm import LocalLanguageModel
from shared.contract.errors import ConfigError
from shared.contract.ports import NumberedContext
from tests.unit.loop_fakes import CORPUS, HashingEmbedder, MemoryIndex, stating_verdict

PRICE_QUESTION = "How much does the Larkspur Pro licence cost?"
LARKSPUR = [
    "The Larkspur Pro licence adds offline sync and priority support to the Larkspur editor.",
    "Larkspur Pro is sold to teams through the vendor's partner network in Europe and Asia.",
]
LARKSPUR_PRICE = "The Larkspur Pro licence costs $240 per seat per year."


def _contexts(*texts):
    return [NumberedContext(number=n, source=f"s{n}", text=t) for n, t in enumerate(texts, start=1)]


def _llm(model: GradeModel | None = None) -> LocalLanguageModel:
    embedder = HashingEmbedder()
    return LocalLanguageModel(index=MemoryIndex(embedder, CORPUS), embedder=embedder, grade_model=model,
                              verdict_model=stating_verdict())


def _model(weights: dict[str, float], *, threshold: float = 0.5, intercept: float = 0.0) -> GradeModel:
    w = np.array([weights.get(f, 0.0) for f in FEATURES])
    return GradeModel(FEATURES, np.zeros(len(FEATURES)), np.ones(len(FEATURES)), w, intercept, threshold)


def test_fit_logistic_separates_what_can_be_separated_and_ignores_noise():
    rng = np.random.default_rng(3)
    signal = rng.normal(size=600)
    noise = rng.normal(size=600)
    labels = signal + 0.3 * rng.normal(size=600) > 0
    mean, scale, weights, intercept = fit_logistic(np.column_stack([signal, noise, np.ones(600)]), labels, l2=1.0)
    assert weights[0] > 2.0 and abs(weights[1]) < 0.3 and weights[2] == 0.0  # a constant column weighs nothing
    p = 1 / (1 + np.exp(-(intercept + ((np.column_stack([signal, noise, np.ones(600)]) - mean) / scale) @ weights)))
    assert np.mean((p > 0.5) == labels) > 0.9
    with pytest.raises(ValueError, match="both classes"):
        fit_logistic(np.ones((4, 2)), [True] * 4)


def test_the_shipped_model_matches_the_measured_features_and_learned_sensible_directions():
    model = shipped_model()
    assert model.features == FEATURES and 0.0 < model.answerable_from < 1.0
    weight = dict(zip(model.features, model.weights, strict=True))
    # Whatever a refit finds for the correlated coverage figures, these directions are what the evidence means.
    assert weight["sim_max"] > 0 and weight["near_miss"] < 0 and weight["year_missing"] < 0
    assert weight["names_missing"] < 0
    assert model.fitted["split"] == "calibration"


def test_a_model_fit_on_other_features_is_refused_with_the_way_to_refit(tmp_path):
    data = shipped_model().to_json()
    stale = dict(data, features=[*data["features"][:-1], "a_feature_no_longer_measured"])
    with pytest.raises(ConfigError, match="bench/fit_grader.py"):
        GradeModel.from_json(stale)
    with pytest.raises(ConfigError, match="feature version"):
        GradeModel.from_json(dict(data, feature_version=FEATURE_VERSION + 1))
    with pytest.raises(ConfigError, match="wrong length"):
        GradeModel.from_json(dict(data, weights=data["weights"][:-1]))
    path = tmp_path / "model.json"
    GradeModel.from_json(data).save(path)
    assert GradeModel.from_json(json.loads(path.read_text())).to_json() == data


def test_the_grade_score_is_the_models_probability_and_its_threshold_decides_answerable():
    contexts = _contexts(*LARKSPUR, LARKSPUR_PRICE)
    evidence = _llm().evidence(PRICE_QUESTION, contexts)
    assert set(evidence.features) == set(FEATURES)
    trusting = _model({"sim_max": 1.0}, threshold=0.01, intercept=2.0)
    grade = _llm(trusting).grade(PRICE_QUESTION, contexts)
    assert grade.score == round(trusting.probability(evidence.features), 4) and grade.answerable
    doubting = _model({"sim_max": 1.0}, threshold=0.99, intercept=-2.0)
    refused = _llm(doubting).grade(PRICE_QUESTION, _contexts(*LARKSPUR))
    assert not refused.answerable and refused.score < 0.2
    # Issues 20 and 36: below the threshold, the question stays answerable when the reader's verdict does not
    # refuse what it would quote (here: a sentence states the price; the threshold was fit on fitz-gov and
    # refused real questions); the score stays the model's probability.
    kept = _llm(doubting).grade(PRICE_QUESTION, contexts)
    assert kept.answerable and kept.score < 0.2 and "the reader's verdict finds what it would quote likely right" in kept.reasoning


def test_a_near_miss_grades_below_the_answer_and_the_reasoning_says_why():
    miss = _llm().grade(PRICE_QUESTION, _contexts(*LARKSPUR))
    hit = _llm().grade(PRICE_QUESTION, _contexts(*LARKSPUR, LARKSPUR_PRICE))
    assert hit.score > miss.score
    assert "no sentence states the asked amount" in miss.reasoning
    assert miss.reasoning.startswith(f"answer probability {miss.score:.2f}")
    evidence = _llm().evidence(PRICE_QUESTION, _contexts(*LARKSPUR))
    assert evidence.features["near_miss"] == 1.0 and evidence.features["support_sentences"] == 0.0
    # The model's concern is phrased for a person, not as a feature name.
    strict = _model({"near_miss": -3.0}, threshold=0.3)
    assert "no sentence holds the asked value" in _llm(strict).grade(PRICE_QUESTION, _contexts(*LARKSPUR)).reasoning


def test_a_year_the_question_states_and_no_context_does_counts_against_answering():
    question = "What did the Larkspur editor cost in 2019?"
    evidence = _llm().evidence(question, _contexts(*LARKSPUR, LARKSPUR_PRICE))
    assert evidence.features["year_missing"] == 1.0
    dated = _llm().evidence(question, _contexts(*LARKSPUR, "In 2019 the Larkspur editor cost $180 per seat."))
    assert dated.features["year_missing"] == 0.0
    assert _llm().evidence("What is the current price of Larkspur Pro?", _contexts(*LARKSPUR)).features[
        "asks_current"] == 1.0


def test_a_missing_or_stale_shipped_model_stops_grading_but_not_transforming_or_answering(tmp_path, monkeypatch):
    import shared.adapters.local.grade_model as grade_model

    stale = shipped_model().to_json()
    stale["features"] = stale["features"][::-1]
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    for path, message in ((tmp_path / "absent.json", "cannot be read"), (tmp_path / "stale.json", "fit_grader")):
        monkeypatch.setattr(grade_model, "MODEL_FILE", path)
        grade_model.shipped_model.cache_clear()
        try:
            llm = _llm()  # built: only grading reads the file
            assert llm.transform(PRICE_QUESTION, today=date(2026, 1, 5)).rewritten
            assert llm.synthesize(PRICE_QUESTION, _contexts(LARKSPUR_PRICE), language="en").text
            for contexts in (_contexts(*LARKSPUR), _contexts("   ")):  # with usable context text or without
                with pytest.raises(ConfigError, match=message):
                    llm.grade(PRICE_QUESTION, contexts)
        finally:
            grade_model.shipped_model.cache_clear()
    monkeypatch.undo()
    llm = _llm()
    assert llm.grade(PRICE_QUESTION, _contexts(*LARKSPUR)).score >= 0  # the real file again
    assert llm.grade_model is shipped_model()


class WordCountingIndex(MemoryIndex):
    """The fake index counting chunks that hold a word as written (plurals folded), as the real index's BM25
    vocabulary does: "searched" is not "search" to it."""

    def document_frequency(self, terms):
        words = [{w.lower().removesuffix("s") for w in c.text.replace(".", " ").replace(",", " ").split()}
                 for c in self.chunks]
        return {t: sum(t.lower().removesuffix("s") in s for s in words) for t in terms}


DELIVERY = "Duplicate delivery comes from redelivery after a lost acknowledgement, so consumers must be idempotent."


def _counting_llm() -> LocalLanguageModel:
    from tests.unit.loop_fakes import chunk

    embedder = HashingEmbedder()
    corpus = [chunk(0, "delivery", DELIVERY), chunk(1, "search", "Hybrid search merges keyword and vector rankings.")]
    return LocalLanguageModel(index=WordCountingIndex(embedder, corpus), embedder=embedder)


def test_an_inflection_the_contexts_hold_is_not_a_term_the_corpus_lacks():
    llm = _counting_llm()
    # "merging" is in no chunk as written, but the context holds its stem ("merges"): the corpus has the word.
    inflected = llm.evidence("How are rankings merging in hybrid search?", _contexts(
        "Hybrid search merges keyword and vector rankings."))
    assert inflected.features["absent_share"] == 0.0 and "merging" not in inflected.absent
    lacking = llm.evidence("How are tungsten rankings merged in hybrid search?", _contexts(
        "Hybrid search merges keyword and vector rankings."))
    assert lacking.absent == ["tungsten"] and lacking.features["absent_share"] > 0.0


def test_a_word_a_foreign_question_kept_untranslated_does_not_count_against_the_corpus():
    llm = _counting_llm()
    # The lexicon has no entry for "kommen": the German question is searched as "where kommen duplicate delivery".
    german = llm.evidence("Woher kommen doppelte Zustellungen?", _contexts(DELIVERY))
    assert "kommen" in german.absent and german.features["absent_share"] == 0.0
    english = llm.evidence("Where do duplicate deliveries kommen from?", _contexts(DELIVERY))
    assert "kommen" in english.absent and english.features["absent_share"] > 0.0


def _hostile(data: dict, **changes) -> str:
    """The shipped model's JSON text with ``changes`` written in as raw JSON (NaN and Infinity included,
    which Python's json module reads)."""
    text = json.dumps({k: v for k, v in data.items() if k not in changes})
    return text[:-1] + "".join(f', "{k}": {v}' for k, v in changes.items()) + "}"


@pytest.mark.parametrize("changes", [
    {"intercept": "NaN"}, {"intercept": "Infinity"}, {"intercept": '"1.3"'}, {"intercept": "true"},
    {"answerable_from": '"0.4"'}, {"weights": json.dumps([True] * len(FEATURES))},
    {"weights": json.dumps(["1"] * len(FEATURES))}, {"mean": json.dumps([None] * len(FEATURES))},
    {"scale": json.dumps([1e-320] * len(FEATURES))}, {"features": "5"}, {"features": "[1, 2]"},
    {"features": json.dumps(list(range(100_000)))}, {"fitted": '"abc"'}, {"fitted": "5"},
])
def test_a_hostile_model_file_is_refused_with_the_way_to_refit_never_read_as_numbers(changes):
    text = _hostile(shipped_model().to_json(), **changes)
    with pytest.raises(ConfigError, match="bench/fit_grader.py") as refused:
        GradeModel.from_json(json.loads(text), source="grade_model.json")
    assert len(str(refused.value)) < 2000  # a huge feature list is not echoed whole


@pytest.mark.parametrize("content", [b"[1, 2, 3]", b'"a model"', b"\xff\xfe\x00 not text", b"null"])
def test_a_model_file_that_is_not_a_json_object_is_refused_with_the_way_to_refit(tmp_path, monkeypatch, content):
    import shared.adapters.local.grade_model as grade_model

    path = tmp_path / "grade_model.json"
    path.write_bytes(content)
    monkeypatch.setattr(grade_model, "MODEL_FILE", path)
    grade_model.shipped_model.cache_clear()
    try:
        with pytest.raises(ConfigError, match="fit_grader"):
            grade_model.shipped_model()
    finally:
        grade_model.shipped_model.cache_clear()


def test_weights_too_large_for_a_finite_probability_are_an_error_not_a_nan_grade():
    huge = _model({f: 1e308 for f in FEATURES})
    with pytest.raises(ConfigError, match="fit_grader"):
        huge.probability({f: 3.0 if n % 2 else -3.0 for n, f in enumerate(FEATURES)})


def test_the_reasoning_says_coverage_counts_only_the_terms_the_corpus_uses_when_it_left_some_out():
    llm = _counting_llm()
    context = _contexts("Hybrid search merges keyword and vector rankings.")
    lacking = llm.grade("How are tungsten rankings merged in hybrid search?", context).reasoning
    assert "question terms the corpus uses covered" in lacking and "not in the corpus: tungsten" in lacking
    plain = llm.grade("How are rankings merged in hybrid search?", context).reasoning
    assert "question terms covered" in plain and "not in the corpus" not in plain


def test_a_question_with_nothing_to_check_is_not_said_to_abstain_below_the_threshold():
    # "what's new today?" has no content terms: answerable whatever the probability, and the
    # reasoning says so instead of naming a threshold that was not applied
    refusing = _model({}, threshold=0.99, intercept=-3.0)
    grade = _llm(refusing).grade("what's new today?", _contexts(*LARKSPUR))
    assert grade.answerable and grade.score < 0.99
    assert "abstains below" not in grade.reasoning and "no content terms" in grade.reasoning, grade.reasoning
    assert "abstains below 0.99" in _llm(refusing).grade(PRICE_QUESTION, _contexts(*LARKSPUR)).reasoning


def test_the_reasoning_shows_the_probability_and_the_threshold_apart_as_the_decision_reads():
    # issue 36 item 5: "answer probability 0.42 (abstains below 0.42)": two numbers rounded alike beside a decision
    for threshold in (0.5003, 0.4997):
        grade = _llm(_model({}, threshold=threshold)).grade(PRICE_QUESTION, _contexts(*LARKSPUR))
        shown = re.search(r"answer probability ([0-9.]+) \(abstains below ([0-9.]+)\)", grade.reasoning)
        assert shown, grade.reasoning
        assert shown.group(1) != shown.group(2)
        assert (float(shown.group(1)) < float(shown.group(2))) == (threshold > 0.5), grade.reasoning


def test_sentence_coverage_reads_each_passage_once_and_leaves_the_passage_cache_to_passages():
    from shared.query.reading.extractive import (
        _term_set,
        sentence_term_sets,
        split_sentences,
        term_set,
    )

    passage = ("Hybrid search merges keyword and vector rankings. Each ranking is cut at ten. "
               "The merged list keeps the best score of each chunk.")
    assert sentence_term_sets(passage) == tuple(frozenset(term_set(s)) for s in split_sentences(passage))
    llm = _counting_llm()
    sentence_term_sets.cache_clear()
    _term_set.cache_clear()
    for _ in range(2):
        evidence = llm.evidence("How are rankings merged in hybrid search?", _contexts(passage))
    assert evidence.features["coverage_sentence"] == 1.0
    assert sentence_term_sets.cache_info().hits >= 1  # the second grade read the passage's sentences from the cache
    cached = _term_set.cache_info().currsize
    assert cached <= 2, f"{cached} entries: sentences went into the passage cache"
