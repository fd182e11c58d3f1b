"""Time words in the question read as a date range relative to the query's clock, in four languages."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.query.temporal import read_time

NOW = datetime(2026, 11, 26, 15, 30, tzinfo=UTC)  # a Thursday


def d(*parts):
    return datetime(*parts, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "since", "until", "newest"),
    [
        ("What was announced most recently about CUDA?", d(2026, 8, 28, 15, 30), None, True),
        ("What is the latest on Grace Hopper?", d(2026, 8, 28, 15, 30), None, True),
        ("Any recent posts about NCCL?", d(2026, 8, 28, 15, 30), None, True),
        ("What did the blog publish this month?", d(2026, 11, 1), None, False),
        ("What did the blog announce last week about CUDA?", d(2026, 11, 19), None, False),
        ("What changed this week?", d(2026, 11, 23), None, False),
        ("What changed about TensorRT since March?", d(2026, 3, 1), None, False),
        ("What changed about TensorRT since December?", d(2025, 12, 1), None, False),
        ("What changed since June 2025?", d(2025, 6, 1), None, False),
        ("What changed since 2025?", d(2025, 1, 1), None, False),
        ("What did the blog say about DOCA in 2025?", d(2025, 1, 1), d(2026, 1, 1), False),
        ("What was released in March 2025?", d(2025, 3, 1), d(2025, 4, 1), False),
        ("What happened last month?", d(2026, 10, 1), d(2026, 11, 1), False),
        ("What shipped last year?", d(2025, 1, 1), d(2026, 1, 1), False),
        ("What shipped this year?", d(2026, 1, 1), None, False),
        ("What was published today?", d(2026, 11, 26), None, False),
        # German
        ("Was ist die neueste Version von CUDA?", d(2026, 8, 28, 15, 30), None, True),
        ("Was wurde letzte Woche angekündigt?", d(2026, 11, 19), None, False),
        ("Was gab es diesen Monat?", d(2026, 11, 1), None, False),
        ("Was hat sich seit März geändert?", d(2026, 3, 1), None, False),
        ("Was schrieb der Blog im Jahr 2025 über DOCA?", d(2025, 1, 1), d(2026, 1, 1), False),
        # French
        ("Quelle est la dernière annonce sur CUDA ?", d(2026, 8, 28, 15, 30), None, True),
        ("Qu'a-t-on annoncé la semaine dernière ?", d(2026, 11, 19), None, False),
        ("Quoi de neuf ce mois-ci ?", d(2026, 11, 1), None, False),
        ("Qu'est-ce qui a changé depuis mars ?", d(2026, 3, 1), None, False),
        ("Qu'a dit le blog en 2025 sur DOCA ?", d(2025, 1, 1), d(2026, 1, 1), False),
        # Spanish
        ("¿Cuál es la versión más reciente de CUDA?", d(2026, 8, 28, 15, 30), None, True),
        ("¿Qué se anunció la semana pasada?", d(2026, 11, 19), None, False),
        ("¿Qué hubo este mes?", d(2026, 11, 1), None, False),
        ("¿Qué cambió desde marzo?", d(2026, 3, 1), None, False),
        ("¿Qué dijo el blog en 2025 sobre DOCA?", d(2025, 1, 1), d(2026, 1, 1), False),
    ],
)
def test_each_phrase_in_each_language(question, since, until, newest):
    reading = read_time(question, NOW)
    assert reading is not None, question
    assert (reading.since, reading.until, reading.newest) == (since, until, newest), question


@pytest.mark.parametrize("question", [
    "What is BM25?", "How do CUDA graphs reduce launch overhead?", "Which GPU has 80 GB of memory?",
    "Since the markets opened, what moved?", "What is new in the may operator?",
])
def test_a_question_without_time_words_reads_none(question):
    assert read_time(question, NOW) is None


def test_a_relative_window_widens_by_doubling_then_drops_and_a_named_period_does_not_widen():
    reading = read_time("What is the latest on NVLink?", NOW)
    windows = []
    while reading is not None:
        windows.append(reading.window_days)
        reading = reading.wider(NOW)
    assert windows == [90, 180, 360, 720, 730]
    assert read_time("What did the blog say in 2025?", NOW).wider(NOW) is None
    assert read_time("What happened last week?", NOW).wider(NOW).since == d(2026, 11, 12, 15, 30)


def test_a_month_named_with_its_year_anywhere_is_that_month():
    reading = read_time("What new feature did NCCL get in its June 2025 release?", NOW)
    assert (reading.since, reading.until) == (d(2025, 6, 1), d(2025, 7, 1))
    assert read_time("Qué trajo la versión de marzo de 2025?", NOW).since == d(2025, 3, 1)


def test_newest_first_moves_the_latest_of_the_equally_on_topic_hits_to_the_front():
    from shared.contract.ports import Chunk, ScoredChunk
    from shared.query.temporal import newest_first

    def hit(doc, score, published):
        return ScoredChunk(Chunk(f"{doc}:0", doc, 0, "t", published=published), score)

    hits = [hit("old", 1.0, "2026-09-01"), hit("new", 0.95, "2026-11-20T08:00:00+00:00"),
            hit("undated", 0.94, None), hit("off-topic", 0.5, "2026-11-25")]
    assert [h.chunk.document_id for h in newest_first(hits)] == ["new", "old", "undated", "off-topic"]
    assert newest_first(hits[:1]) == hits[:1]


def test_may_with_its_year_is_the_month():
    assert read_time("What shipped in its May 2025 release?", NOW).since == d(2025, 5, 1)
    assert read_time("Was kam im Mai 2025?", NOW).until == d(2025, 6, 1)


# Each phrase the reader knows, in each of the four languages (issue 27's check: each phrase, each language).
_RANGES = {
    "latest": (d(2026, 8, 28, 15, 30), None), "recent": (d(2026, 8, 28, 15, 30), None),
    "today": (d(2026, 11, 26), None), "this week": (d(2026, 11, 23), None), "last week": (d(2026, 11, 19), None),
    "this month": (d(2026, 11, 1), None), "last month": (d(2026, 10, 1), d(2026, 11, 1)),
    "this year": (d(2026, 1, 1), None), "last year": (d(2025, 1, 1), d(2026, 1, 1)),
    "since March": (d(2026, 3, 1), None), "since June 2025": (d(2025, 6, 1), None),
    "since 2025": (d(2025, 1, 1), None), "in 2025": (d(2025, 1, 1), d(2026, 1, 1)),
    "in March 2025": (d(2025, 3, 1), d(2025, 4, 1)),
}
_PHRASES = {
    "de": [("latest", "Was ist die neueste CUDA-Version?"), ("recent", "Was wurde kürzlich über NCCL veröffentlicht?"),
           ("today", "Was wurde heute veröffentlicht?"), ("this week", "Was hat sich diese Woche geändert?"),
           ("last week", "Was kam in der letzten Woche?"), ("this month", "Was kam diesen Monat?"),
           ("last month", "Was geschah im vergangenen Monat?"), ("this year", "Was kam dieses Jahr?"),
           ("last year", "Was kam im letzten Jahr?"), ("since March", "Was hat sich seit März geändert?"),
           ("since June 2025", "Was hat sich seit Juni 2025 geändert?"), ("since 2025", "Was gibt es seit 2025?"),
           ("in 2025", "Was schrieb der Blog im Jahr 2025?"), ("in March 2025", "Was erschien im März 2025?")],
    "fr": [("latest", "Quelle est la dernière version de CUDA ?"), ("recent", "Qu'a-t-on publié récemment sur NCCL ?"),
           ("today", "Qu'a-t-on publié aujourd'hui ?"), ("this week", "Qu'est-ce qui a changé cette semaine ?"),
           ("last week", "Qu'a-t-on annoncé la semaine passée ?"), ("this month", "Qu'est-il sorti ce mois-ci ?"),
           ("last month", "Que s'est-il passé le mois passé ?"), ("this year", "Qu'est-il sorti cette année ?"),
           ("last year", "Qu'est-il sorti l'an dernier ?"), ("last year", "Qu'est-il sorti l'année passée ?"),
           ("since March", "Qu'est-ce qui a changé depuis mars ?"),
           ("since June 2025", "Qu'est-ce qui a changé depuis juin 2025 ?"),
           ("since 2025", "Qu'est-ce qui a changé depuis l'année 2025 ?"), ("in 2025", "Qu'a dit le blog en 2025 ?"),
           ("in March 2025", "Qu'est-il sorti en mars 2025 ?")],
    "es": [("latest", "¿Cuál es la última versión de CUDA?"), ("recent", "¿Qué se publicó recientemente sobre NCCL?"),
           ("today", "¿Qué se publicó hoy?"), ("this week", "¿Qué cambió esta semana?"),
           ("last week", "¿Qué se anunció la semana pasada?"), ("this month", "¿Qué salió este mes?"),
           ("last month", "¿Qué pasó el mes pasado?"), ("this year", "¿Qué salió este año?"),
           ("last year", "¿Qué salió el año pasado?"), ("since March", "¿Qué cambió desde marzo?"),
           ("since June 2025", "¿Qué cambió desde junio de 2025?"), ("since 2025", "¿Qué cambió desde el año 2025?"),
           ("in 2025", "¿Qué dijo el blog en el año 2025?"), ("in March 2025", "¿Qué salió en marzo de 2025?")],
}


@pytest.mark.parametrize(("language", "kind", "question"),
                         [(lang, kind, q) for lang, rows in _PHRASES.items() for kind, q in rows])
def test_every_phrase_in_german_french_and_spanish(language, kind, question):
    reading = read_time(question, NOW)
    assert reading is not None, question
    assert (reading.since, reading.until) == _RANGES[kind], (language, question)
    assert {lang for lang, rows in _PHRASES.items() if kind in dict(rows)} == set(_PHRASES)
