"""Where Vertex AI serves each Gemini model: one table, ``gemini_locations.json``.

Locations belong to each model, not to a name pattern: ``gemini-3.8-flash`` is served from the
global endpoint and the ``us``/``eu`` multi-regions, ``gemini-3.1-pro-preview`` from ``global``
only, Gemini 2.5 from those and regional endpoints too. The same file is read by
``infra/functions.tf`` for its plan-time check, so the two cannot disagree. A model the table
does not list is checked by the table's rules: a ``-preview`` model is served from ``global``
only; any other is let through (a newer model) and a location other than ``global`` is warned
about, since ``global`` is the one location almost every Gemini model has.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("gemini_locations.json")
_VERSION_SUFFIX = re.compile(r"-\d{3}$")


@dataclass(frozen=True)
class Served:
    """Where one model is served: ``locations`` (global and multi-regions), whether regional
    endpoints serve it too, and the page the row was read from. ``listed`` is False for a model
    the table does not name (its row comes from a rule, or is unknown)."""

    model: str
    locations: tuple[str, ...] | None
    regional: bool
    source: str
    listed: bool = True

    def serves(self, location: str) -> bool | None:
        """True/False when the table knows; None for an unlisted, non-preview model."""
        if self.locations is None:
            return None
        return location in self.locations or (self.regional and location not in ("global", "us", "eu"))

    def described(self) -> str:
        if self.locations is None:
            return "locations the table does not list"
        where = ", ".join(self.locations)
        return f"{where} and regional endpoints" if self.regional else where


def _table() -> dict:
    with TABLE_PATH.open(encoding="utf-8") as handle:
        return json.load(handle)


TABLE = _table()
#: The location an EU deployment (a ``europe-*`` region) uses unless RAGBUS_GEMINI_LOCATION says.
EU_DEFAULT_LOCATION: str = TABLE["eu_default"]["location"]


def model_id(model: str) -> str:
    """The model's id: a Vertex resource name (``projects/.../models/gemini-x``) ends with it."""
    return model.rsplit("/", 1)[-1].strip().lower()


def served(model: str) -> Served:
    """The table's row for ``model`` (its id, or its id without a ``-001`` version suffix)."""
    name = model_id(model)
    for key in (name, _VERSION_SUFFIX.sub("", name)):
        row = TABLE["models"].get(key)
        if row is not None:
            return Served(name, tuple(row["locations"]), bool(row["regional"]), row["source"])
    if name.endswith("-preview"):
        rule = TABLE["preview"]
        return Served(name, tuple(rule["locations"]), bool(rule["regional"]), rule["source"], listed=False)
    return Served(name, None, False, "", listed=False)


def default_location(region: str | None) -> str:
    """Gemini's location when RAGBUS_GEMINI_LOCATION is unset: ``eu`` for a ``europe-*`` region
    (data stays in the EU multi-region), else ``global``."""
    if region and region.strip().lower().startswith("europe-"):
        return EU_DEFAULT_LOCATION
    return "global"
