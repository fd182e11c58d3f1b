"""A German, French or Spanish question's search terms in English, from a shipped lexicon.

The offline default (the packaged all-MiniLM-L6-v2 and BM25) only understands
English, so a question in another language retrieves nothing. The local
language model cannot translate, but a question needs little: its content words
(nouns, verbs, a few adjectives) and its question word. ``lexicon/terms.tsv``
maps those from German, French and Spanish to English for the vocabulary of
retrieval, RAG pipelines, messaging, HTTP and web security (the subjects of the
bundled corpus) and for the words any question uses ("difference", "why",
"avoid"). Articles, pronouns and auxiliaries are dropped; a word the lexicon
lacks (a name, an acronym, a number, a word shared with English) passes
through unchanged.

Matching is by the language's Snowball stem with accents folded, so
"Dokumente", "Dokumenten" and "Dokument" are one entry and a question typed
without accents still matches. Phrases of up to three words are matched
first ("lettre morte", "base de données"); German compounds the lexicon lacks
are split into known parts ("Wiederholungsversuche" -> "retry attempt").

The result is a bag of English search terms in the question's order, not a
sentence ("how saturate BM25 term frequency"): enough for BM25, for the
embedder and for the local grader's term coverage, which is what it is for.
Its limit is the lexicon: a question about a subject outside that vocabulary
keeps its foreign words, and is then refused as it was before.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from shared.query.reading.stemming import stemmer

#: Languages the lexicon translates from; every other language is left as it is.
LEXICON_LANGUAGES = ("de", "fr", "es")
_STEMMERS = {"de": "german", "fr": "french", "es": "spanish"}
_COLUMNS = {"de": 1, "fr": 2, "es": 3}
_DROP = "-"
_MAX_PHRASE = 3
_MIN_COMPOUND_PART = 3

# Numbers ("3.7" whole), words and hyphenated words; apostrophes separate (French elision: "l'index").
_TOKEN = re.compile(r"\d+(?:[.,]\d+)+|[^\W_]+(?:-[^\W_]+)*", re.UNICODE)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).replace("ß", "ss")


@dataclass(frozen=True)
class _Lexicon:
    language: str
    forms: dict[tuple[str, ...], str]  # foreign words as written (lower case) -> English ("-" drops)
    stems: dict[tuple[str, ...], str]  # the same, stemmed and accent-folded
    english_words: frozenset[str]  # every word of the English column, folded

    def key(self, word: str) -> str:
        return _stem_key(self.language, word.lower())

    def get(self, words: Sequence[str]) -> str | None:
        """English for ``words``: the form as written first (stems of unrelated words collide:
        "nächste" and "nach"), then the stem."""
        found = self.forms.get(tuple(w.lower() for w in words))
        return found if found is not None else self.stems.get(tuple(self.key(w) for w in words))


def _stemmer(language: str):
    return stemmer(_STEMMERS[language])  # this thread's: a shared Snowball object is not thread-safe


@functools.lru_cache(maxsize=65536)
def _stem_key(language: str, word: str) -> str:
    # Snowball in pure Python is most of a translation's cost, and compound splitting stems
    # every prefix and suffix of a long word: each (language, word) is stemmed once.
    return _fold(_stemmer(language).stemWord(word))


@functools.cache
def _lexicon(language: str) -> _Lexicon:
    if language not in _COLUMNS:
        raise ValueError(f"no lexicon for language {language!r}; there are {', '.join(LEXICON_LANGUAGES)}")
    text = resources.files("shared.query.reading").joinpath("lexicon/terms.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line.strip() and not line.startswith("#")]
    header, rows = rows[0], rows[1:]
    english_words = frozenset(_fold(w.lower()) for row in rows for w in _TOKEN.findall(row[0]))
    lexicon = _Lexicon(language, {}, {}, english_words)
    if header != ["en", "de", "fr", "es"]:
        raise ValueError(f"lexicon/terms.tsv has the columns {header}, expected en, de, fr, es")
    for number, row in enumerate(rows, start=2):
        if len(row) != 4:
            raise ValueError(f"lexicon/terms.tsv row {number} has {len(row)} columns, expected 4: {row}")
        english = row[0].strip()
        for form in row[_COLUMNS[language]].split("|"):
            words = _TOKEN.findall(form.replace("'", " ").replace("\u2019", " "))
            if not words or len(words) > _MAX_PHRASE:
                continue
            # The first row to claim a form keeps it: rows are ordered general to specific only
            # where that matters ("zu" is "to" before it is "too").
            lexicon.forms.setdefault(tuple(w.lower() for w in words), english)
            lexicon.stems.setdefault(tuple(lexicon.key(w) for w in words), english)
    return lexicon


def _word(lexicon: _Lexicon, word: str, depth: int = 0) -> str | None:
    """English for one word: the lexicon's, its hyphen-separated parts', or a German compound's parts'."""
    found = lexicon.get([word])
    if found is not None:
        return found
    if "-" in word:
        # "HNSW-Index", "sature-t-il": the parts the lexicon knows, the others as written.
        pieces = word.split("-")
        parts = [_word(lexicon, piece, depth) for piece in pieces]
        if all(p is None for p in parts):
            return None
        words = [piece if p is None else p for piece, p in zip(pieces, parts, strict=True)]
        return " ".join(w for w in words if w != _DROP) or _DROP
    if lexicon.language == "de":
        participle = _participle_stem(word.lower())
        if participle:
            found = lexicon.get([participle])
            if found is not None:
                return found
        if depth < 2 and len(word) >= 2 * _MIN_COMPOUND_PART:
            return _compound(lexicon, word, depth)
    return None


# German separable prefixes, before the "ge" of a past participle ("aus-ge-schrieben").
_SEPARABLE = ("ab", "an", "auf", "aus", "ein", "mit", "nach", "vor", "weiter", "zu", "zurück", "über", "um")


def _participle_stem(word: str) -> str | None:
    """A German past participle as the present-tense form the lexicon lists: "geprüft" ->
    "prüft", "weitergegeben" -> "weitergeben"; None for a word that is not shaped like one."""
    if word.startswith("ge") and len(word) >= 6:
        return word[2:]
    for prefix in _SEPARABLE:
        if word.startswith(prefix + "ge") and len(word) >= len(prefix) + 6:
            return prefix + word[len(prefix) + 2:]
    return None


def _compound(lexicon: _Lexicon, word: str, depth: int) -> str | None:
    """A German compound as its known parts, the longest known head first ("Zustellversuche")."""
    lowered = word.lower()
    for cut in range(_MIN_COMPOUND_PART, len(lowered) - _MIN_COMPOUND_PART + 1):
        head, tail = lowered[:cut], lowered[cut:]
        tail_english = _word(lexicon, tail, depth + 1)
        if tail_english in (None, _DROP):
            continue
        # Linking elements: Wiederholung-s-versuch, Dokument-en-sammlung.
        for stem in (head, head[:-1] if head.endswith("s") else None, head[:-2] if head.endswith("en") else None):
            if not stem or len(stem) < _MIN_COMPOUND_PART:
                continue
            head_english = lexicon.get([stem]) or _word(lexicon, stem, depth + 1)
            if head_english not in (None, _DROP):
                return f"{head_english} {tail_english}"
    return None


def english_terms(question: str, language: str) -> str:
    """``question``'s words in English where the lexicon knows them (see the module docstring).

    ``language`` is an ISO 639-1 code; a language without a lexicon (English
    among them) returns ``question`` unchanged.
    """
    if language not in _COLUMNS:
        return question
    lexicon = _lexicon(language)
    words = _TOKEN.findall(question.replace("'", " ").replace("\u2019", " "))
    out: list[str] = []
    n = 0
    while n < len(words):
        for size in range(min(_MAX_PHRASE, len(words) - n), 1, -1):
            english = lexicon.get(words[n:n + size])
            if english is not None:
                if english != _DROP:
                    out.append(english)
                n += size
                break
        else:
            english = _word(lexicon, words[n])
            if english is None:
                out.append(words[n])  # a name, an acronym, a number or a word English shares
            elif english != _DROP:
                out.append(english)
            n += 1
    return " ".join(out)


def lexicon_language(text: str) -> str | None:
    """The lexicon language most of ``text``'s words belong to, or None.

    For short questions the function-word count of :func:`detect_language` cannot
    decide ("Warum braucht man Wiederholungsversuche?" has one German function
    word). A word counts for a language when its lexicon knows it and it is not
    also an English word of the lexicon ("backoff", "index"); a language needs at
    least two such words, more than half of the text's words, and more than any
    other language.
    """
    words = _TOKEN.findall(text.replace("'", " ").replace("\u2019", " "))
    if not words:
        return None
    counts = {}
    for language in LEXICON_LANGUAGES:
        lexicon = _lexicon(language)
        counts[language] = sum(
            1 for w in words
            if _fold(w.lower()) not in lexicon.english_words and _word(lexicon, w) is not None
        )
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    best, count = ranked[0]
    if count >= 2 and count * 2 > len(words) and count > ranked[1][1]:
        return best
    return None
