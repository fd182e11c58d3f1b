"""Acronyms the corpus itself defines, and a query's expansion with them.

A definition is a passage such as "retrieval-augmented generation (RAG)" or
"RAG (retrieval-augmented generation)" whose word initials spell the acronym
(:func:`find_acronyms`). :class:`AcronymTable` keeps the definitions learned so
far and, for an acronym it has not met, searches the index for chunks that may
define it, remembering a miss until the index changes. Acronyms are learned
only from chunks a search returns, so an acronym the corpus never spells out
stays unexpanded.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence

import numpy as np

from shared.contract.ports import CountsChanges, Embedder, Index
from shared.query.reading.extractive import tokenize

log = logging.getLogger("ragbus.llm.local")

ACRONYM = re.compile(r"^(?=(?:[^A-Z]*[A-Z]){2})[A-Z][A-Za-z0-9]{1,9}$")
_PAREN_AFTER = re.compile(r"\(([A-Z][A-Za-z0-9]{1,9})\)")  # long form (ACR)
_PAREN_LONG = re.compile(r"\b([A-Z][A-Za-z0-9]{1,9})\s*\(([^()\n]{3,80})\)")  # ACR (long form)
_LINK_WORDS = {"of", "and", "for", "the", "in", "on", "to", "a", "an", "with", "&"}


def _initials_match(letters: str, words: list[str]) -> bool:
    """Can ``words`` spell ``letters``: each word gives a prefix, link words may give nothing?"""
    if not words:
        return not letters
    word, rest = words[0].lower(), words[1:]
    if word in _LINK_WORDS and _initials_match(letters, rest):
        return True
    if not letters or not word or word[0] != letters[0]:
        return False
    # A word may contribute its first letter, or a longer prefix ("GPU" from "Graphics Processing Unit";
    # "CoT" from "Chain-of-Thought" once hyphens are split).
    for take in range(1, min(len(word), len(letters)) + 1):
        if word[:take] != letters[:take]:
            break
        if _initials_match(letters[take:], rest):
            return True
    return False


def long_form_words(long_form: str) -> list[str]:
    return [w for w in re.split(r"[\s\-/]+", long_form) if w and re.match(r"[A-Za-z]", w)]


def _letters(acronym: str) -> str:
    core = acronym[:-1] if acronym.endswith("s") and acronym[:-1].isupper() else acronym
    return "".join(ch for ch in core.lower() if ch.isalpha())


def find_acronyms(text: str) -> dict[str, str]:
    """Acronym definitions spelled out in ``text``: ``{"RAG": "retrieval-augmented generation"}``."""
    found: dict[str, str] = {}
    for match in _PAREN_AFTER.finditer(text):
        acronym = match.group(1)
        letters = _letters(acronym)
        if len(letters) < 2:
            continue
        before = text[max(0, match.start() - 120) : match.start()]
        number = re.search(r"\d+$", acronym)
        suffix = ""
        if number:
            # "Best Matching 25 (BM25)": the number must end the long form too
            trailing = re.search(rf"\b{number.group()}\s*$", before)
            if not trailing:
                continue
            before, suffix = before[: trailing.start()], " " + number.group()
            letters = _letters(acronym[: number.start()])
            if len(letters) < 2:
                continue
        words = re.findall(r"[A-Za-z][A-Za-z0-9\-]*", before)[-(len(letters) + 3):]
        for size in range(1, len(words) + 1):
            candidate = words[-size:]
            split = long_form_words(" ".join(candidate))
            if split and split[0].lower() not in _LINK_WORDS and _initials_match(letters, split):
                found.setdefault(acronym.rstrip("s") if acronym[:-1].isupper() else acronym,
                                 " ".join(candidate) + suffix)
                break
    for match in _PAREN_LONG.finditer(text):
        acronym, inner = match.group(1), match.group(2).strip()
        letters = _letters(acronym)
        if len(letters) < 2 or not ACRONYM.match(acronym):
            continue
        split = long_form_words(inner)
        if split and _initials_match(letters, split):
            found.setdefault(acronym, inner)
    return found


class AcronymTable:
    """The acronym definitions learned from the corpus, looked up in the index on demand."""

    def __init__(self, index: Index, embedder: Embedder) -> None:
        self.index = index
        self.embedder = embedder
        self._acronyms: dict[str, str] = {}
        self._misses: dict[str, int] = {}  # acronym -> index generation when a lookup found nothing
        self._lock = threading.Lock()

    def known(self, acronym: str) -> str | None:
        """The long form already learned for ``acronym`` (no index lookup)."""
        with self._lock:
            return self._acronyms.get(acronym.rstrip("s")) or self._acronyms.get(acronym)

    def _generation(self) -> int:
        if isinstance(self.index, CountsChanges):
            return self.index.generation
        try:
            return int(self.index.count_chunks())
        except Exception:  # noqa: BLE001 - an unreadable index simply means "unknown"
            return -1

    def learn(self, texts: Sequence[str]) -> None:
        """Add the acronym definitions found in ``texts`` to the table."""
        found: dict[str, str] = {}
        for text in texts:
            found.update({k: v for k, v in find_acronyms(text).items() if k not in found})
        with self._lock:
            for acronym, long_form in found.items():
                self._acronyms.setdefault(acronym, long_form)
                self._misses.pop(acronym, None)

    def expansion(self, acronym: str, *, vector: np.ndarray | None = None) -> str | None:
        """The long form of ``acronym`` as the corpus spells it, looked up once per index size.

        The lookup is lexical (BM25), so any query vector will do for the index's dense
        argument: ``vector`` (the question's, already computed) saves embedding the acronym."""
        key = acronym[:-1] if acronym.endswith("s") and acronym[:-1].isupper() else acronym
        with self._lock:
            if key in self._acronyms:
                return self._acronyms[key]
            generation = self._generation()
            if self._misses.get(key) == generation:
                return None
        try:
            if vector is None:
                vector = self.embedder.embed([key])[0]
            hits = self.index.search(key, vector, 20, mode="bm25")
        except Exception as exc:  # noqa: BLE001 - no expansion is better than no query
            log.warning("acronym lookup for %s failed: %s", key, exc)
            return None
        self.learn([h.chunk.text for h in hits])
        with self._lock:
            if key not in self._acronyms:
                self._misses[key] = generation
            return self._acronyms.get(key)

    def expand(self, query: str, *, vector: np.ndarray | None = None) -> tuple[str, list[str]]:
        """``query`` with "ACR (long form)" for each acronym the corpus defines (``vector``:
        the query's, for the lookups, see :meth:`expansion`)."""
        notes: list[str] = []
        out = query
        lowered = query.lower()
        for word in dict.fromkeys(tokenize(query)):
            if not ACRONYM.match(word):
                continue
            long_form = self.expansion(word, vector=vector)
            if long_form and long_form.lower() not in lowered:
                out = re.sub(rf"\b{re.escape(word)}\b", f"{word} ({long_form})", out, count=1)
                notes.append(f"{word} = {long_form}")
        # The other way round: a long form in the question gains its acronym.
        with self._lock:
            table = dict(self._acronyms)
        for acronym, long_form in table.items():
            if len(long_form) > 6 and long_form.lower() in lowered and acronym not in query:
                out = f"{out} {acronym}"
                notes.append(f"{long_form} = {acronym}")
        return out, notes
