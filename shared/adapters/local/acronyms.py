"""Acronyms the corpus itself defines, and a query's expansion with them.

A definition is a passage such as "retrieval-augmented generation (RAG)" or
"RAG (retrieval-augmented generation)" whose word initials spell the acronym
(:func:`find_acronyms`). :class:`AcronymTable` searches the index for chunks that
may define an acronym, once per acronym until the index changes. Acronyms are
learned only from chunks a search for them returns, so an acronym the corpus
never spells out stays unexpanded.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict

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
    """The acronym definitions the corpus spells out, looked up in the index per acronym.

    An acronym's long form is a pure function of the index and the acronym: the first
    definition of it in the chunks a lexical search for it returns, best first; kept per
    acronym until the index changes. Nothing learned for one question changes another's:
    a table learned across questions (the first definition met wins, a long form met
    earlier gains its acronym) answered the same question differently by the order the
    questions came in, run to run when two workers share the model.
    """

    #: Acronyms whose lookups are kept at most; past it the one used longest ago is forgotten (every question
    #: may bring new capitalised words, and a long-running server must not keep them all).
    MAX_LOOKUPS = 4096

    def __init__(self, index: Index, embedder: Embedder) -> None:
        self.index = index
        self.embedder = embedder
        # acronym -> (index generation, every definition in the chunks its lookup found), least recently used first
        self._lookups: OrderedDict[str, tuple[int, dict[str, str]]] = OrderedDict()
        self._lock = threading.Lock()

    def _generation(self) -> int:
        if isinstance(self.index, CountsChanges):
            return self.index.generation
        try:
            return int(self.index.count_chunks())
        except Exception:  # noqa: BLE001 - an unreadable index simply means "unknown"
            return -1

    def _definitions(self, key: str, vector: np.ndarray | None) -> dict[str, str]:
        """Every definition in the chunks a lexical search for ``key`` returns (the best chunk's first),
        looked up once per index generation."""
        generation = self._generation()
        with self._lock:
            known = self._lookups.get(key)
            if known is not None and known[0] == generation:
                self._lookups.move_to_end(key)
                return known[1]
        try:
            if vector is None:
                vector = self.embedder.embed([key])[0]
            hits = self.index.search(key, vector, 20, mode="bm25")
        except Exception as exc:  # noqa: BLE001 - no expansion is better than no query
            log.warning("acronym lookup for %s failed: %s", key, exc)
            return {}
        found: dict[str, str] = {}
        for hit in hits:
            found.update({k: v for k, v in find_acronyms(hit.chunk.text).items() if k not in found})
        with self._lock:
            self._lookups[key] = (generation, found)
            self._lookups.move_to_end(key)
            while len(self._lookups) > self.MAX_LOOKUPS:
                self._lookups.popitem(last=False)
        return found

    @staticmethod
    def _key(acronym: str) -> str:
        return acronym[:-1] if acronym.endswith("s") and acronym[:-1].isupper() else acronym

    def expansion(self, acronym: str, *, vector: np.ndarray | None = None) -> str | None:
        """The long form of ``acronym`` as the corpus spells it, looked up once per index generation.

        The lookup is lexical (BM25), so any query vector will do for the index's dense
        argument: ``vector`` (the question's, already computed) saves embedding the acronym."""
        key = self._key(acronym)
        return self._definitions(key, vector).get(key)

    def expand(self, query: str, *, vector: np.ndarray | None = None) -> tuple[str, list[str]]:
        """``query`` with "ACR (long form)" for each acronym the corpus defines (``vector``:
        the query's, for the lookups, see :meth:`expansion`); a long form in the question gains
        its acronym when the chunks found for the question's own acronyms define it."""
        notes: list[str] = []
        out = query
        lowered = query.lower()
        around: dict[str, str] = {}
        for word in dict.fromkeys(tokenize(query)):
            if not ACRONYM.match(word):
                continue
            key = self._key(word)
            definitions = self._definitions(key, vector)
            around.update({k: v for k, v in definitions.items() if k not in around})
            long_form = definitions.get(key)
            if long_form and long_form.lower() not in lowered:
                out = re.sub(rf"\b{re.escape(word)}\b", f"{word} ({long_form})", out, count=1)
                notes.append(f"{word} = {long_form}")
        for acronym, long_form in around.items():
            if len(long_form) > 6 and long_form.lower() in lowered and acronym not in query:
                out = f"{out} {acronym}"
                notes.append(f"{long_form} = {acronym}")
        return out, notes
