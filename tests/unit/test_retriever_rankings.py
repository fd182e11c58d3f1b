"""The retriever's rankings beside the question's hybrid search (issue 36: key facts lost before the reader):
the chunk BM25 alone ranks first, and a German, French or Spanish question searched in its own words, leading
when the corpus is written in them. Scripted index: each (text, mode) returns the hits written for the test."""

from __future__ import annotations

from shared.contract.ports import ScoredChunk
from shared.query.reading.language import in_english
from tests.unit.loop_fakes import chunk, make_loop

DISTRACTORS = [chunk(n, f"Release notes {n}", f"Release {n} fixed a crash in the pager and sped up searching. "
                     "Options were renamed for clarity.", doc=f"news{n}") for n in range(1, 13)]
DATED = chunk(30, "grep NEWS", "Noteworthy changes in release 3.7 (2021-08-14) [stable]", doc="grep")
FRENCH = chunk(31, "FAQ Debian", "Les paquets Debian se divisent en deux sortes : les paquets binaires et les paquets "
                                 "sources.", doc="faq-fr")
FRENCH_QUESTION = "Quelles sont les deux sortes de paquets Debian ?"


class ScriptedIndex:
    """``hits[(text, mode)]`` (else ``hits[(None, mode)]``): the chunks a search returns, best first;
    ``frequencies``: what document_frequency answers (None: the index cannot tell)."""

    def __init__(self, hits, frequencies=None):
        self.hits, self.searches = hits, []
        if frequencies is not None:
            self.document_frequency = lambda terms: {t: frequencies.get(t, 0) for t in terms}

    def search(self, text, vector, k, mode="hybrid"):
        self.searches.append((text, mode))
        found = self.hits.get((text, mode), self.hits.get((None, mode), []))
        return [ScoredChunk(c, 1.0 - n / 100) for n, c in enumerate(found[:k])]


def _contexts(question, index, top_k=10):
    """The contexts of ``question`` rewritten as the offline model rewrites it (a French question: its English
    search terms), and the searches made."""
    loop = make_loop()
    loop.deps.override("index", index)
    loop.submit(question, top_k=top_k)
    loop.deliver(loop.transformed(in_english(question)[1]))
    return [c["chunk_id"] for c in loop.record()["iterations"][0]["contexts"]], index.searches


def test_a_chunk_the_questions_words_rank_first_is_among_the_contexts_though_its_cosine_ranks_it_lower():
    question = "When was grep 3.7 released?"
    index = ScriptedIndex({(None, "hybrid"): DISTRACTORS, (None, "bm25"): [DATED, *DISTRACTORS[:3]]})
    contexts, searches = _contexts(question, index)
    assert (question, "bm25") in searches
    assert DATED.chunk_id in contexts and len(contexts) == 10
    # the hybrid search's own first half still opens the contexts, in its order
    assert contexts[:5] == [c.chunk_id for c in DISTRACTORS[:5]]


def test_a_question_in_french_is_searched_in_its_own_words_too():
    english_only = ScriptedIndex({(FRENCH_QUESTION, "hybrid"): [FRENCH], (None, "hybrid"): DISTRACTORS})
    contexts, searches = _contexts(FRENCH_QUESTION, english_only)
    assert (FRENCH_QUESTION, "hybrid") in searches
    assert FRENCH.chunk_id in contexts  # fused, though its English terms lead (the index cannot count terms)
    assert contexts[0] == DISTRACTORS[0].chunk_id


def test_its_own_words_lead_when_the_corpus_holds_most_of_the_words_the_translation_replaced():
    hits = {(FRENCH_QUESTION, "hybrid"): [FRENCH], (None, "hybrid"): DISTRACTORS}
    french = {w: 3 for w in ("quelles", "sont", "les", "deux", "sortes", "de")}
    contexts, searches = _contexts(FRENCH_QUESTION, ScriptedIndex(hits, frequencies=french))
    assert contexts[0] == FRENCH.chunk_id
    assert searches[-1] == (FRENCH_QUESTION, "bm25")  # the leading query's words are the BM25 ranking's
    # an English corpus holds none of them: the English terms lead
    contexts, searches = _contexts(FRENCH_QUESTION, ScriptedIndex(hits, frequencies={}))
    assert contexts[0] == DISTRACTORS[0].chunk_id and FRENCH.chunk_id in contexts
    assert searches[-1][1] == "bm25" and searches[-1][0] != FRENCH_QUESTION


def test_an_english_question_is_searched_once_in_its_words():
    index = ScriptedIndex({(None, "hybrid"): DISTRACTORS})
    _, searches = _contexts("Which options were renamed?", index)
    assert searches == [("Which options were renamed?", "hybrid"), ("Which options were renamed?", "bm25")]
