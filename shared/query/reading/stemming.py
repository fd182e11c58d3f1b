"""Snowball stemmers, one per thread and language.

A Snowball stemmer keeps its working string in the object, so two threads stemming with the same object at
once corrupt each other ("string index out of range"): the stages run on several threads in one process, so
every thread gets its own.
"""

from __future__ import annotations

import threading

import snowballstemmer

_LOCAL = threading.local()  # one attribute per language


def stemmer(language: str = "english"):
    """This thread's Snowball stemmer for ``language`` (a Snowball name: english, german, ...)."""
    if (found := getattr(_LOCAL, language, None)) is None:
        found = snowballstemmer.stemmer(language)
        setattr(_LOCAL, language, found)
    return found
