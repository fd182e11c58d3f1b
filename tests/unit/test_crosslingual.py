"""Questions in other languages (issue 11.3): a German, French or Spanish question is put into
English search terms by the shipped lexicon, retrieves, grades and answers from English text, and
the loop's own sentences (abstention, caveat) come in the question's language."""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from shared.adapters.local.llm import LocalLanguageModel
from shared.contract.messages import QuerySubmitted
from shared.contract.ports import NumberedContext
from shared.query.reading import translation
from shared.query.reading.language import detect_language, in_english, is_note, phrase
from shared.query.reading.translation import LEXICON_LANGUAGES, english_terms, lexicon_table
from tests.unit.loop_fakes import CORPUS, HashingEmbedder, MemoryIndex, make_loop

TODAY = date(2026, 11, 1)

# The same three questions in each language; none shares a content word with the corpus
# except through translation (no acronym, no name).
DENSE = {
    "de": "Wie findet die dichte Suche Textstellen über Vektoren?",
    "fr": "Comment la recherche dense trouve-t-elle des passages avec des vecteurs ?",
    "es": "¿Cómo encuentra la búsqueda densa pasajes mediante vectores?",
}
FUSION = {
    "de": "Wie kombiniert die reziproke Rangfusion Ranglisten?",
    "fr": "Comment la fusion des rangs réciproques combine-t-elle les listes classées ?",
    "es": "¿Cómo combina la fusión recíproca de rangos las listas?",
}
OFF_TOPIC = {
    "de": "Was ist der Siedepunkt von Wolfram?",
    "fr": "Quel est le point d'ébullition du tungstène ?",
    "es": "¿Cuál es el punto de ebullición del wolframio?",
}


def _model():
    embedder = HashingEmbedder()
    index = MemoryIndex(embedder, CORPUS)
    return LocalLanguageModel(index=index, embedder=embedder), index, embedder


def _contexts(*texts):
    return [NumberedContext(number=n, source=f"s{n}", text=t) for n, t in enumerate(texts, start=1)]


@pytest.mark.unit
@pytest.mark.parametrize(("language", "question", "english"), [
    ("de", "Wie sättigt BM25 die Termfrequenz?", "how saturate BM25 term frequency"),
    ("fr", "Comment BM25 sature-t-il la fréquence des termes ?", "how BM25 saturate term frequency"),
    ("es", "¿Cómo satura BM25 la frecuencia de términos?", "how saturate BM25 term frequency"),
    # phrases, elision, compounds and a question typed without accents
    ("fr", "Qu'est-ce qu'une lettre morte ?", "what dead letter"),
    ("de", "Warum braucht man Wiederholungsversuche?", "why need retry attempt"),
    ("es", "Que es la fusion reciproca de rangos", "what fusion reciprocal rank"),
    # a German past participle the lexicon lists only in the present tense
    ("de", "Wann wird der Feed gelesen?", "when feed read"),
])
def test_a_question_is_put_into_english_search_terms(language, question, english):
    assert in_english(question) == (language, english)


@pytest.mark.unit
@pytest.mark.parametrize("question", ["Exponential backoff jitter", "BM25 saturation", "HNSW index parameters",
                                      "dead letter topic", "Kafka consumer rebalancing"])
def test_english_keywords_shared_with_the_lexicon_stay_english(question):
    assert in_english(question) == ("en", question)


@pytest.mark.unit
@pytest.mark.parametrize(("question", "language"), [
    # function words alone scored these Italian ("il" of "doit-il") and Portuguese ("a", "que")
    ("À quelles adresses un client de récupération doit-il refuser de se connecter ?", "fr"),
    ("¿A qué direcciones debería negarse a conectarse un cliente de descarga?", "es"),
    # while Portuguese and Italian questions stay what they are
    ("Como o BM25 satura a frequência dos termos?", "pt"),
    ("Qual è la differenza tra la ricerca densa e BM25?", "it"),
])
def test_the_lexicon_settles_near_ties_between_romance_languages(question, language):
    assert detect_language(question) == language


@pytest.mark.unit
def test_english_and_languages_without_a_lexicon_pass_unchanged():
    assert english_terms("How does BM25 saturate term frequency?", "en") == \
        "How does BM25 saturate term frequency?"
    assert english_terms("Come funziona BM25?", "it") == "Come funziona BM25?"
    assert set(LEXICON_LANGUAGES) == {"de", "fr", "es"}


@pytest.mark.unit
def test_a_malformed_lexicon_table_fails_naming_the_file_and_line(monkeypatch, tmp_path):
    (tmp_path / "lexicon").mkdir()
    (tmp_path / "lexicon" / "t.tsv").write_text("# a comment\nkey\ttext\n\nok\tyes\nbad\tone\ttoo many\n")
    monkeypatch.setattr(translation.resources, "files", lambda package: tmp_path)
    with pytest.raises(ValueError, match=r"lexicon/t.tsv line 5 has 3 columns, expected 2"):
        lexicon_table("t.tsv", ("key", "text"))
    with pytest.raises(ValueError, match=r"lexicon/t.tsv has the columns \['key', 'text'\], expected key, language"):
        lexicon_table("t.tsv", ("key", "language"))
    (tmp_path / "lexicon" / "t.tsv").write_text("key\ttext\nok\tyes\n")
    assert lexicon_table("t.tsv", ("key", "text")) == [["ok", "yes"]]


@pytest.mark.unit
def test_words_outside_the_lexicon_names_and_numbers_pass_through():
    assert english_terms("Was kostet Kafka 3.7 bei Confluent?", "de") == "what cost Kafka 3.7 bei Confluent"
    # an option is a name too, dash and all (it was "c", which no sentence naming "-c" holds)
    assert english_terms("Was bewirkt die Option -c von pgrep?", "de") == "what do Option -c from pgrep"
    assert english_terms("Quelles options ne fonctionnent pas avec --revert ?", "fr").endswith("--revert")


@pytest.mark.unit
@pytest.mark.parametrize("language", ["de", "fr", "es"])
def test_a_foreign_question_retrieves_the_english_chunk_that_answers_it(language):
    llm, index, embedder = _model()
    for question, title in ((DENSE[language], "Dense retrieval"), (FUSION[language], "Reciprocal rank fusion")):
        rewritten = llm.transform(question, today=TODAY).rewritten
        hits = index.search(rewritten, embedder.embed([rewritten])[0], 3)
        assert hits[0].chunk.title == title, (question, rewritten, [h.chunk.title for h in hits])
        # Without the translation the question shares nothing with the corpus.
        raw = index.search(question, embedder.embed([question])[0], 3)
        assert not raw or raw[0].chunk.title != title or raw[0].score < hits[0].score


@pytest.mark.unit
@pytest.mark.parametrize("language", ["de", "fr", "es"])
def test_a_foreign_question_is_graded_on_its_english_terms(language):
    llm, _, _ = _model()
    related = _contexts(CORPUS[2].text, CORPUS[1].text)
    grade = llm.grade(DENSE[language], related)
    english = llm.grade(english_terms(DENSE[language], language), related)
    assert grade == english and grade.answerable
    assert not llm.grade(OFF_TOPIC[language], _contexts(CORPUS[3].text)).answerable


@pytest.mark.unit
@pytest.mark.parametrize("language", ["de", "fr", "es"])
def test_the_extractive_answer_quotes_english_and_abstains_in_the_question_language(language):
    llm, _, _ = _model()
    answer = llm.synthesize(DENSE[language], _contexts(CORPUS[2].text, CORPUS[3].text), language=language)
    assert not answer.abstained and answer.language == language
    assert "Dense retrieval encodes queries" in answer.text
    refused = llm.synthesize(OFF_TOPIC[language], _contexts(CORPUS[3].text), language=language)
    assert refused.abstained and refused.text == phrase("abstain", language)


@pytest.mark.unit
@pytest.mark.parametrize("language", ["de", "fr", "es"])
def test_the_whole_loop_answers_a_foreign_question_from_english_text(language):
    loop = make_loop(CORPUS, real_local_llm=True)
    loop.submit(DENSE[language])
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert record["outcome"] in {"answered", "answered_with_caveat"}, record["events"]
    assert record["language"] == language
    assert record["citations"][0]["url"] == CORPUS[2].url
    if record["outcome"] == "answered_with_caveat":  # a note in the question's language, what the reader found
        note = record["answer"].split("\n\n")[0]
        assert is_note(note) and note.split()[0] == phrase("caveat", language).split()[0], note


@pytest.mark.unit
@pytest.mark.parametrize("language", ["de", "fr", "es"])
def test_the_whole_loop_refuses_an_off_topic_foreign_question_in_its_language(language):
    loop = make_loop(CORPUS, real_local_llm=True)
    loop.submit(OFF_TOPIC[language])
    loop.pump(QuerySubmitted(query_id="q1"))
    record = loop.record()
    assert record["outcome"] == "not_answerable" and record["answer"] == phrase("abstain", language)


@pytest.mark.unit
def test_model_providers_are_asked_for_english_queries_and_an_answer_in_the_question_language():
    from shared.contract.ports import RefineRequest
    from shared.query.prompts import refine_prompt, synthesis_prompt, transform_prompt

    question = "Wie sättigt BM25 die Termfrequenz?"
    assert "in English even when the question is in another language" in \
        transform_prompt(question, today=TODAY, max_sub_queries=3)
    assert "Write the query in English" in refine_prompt(
        RefineRequest(original_query=question, previous_query=question, reasoning="", missing_aspects=[]),
        today=TODAY)
    assert "Write the sentences in German." in synthesis_prompt(question, [], language="de")


@pytest.mark.unit
def test_each_lexicon_table_is_read_once_when_the_reader_is_imported():
    # answer_words.tsv was parsed at import by answer_types and again by extractive (for its opposites)
    script = """
import importlib, pkgutil
from shared.query.reading import translation
read, real = [], translation.lexicon_table
translation.lexicon_table = lambda name, columns: read.append(name) or real(name, columns)
import shared.query.reading as reading
for module in pkgutil.iter_modules(reading.__path__):
    importlib.import_module(f"shared.query.reading.{module.name}")
print(" ".join(read))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    read = done.stdout.split()
    assert done.returncode == 0 and "answer_words.tsv" in read, done.stderr
    assert sorted(read) == sorted(set(read))
