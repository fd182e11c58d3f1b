"""A German, French or Spanish question's search terms in English, from a shipped lexicon.

The offline default (the packaged all-MiniLM-L6-v2 and BM25) only understands English, and the local language
model cannot translate; but a question needs little: its content words and its question word. ``lexicon/terms.tsv``
maps those to English for the bundled corpus's subjects and for the words any question uses ("difference", "why").
Articles, pronouns and auxiliaries are dropped; a word the lexicon lacks (a name, an acronym, a number, a word
shared with English) passes through unchanged. Words match by their Snowball stem with accents folded, phrases of
up to three words first ("lettre morte"), and German compounds the lexicon lacks are split into known parts
("Wiederholungsversuche" -> "retry attempt"). The result is a bag of English search terms in the question's order,
enough for BM25, the embedder and the local grader's term coverage.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from shared.query.reading.stemming import stemmer

_STEMMERS = {"de": "german", "fr": "french", "es": "spanish"}  # terms.tsv's columns after English, in order
#: Languages the lexicon translates from; every other language is left as it is.
LEXICON_LANGUAGES = tuple(_STEMMERS)
_DROP = "-"
_MAX_PHRASE = 3
_MIN_COMPOUND_PART = 3

# Options as written ("-c", "--nslist": a name, passed on unchanged), numbers ("3.7" whole), words and hyphenated words;
# apostrophes separate (French elision: "l'index").
_TOKEN = re.compile(r"(?<![\w-])--?[^\W\d_][\w-]*|\d+(?:[.,]\d+)+|[^\W_]+(?:-[^\W_]+)*", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.replace("'", " ").replace("\u2019", " "))


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).replace("ß", "ss")


@dataclass(frozen=True)
class _Lexicon:
    language: str
    forms: dict[tuple[str, ...], str]  # foreign words as written (lower case) -> English ("-" drops)
    stems: dict[tuple[str, ...], str]  # the same, stemmed and accent-folded
    english_words: frozenset[str]  # every word of the English column, folded

    def knows(self, word: str) -> bool:
        """Whether the lexicon translates ``word``, and it is not an English word of the lexicon ("index")."""
        return _fold(word.lower()) not in self.english_words and _word(self, word) is not None

    def key(self, word: str) -> str:
        return _stem_key(self.language, word.lower())

    def get(self, words: Sequence[str]) -> str | None:
        """English for ``words``: the form as written first (stems of unrelated words collide:
        "nächste" and "nach"), then the stem."""
        found = self.forms.get(tuple(w.lower() for w in words))
        return found if found is not None else self.stems.get(tuple(self.key(w) for w in words))


@functools.lru_cache(maxsize=65536)
def _stem_key(language: str, word: str) -> str:
    # Snowball in pure Python is most of a translation's cost, and compound splitting stems
    # every prefix and suffix of a long word: each (language, word) is stemmed once.
    return _fold(stemmer(_STEMMERS[language]).stemWord(word))


def lexicon_table(name: str, columns: Sequence[str]) -> list[list[str]]:
    """The rows of ``lexicon/<name>``: tab-separated ``columns`` under a header row that names them; blank
    lines and lines starting with "#" are comments. A malformed table fails loudly, naming the line."""
    text = resources.files("shared.query.reading").joinpath(f"lexicon/{name}").read_text(encoding="utf-8")
    lines = [(n, line.split("\t")) for n, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.startswith("#")]
    header = lines[0][1] if lines else []
    if header != list(columns):
        raise ValueError(f"lexicon/{name} has the columns {header}, expected {', '.join(columns)}")
    for number, row in lines[1:]:
        if len(row) != len(columns):
            raise ValueError(f"lexicon/{name} line {number} has {len(row)} columns, expected {len(columns)}: {row}")
    return [row for _, row in lines[1:]]


@functools.cache
def _lexicon(language: str) -> _Lexicon:
    if language not in _STEMMERS:
        raise ValueError(f"no lexicon for language {language!r}; there are {', '.join(LEXICON_LANGUAGES)}")
    rows = lexicon_table("terms.tsv", ("en", *LEXICON_LANGUAGES))
    english_words = frozenset(_fold(w.lower()) for row in rows for w in _TOKEN.findall(row[0]))
    lexicon = _Lexicon(language, {}, {}, english_words)
    for row in rows:
        english = row[0].strip()
        for form in row[1 + LEXICON_LANGUAGES.index(language)].split("|"):
            words = _tokens(form)
            if not words or len(words) > _MAX_PHRASE:
                continue
            # The first row to claim a form keeps it: rows are ordered general to specific only
            # where that matters ("zu" is "to" before it is "too").
            lexicon.forms.setdefault(tuple(w.lower() for w in words), english)
            lexicon.stems.setdefault(tuple(lexicon.key(w) for w in words), english)
    return lexicon


def _word(lexicon: _Lexicon, word: str, depth: int = 0) -> str | None:
    """English for one word: the lexicon's, its hyphen-separated parts', or a German compound's parts'."""
    if (found := lexicon.get([word])) is not None:
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
        if participle and (found := lexicon.get([participle])) is not None:
            return found
        if depth < 2 and len(word) >= 2 * _MIN_COMPOUND_PART:
            return _compound(lexicon, word, depth)
    return None


# German separable prefixes, before the "ge" of a past participle ("aus-ge-schrieben").
_SEPARABLE = ("ab", "an", "auf", "aus", "ein", "mit", "nach", "vor", "weiter", "zu", "zurück", "über", "um")


def _participle_stem(word: str) -> str | None:
    """A German past participle as the present-tense form the lexicon lists: "geprüft" ->
    "prüft", "weitergegeben" -> "weitergeben"; None for a word that is not shaped like one."""
    for prefix in ("", *_SEPARABLE):
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
            head_english = _word(lexicon, stem, depth + 1)
            if head_english not in (None, _DROP):
                return f"{head_english} {tail_english}"
    return None


def english_terms(question: str, language: str) -> str:
    """``question``'s words in English where the lexicon of ``language`` (ISO 639-1) knows them, as the
    module docstring says; a question in a language without a lexicon, English among them, is unchanged."""
    if language not in _STEMMERS:
        return question
    lexicon = _lexicon(language)
    words = _tokens(question)
    out: list[str] = []
    n = 0
    while n < len(words):  # the longest phrase the lexicon knows first, else one word
        size = next((k for k in range(min(_MAX_PHRASE, len(words) - n), 1, -1) if lexicon.get(words[n:n + k])), 1)
        english = lexicon.get(words[n:n + size]) if size > 1 else _word(lexicon, words[n])
        out += [] if english == _DROP else [english or words[n]]  # None: a name, an acronym, a number, a shared word
        n += size
    return " ".join(out)


def lexicon_language(text: str) -> str | None:
    """The lexicon language most of ``text``'s words belong to, or None: for the short questions whose function
    words cannot tell (see :func:`~shared.query.reading.language.detect_language`). It needs at least two words
    the language's lexicon :meth:`~_Lexicon.knows`, more than half of the text's words, and more than any other."""
    words = _tokens(text)
    counts = {language: sum(_lexicon(language).knows(w) for w in words) for language in LEXICON_LANGUAGES}
    (best, count), (_, second) = sorted(counts.items(), key=lambda item: -item[1])[:2]
    return best if count >= 2 and count * 2 > len(words) and count > second else None
