"""Time in the question, read as a date filter: "latest", "this month", "since March", "in 2025".

Adding the month and year to the query's words (what the system ragbus was specified from
does) is a weak proxy for a date: a post that mentions "November 2026" outranks one published
then. Every chunk carries its document's published date, so a question's time words become a
:class:`~shared.contract.filters.Filters` range on it, relative to the query's clock.

English, German, French and Spanish (the offline provider's languages). Each reading also says
how to widen it when the range leaves nothing to search (:meth:`TimeReading.wider`): a relative
window doubles a few times before the filter is dropped; a named period ("in 2025") is not
widened, since a question about 2025 is not answered by 2024.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from shared.contract.filters import published_at

#: Days "latest" / "recent" look back first; widened by doubling up to _MAX_WINDOW_DAYS, then dropped.
NEWEST_WINDOW_DAYS = 90
_MAX_WINDOW_DAYS = 730

_MONTHS = {
    # en, de, fr, es (accents folded)
    "january": 1, "jan": 1, "januar": 1, "janvier": 1, "enero": 1,
    "february": 2, "feb": 2, "februar": 2, "fevrier": 2, "febrero": 2,
    "march": 3, "mar": 3, "marz": 3, "maerz": 3, "mars": 3, "marzo": 3,
    "april": 4, "apr": 4, "avril": 4, "abril": 4,
    "may": 5, "mai": 5, "mayo": 5,
    "june": 6, "jun": 6, "juni": 6, "juin": 6, "junio": 6,
    "july": 7, "jul": 7, "juli": 7, "juillet": 7, "julio": 7,
    "august": 8, "aug": 8, "aout": 8, "agosto": 8,
    "september": 9, "sep": 9, "sept": 9, "septembre": 9, "septiembre": 9, "setiembre": 9,
    "october": 10, "oct": 10, "oktober": 10, "octobre": 10, "octubre": 10,
    "november": 11, "nov": 11, "novembre": 11, "noviembre": 11,
    "december": 12, "dec": 12, "dezember": 12, "decembre": 12, "diciembre": 12,
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_YEAR = r"(?:19|20)\d\d"

_NEWEST = re.compile(
    r"\b(latest|newest|most recent(?:ly)?|recently|recent|lately|neueste[nrs]?|aktuellste[nrs]?|jungste[nrs]?|"
    r"zuletzt|kurzlich|neulich|dernier|derniere|derniers|dernieres|plus recente?s?|recemment|recente?s?|"
    r"ultimo|ultima|ultimos|ultimas|mas reciente|mas recientes|recientemente|reciente|recientes)\b"
)
_THIS_WEEK = re.compile(r"\b(this week|diese woche|dieser woche|cette semaine|esta semana)\b")
_LAST_WEEK = re.compile(
    r"\b(last week|past week|previous week|letzte woche|letzten woche|vergangene woche|vergangenen woche|"
    r"la semaine derniere|semaine passee|la semana pasada|semana pasada|la ultima semana)\b"
)
_THIS_MONTH = re.compile(r"\b(this month|diesen monat|diesem monat|ce mois[- ]ci|ce mois|este mes)\b")
_LAST_MONTH = re.compile(
    r"\b(last month|past month|previous month|letzten monat|letzter monat|vergangenen monat|le mois dernier|"
    r"mois dernier|le mois passe|mois passe|el mes pasado|mes pasado)\b"
)
_THIS_YEAR = re.compile(r"\b(this year|dieses jahr|diesem jahr|cette annee|este ano)\b")
_LAST_YEAR = re.compile(r"\b(last year|past year|letztes jahr|letzten jahr|vergangenes jahr|l annee derniere|"
                        r"annee derniere|l annee passee|annee passee|l an dernier|l an passe|el ano pasado|ano pasado)\b")
_TODAY = re.compile(r"\b(today|heute|aujourd hui|hoy)\b")
_SINCE = re.compile(rf"\b(?:since|seit|depuis|desde)\s+(?:(?:le|el|la|l|dem|den)\s+)?(?:(?:mois|mes)\s+de\s+)?"
                    rf"(?:(?:jahr|annee|ano)\s+)?(?P<month>{_MONTH})?\b\s*(?:de\s+)?(?P<year>{_YEAR})?\b")
_IN_MONTH = re.compile(rf"\b(?:in|im|en|au mois de|en el mes de)\s+(?P<month>{_MONTH})\s+(?:de\s+)?(?P<year>{_YEAR})\b")
_MONTH_YEAR = re.compile(rf"\b(?P<month>{_MONTH})\s+(?:de\s+)?(?P<year>{_YEAR})\b")
_IN_YEAR = re.compile(rf"\b(?:in|im jahr|im jahre|en|en el ano|durante|during|throughout)\s+(?P<year>{_YEAR})\b")


@dataclass(frozen=True)
class TimeReading:
    """What the question's time words ask for: a published-date range and whether to prefer the newest."""

    phrase: str  # the words read, for the record
    since: datetime | None = None
    until: datetime | None = None
    newest: bool = False
    window_days: int | None = None  # a relative window (widened by doubling); None: a named period

    def wider(self, now: datetime) -> TimeReading | None:
        """The next wider reading when this one leaves nothing; None when there is none (drop the filter)."""
        if self.window_days is None or self.window_days >= _MAX_WINDOW_DAYS:
            return None
        days = min(self.window_days * 2, _MAX_WINDOW_DAYS)
        return TimeReading(self.phrase, since=now - timedelta(days=days), until=None, newest=self.newest,
                           window_days=days)


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.lower())
    text = "".join(c for c in text if not unicodedata.combining(c))
    return re.sub(r"['’`]", " ", text)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _next_month(year: int, month: int) -> datetime:
    return _month_start(year + month // 12, month % 12 + 1)


#: Hits scoring at least this share of the best one count as equally on topic when the question asks
#: for the newest: among them the most recently published leads.
NEWEST_MARGIN = 0.9


def newest_first(hits: list, margin: float = NEWEST_MARGIN) -> list:
    """``hits`` (ScoredChunk, best first) with the most recently published of those within ``margin``
    of the best score moved to the front, for a question asking for the latest."""
    if len(hits) < 2 or hits[0].score <= 0:
        return list(hits)
    close = [h for h in hits if h.score >= margin * hits[0].score]
    rest = [h for h in hits if h.score < margin * hits[0].score]
    oldest = datetime.min.replace(tzinfo=UTC)
    close.sort(key=lambda h: published_at(h.chunk.published) or oldest, reverse=True)
    return close + rest


def read_time(question: str, now: datetime) -> TimeReading | None:
    """The date range the question's time words name, relative to ``now``; None when it names none."""
    now = now.astimezone(UTC)
    text = _fold(question)
    today = datetime(now.year, now.month, now.day, tzinfo=UTC)

    match = _IN_MONTH.search(text)
    if match:
        month, year = _MONTHS[match.group("month")], int(match.group("year"))
        return TimeReading(match.group(0), since=_month_start(year, month), until=_next_month(year, month))
    match = _SINCE.search(text)
    since_named = bool(match and (match.group("month") or match.group("year")))
    named = None if since_named else _MONTH_YEAR.search(text)
    # "the March 2025 release": a month named with its year (not an abbreviation: "mar" is a word too).
    if named and (len(named.group("month")) > 3 or named.group("month") in ("may", "mai")):
        month, year = _MONTHS[named.group("month")], int(named.group("year"))
        return TimeReading(named.group(0), since=_month_start(year, month), until=_next_month(year, month))
    if match and since_named:
        year = int(match.group("year")) if match.group("year") else None
        if match.group("month"):
            month = _MONTHS[match.group("month")]
            if year is None:  # "since March": the last March that has begun
                year = now.year if month <= now.month else now.year - 1
            since = _month_start(year, month)
        else:
            since = _month_start(year, 1)  # type: ignore[arg-type]
        return TimeReading(match.group(0).strip(), since=since)
    match = _IN_YEAR.search(text)
    if match:
        year = int(match.group("year"))
        return TimeReading(match.group(0), since=_month_start(year, 1), until=_month_start(year + 1, 1))
    for pattern, since, until, window in (
        (_TODAY, today, None, 2),
        (_THIS_WEEK, today - timedelta(days=today.weekday()), None, 14),
        (_LAST_WEEK, today - timedelta(days=7), None, 7),
        (_THIS_MONTH, _month_start(now.year, now.month), None, 31),
        (_LAST_MONTH, _month_start(now.year - (now.month == 1), (now.month - 2) % 12 + 1),
         _month_start(now.year, now.month), None),
        (_THIS_YEAR, _month_start(now.year, 1), None, 366),
        (_LAST_YEAR, _month_start(now.year - 1, 1), _month_start(now.year, 1), None),
    ):
        match = pattern.search(text)
        if match:
            return TimeReading(match.group(0), since=since, until=until, window_days=window)
    match = _NEWEST.search(text)
    if match:
        return TimeReading(match.group(0), since=now - timedelta(days=NEWEST_WINDOW_DAYS), newest=True,
                           window_days=NEWEST_WINDOW_DAYS)
    return None
