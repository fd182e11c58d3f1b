"""Snowball stemmers, one per thread and language.

A Snowball stemmer keeps its working string in the object, so two threads stemming
with the same object at once corrupt each other ("string index out of range"): the
stages run on several threads in one process, so every thread gets its own.
"""

from __future__ import annotations

import threading

import snowballstemmer

_LOCAL = threading.local()


def stemmer(language: str = "english"):
    """This thread's Snowball stemmer for ``language`` (a Snowball name: english, german, ...)."""
    stemmers = getattr(_LOCAL, "stemmers", None)
    if stemmers is None:
        stemmers = _LOCAL.stemmers = {}
    found = stemmers.get(language)
    if found is None:
        found = stemmers[language] = snowballstemmer.stemmer(language)
    return found
