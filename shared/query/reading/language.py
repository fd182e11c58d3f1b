"""Which language a question is written in, and the fixed sentences the query loop writes itself
(refusals and notes, ``lexicon/phrases.tsv``) in that language.

Detection is deliberately small: the script decides for Japanese, Chinese, Korean, Russian, Greek and
Arabic; for Latin-script text the count of common function words (``lexicon/function_words.tsv``) decides
between English, Spanish, French, German, Portuguese and Italian, and the translation lexicon's words
(:mod:`shared.query.reading.translation`) when there are too few. Short or ambiguous text is English.
That is enough to tell a model which language to answer in, to pick a sentence, and to put a question's
terms into English for the local model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from shared.query.reading.translation import english_terms, lexicon_language, lexicon_table

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)

# Scripts that decide alone, in the order they are tried, with the letters needed: kana is specific to
# Japanese; Han alone is Chinese (Japanese mixes both).
_SCRIPTS = tuple((language, re.compile(letters), needed) for language, letters, needed in (
    ("ja", "[\u3040-\u30ff]", 1), ("ko", "[\uac00-\ud7af]", 2), ("zh", "[\u4e00-\u9fff]", 2),
    ("ru", "[\u0400-\u04ff]", 3), ("el", "[\u0370-\u03ff]", 3), ("ar", "[\u0600-\u06ff]", 3)))
_MARKERS = {language: frozenset(words.split())
            for language, words in lexicon_table("function_words.tsv", ("language", "words"))}
# Accented letters that only some Latin-script languages use break ties.
_LETTERS: dict[str, str] = {"es": "ñ¿¡", "fr": "çèêëœàù", "de": "äöüß", "pt": "ãõç", "it": "àèìòù"}

NAMES = {"en": "English", "es": "Spanish", "fr": "French", "de": "German", "pt": "Portuguese", "it": "Italian",
         "ja": "Japanese", "zh": "Chinese", "ko": "Korean", "ru": "Russian", "el": "Greek", "ar": "Arabic"}


def detect_language(text: str) -> str:
    """ISO 639-1 code of ``text``'s language; ``"en"`` when unsure."""
    for language, letters, needed in _SCRIPTS:
        if len(letters.findall(text)) >= needed:
            return language
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return "en"
    lowered = text.lower()
    scores = {language: sum(w in markers for w in words) + 0.5 * sum(map(lowered.count, _LETTERS.get(language, "")))
              for language, markers in _MARKERS.items()}
    best = max(scores, key=lambda lang: (scores[lang], lang == "en"))
    # One shared word ("la", "a") is not evidence; English wins ties and near-ties.
    if best != "en" and scores[best] < max(1.5, scores["en"] + 1):
        best = "en"
    if best == "en" and scores["en"] > 0:
        return best
    # Too few function words to tell ("Warum braucht man Wiederholungsversuche?"), or a near
    # tie between Romance languages ("À quelles adresses ... doit-il" scored Italian on "il"):
    # the translation lexicon's words decide when most of the text is one of its languages.
    lexical = lexicon_language(text)
    if best == "en":
        return lexical or "en"
    if lexical and lexical != best and scores[lexical] + 1.5 >= scores[best]:
        return lexical
    return best


def _phrases() -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for key, language, text in lexicon_table("phrases.tsv", ("key", "language", "text")):
        if language in table.setdefault(key, {}):
            raise ValueError(f"lexicon/phrases.tsv has two {language!r} rows for {key!r}")
        table[key][language] = text
    if lacking := [key for key, texts in table.items() if "en" not in texts]:
        raise ValueError(f"lexicon/phrases.tsv has no English row for {', '.join(lacking)}")
    return table


_PHRASES = _phrases()
#: the languages ragbus refuses and writes its notes in (those of the "abstain" rows), English first
SUPPORTED = tuple(_PHRASES["abstain"])


def phrase(key: str, language: str) -> str:
    """A fixed sentence (``"abstain"``, ``"caveat"``, ``"not_mentioned"``, ...) in ``language``, else English."""
    return _PHRASES[key].get(language, _PHRASES[key]["en"])


@functools.lru_cache(maxsize=1024)  # the transformer, retriever, grader and synthesizer each ask
def in_english(question: str) -> tuple[str, str]:
    """(``question``'s language, its search terms in English: :func:`~shared.query.reading.translation.english_terms`);
    English, and languages the lexicon lacks, come back unchanged."""
    language = detect_language(question)
    return language, english_terms(question, language)


def fixed_notes() -> frozenset[str]:
    """The fixed paragraphs ragbus writes around an answer's content, in every language: the generic notes an
    answer may open with (which earlier answers a chat client sends back may hold) and the refusal; not an earlier
    answer's content when a follow-up reads it (:func:`is_note` also knows the notes built from what was found)."""
    return frozenset(text for key in ("caveat", "caveat_no_model", "abstain") for text in _PHRASES[key].values())


_FIXED = fixed_notes()
#: the notes built from what the reader found (see the "caveat_*" phrases)
CAVEAT_NOTES = tuple(key for key in _PHRASES if key.startswith("caveat_") and key != "caveat_no_model")
_NOTE_PATTERNS = tuple(re.compile(re.sub(r"\\{\w+\\}", ".+?", re.escape(text)) + r"\Z", re.DOTALL)
                       for key in CAVEAT_NOTES for text in _PHRASES[key].values())
_CITATION_MARK = re.compile(r"\[\d+\]")


def is_note(paragraph: str) -> bool:
    """Whether ``paragraph`` is a note ragbus wrote around an answer (a fixed one, or one built from what the
    reader found), not content: a document's own "Note: ..." sentence, quoted, carries its citation mark."""
    text = paragraph.strip()
    return text in _FIXED or (not _CITATION_MARK.search(text) and any(p.match(text) for p in _NOTE_PATTERNS))


# How a note quotes the question's words and lists them: opening and closing quotation marks, then the word
# joining the last two ("and"), and the one joining things the passages lack ("but not A or B").
_QUOTES: dict[str, tuple[str, str, str, str]] = {
    "en": ("“", "”", " and ", " or "), "es": ("«", "»", " y ", " ni "), "fr": ("« ", " »", " et ", " ni "),
    "de": ("„", "“", " und ", " oder "), "pt": ("“", "”", " e ", " nem "), "it": ("«", "»", " e ", " né "),
    "ja": ("「", "」", "と", "や"), "zh": ("“", "”", "和", "或"), "ko": ("‘", "’", ", ", ", "),
    "ru": ("«", "»", " и ", " и "),
}


def quoted_words(words: Sequence[str], language: str, *, either: bool = False) -> str:
    """``words`` quoted and listed as a note in ``language`` writes them: “tty group” and “systemd”
    (``either``: “GID” or “UID”, for what the passages lack)."""
    opening, closing, both, one = _QUOTES.get(language, _QUOTES["en"])
    items = [f"{opening}{w}{closing}" for w in words]
    if len(items) <= 1:
        return "".join(items)
    comma = "、" if language in ("ja", "zh") else ", "
    return comma.join(items[:-1]) + (one if either else both) + items[-1]
