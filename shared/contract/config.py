"""Settings from the environment, with local defaults: one declared table.

Every setting is one field of :class:`Settings` (or :class:`GradeThresholds`) declared with
:func:`setting`: its variable, default, kind (which parses it and holds its bounds or choices)
and description. :func:`load_settings` reads the environment by that table, and docs/configuration.md's
configuration table is generated from it (``python -m shared.tools.docs``; a unit test fails
when they differ). Nothing else reads a ``RAGBUS_*`` variable (``tests/unit/test_layers.py``).

Everything has a default that works on a fresh machine with no account; the gcp
runtime checks its required settings at start-up and names any that is missing.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from shared.contract.errors import ConfigError
from shared.contract.model_locations import default_location
from shared.contract.providers import PROVIDER_BY_NAME, PROVIDER_NAMES, PROVIDERS, Provider
from shared.contract.redaction import remember_secret, remember_url_credentials

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

#: The Gemini model the gemini provider calls unless RAGBUS_GEMINI_MODEL names another: the
#: latest GA Flash model on both the Gemini API and Vertex AI (released 2026-09-02, no shutdown
#: date announced; gemini-2.0-flash, the old default, was shut down on 2026-03-31). infra/ leaves
#: the variable empty to inherit it; gemini_locations.json's ``default_model`` names it for the
#: plan's location check (a unit test keeps the two equal).
DEFAULT_GEMINI_MODEL = "gemini-3.8-flash"

#: Where Vertex AI serves Google's models unless RAGBUS_GEMINI_LOCATION names another, or the
#: functions' region is in Europe (then ``eu``: shared.contract.model_locations.default_location).
#: Which locations serve which model is the table in shared/contract/gemini_locations.json
#: (googleapis/python-genai maps ``us``/``eu`` to aiplatform.{us,eu}.rep.googleapis.com).
#: It is a setting of its own because GOOGLE_CLOUD_LOCATION places the functions' regional
#: resources (Vector Search has no global location).
DEFAULT_GEMINI_LOCATION = "global"
MULTI_REGIONAL_LOCATIONS = ("global", "us", "eu")
_REGION = re.compile(r"[a-z]+-[a-z]+[0-9]+")


# ---- kinds: how one variable is parsed, and how docs/configuration.md names its type -----------------------

class Kind:
    """How a variable's text becomes a value. ``read`` returns ``default`` when it is unset;
    ``earlier`` holds the settings read before this one (for a setting that depends on one)."""

    def read(self, env: Mapping[str, str], name: str, default: Any, earlier: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Flag(Kind):
    def read(self, env, name, default, earlier):
        raw = env.get(name)
        if raw is None:
            return default
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ConfigError(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no")

    def describe(self) -> str:
        return "boolean"


@dataclass(frozen=True)
class Whole(Kind):
    minimum: int | None = 0
    noun: str = "an integer"
    maximum: int | None = None

    def read(self, env, name, default, earlier):
        raw = env.get(name)
        if raw is None or raw.strip() == "":
            return default
        try:
            value = int(raw)
        except ValueError as exc:
            raise ConfigError(f"{name}={raw!r} is not {self.noun}") from exc
        if self.minimum is not None and value < self.minimum:
            raise ConfigError(f"{name}={value} must be >= {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigError(f"{name}={value} must be <= {self.maximum}")
        return value

    def describe(self) -> str:
        if self.maximum is not None:
            return f"integer {self.minimum}–{self.maximum}"
        return "integer" if self.minimum is None else f"integer ≥ {self.minimum}"


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not a number") from exc


@dataclass(frozen=True)
class Number(Kind):
    def read(self, env, name, default, earlier):
        return _number(env, name, default)

    def describe(self) -> str:
        return "number"


@dataclass(frozen=True)
class Seconds(Kind):
    """A time limit: a finite number of seconds above zero (0, a negative one or nan would end or
    break every call, and inf would wait forever)."""

    quote_raw: bool = False  # the embedder's settings name the text given, not the number

    def read(self, env, name, default, earlier):
        if self.quote_raw:
            raw = env.get(name) or str(default)
            try:
                value = float(raw)
            except ValueError:
                value = math.nan
            if not 0.0 < value < math.inf:
                raise ConfigError(f"{name}={raw!r} must be a positive number of seconds")
            return value
        value = _number(env, name, default)
        if not 0.0 < value < math.inf:
            raise ConfigError(f"{name}={value} must be a positive number of seconds")
        return value

    def describe(self) -> str:
        return "seconds > 0"


@dataclass(frozen=True)
class Backoff(Kind):
    """A wait before a redelivery: 0 (at once) or more seconds, finite."""

    def read(self, env, name, default, earlier):
        value = _number(env, name, default)
        if not 0.0 <= value < math.inf:
            raise ConfigError(f"{name}={value} must be a number of seconds, 0 or more")
        return value

    def describe(self) -> str:
        return "seconds ≥ 0"


@dataclass(frozen=True)
class Fraction(Kind):
    def read(self, env, name, default, earlier):
        value = _number(env, name, default)
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"{name}={value} must be between 0 and 1")
        return value

    def describe(self) -> str:
        return "0 to 1"


@dataclass(frozen=True)
class Choice(Kind):
    """One of ``options``, any case; ``notes`` adds words to a choice in the error's list
    (the default's note is always "default")."""

    options: tuple[str, ...]
    notes: tuple[tuple[str, str], ...] = ()

    def read(self, env, name, default, earlier):
        value = env.get(name, str(default)).strip().lower()
        if value in self.options:
            return value
        notes = dict(self.notes)
        words = []
        for option in self.options:
            note = ", ".join(n for n in ("default" if option == default else "", notes.get(option, "")) if n)
            words.append(f"'{option}'" + (f" ({note})" if note else ""))
        listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
        raise ConfigError(f"{name}={value!r}: use {listed}")

    def describe(self) -> str:
        return " / ".join(f"`{o}`" for o in self.options)


@dataclass(frozen=True)
class Text(Kind):
    """Free text; unset or empty means the default. ``strip`` trims spaces (and ``rstrip``
    these characters from the end) first."""

    strip: bool = False
    rstrip: str = ""
    secret: bool = False

    def read(self, env, name, default, earlier):
        raw = env.get(name) or ""
        if self.strip:
            raw = raw.strip().rstrip(self.rstrip) if self.rstrip else raw.strip()
        if self.secret:
            remember_secret(raw)  # whatever a server echoes back is redacted of it
        return raw or default

    def describe(self) -> str:
        return "secret" if self.secret else "text"


def refuse_non_folder(name: str, raw: str, path: Path) -> None:
    """A ConfigError naming ``name`` when ``path`` exists and is no folder (a file, a link to nothing): no data
    could ever be kept there, and the OS's own error ("File exists: '/etc/passwd'") names neither it nor the fix."""
    try:
        dangling, not_folder = path.is_symlink() and not path.exists(), path.exists() and not path.is_dir()
    except OSError:  # not even looked at (a folder above it unreadable): whatever uses it says so
        return
    if dangling:
        raise ConfigError(f"{name}={raw!r} links to nothing; name a folder")
    if not_folder:
        raise ConfigError(f"{name}={raw!r} is a file, not a folder; name a folder")


@dataclass(frozen=True)
class Directory(Kind):
    def read(self, env, name, default, earlier):
        raw = env.get(name)
        path = (default if raw is None else Path(raw)).expanduser()
        refuse_non_folder(name, str(path) if raw is None else raw, path)
        return path

    def describe(self) -> str:
        return "path"


@dataclass(frozen=True)
class FolderOrOff(Kind):
    """A folder, or ``off`` (``0``, ``false``, ``no``); unset or empty means the default. A word meant as
    "on" (``1``, ``true``, ``yes``) is refused, not taken as a folder of that name in whatever folder a
    command starts in, and so is a path that exists and is not a folder (a file, a link to nothing)."""

    def read(self, env, name, default, earlier):
        raw = (env.get(name) or "").strip()
        if raw.lower() in _TRUE:
            raise ConfigError(f"{name}={raw!r} is not a folder: name a folder, or 'off' (0, false, no) to keep "
                              "nothing; unset, it is $RAGBUS_HOME/cache")
        if raw and raw.lower() not in _FALSE:
            refuse_non_folder(name, raw, Path(raw).expanduser())
        return raw or default

    def describe(self) -> str:
        return "path or `off`"


@dataclass(frozen=True)
class Location(Kind):
    """A Vertex AI location for a model: ``global``, a multi-region (``us``, ``eu``) or a region."""

    def read(self, env, name, default, earlier):
        return model_location(env, name, default)

    def describe(self) -> str:
        return "Vertex AI location"


@dataclass(frozen=True)
class Setting:
    """One row of the table: a variable, how it is read, and what it means."""

    env: str
    kind: Kind
    description: str
    shown: str | None = None  # the default as docs/configuration.md shows it (Markdown), when its value reads badly
    field: str = ""  # the attribute of Settings (dotted for a nested group), filled in below


def setting(env: str, default: Any, kind: Kind, description: str, *, shown: str | None = None,
            secret: bool = False) -> Any:
    """A field of :class:`Settings` read from the variable ``env``: the table's row and the
    dataclass's field in one declaration."""
    return field(default=default, repr=not secret,
                 metadata={"setting": Setting(env, kind, description, shown)})


def _group(cls: type) -> Any:
    """A nested group of settings (its own dataclass declared with :func:`setting`)."""
    return field(default_factory=cls, metadata={"group": cls})


# ---- the table -----------------------------------------------------------------------------

@dataclass(frozen=True)
class GradeThresholds:
    """From the reference grader: accept when all hold and the contexts are grounded."""

    overall: float = setting("RAGBUS_MIN_SCORE", 0.6, Fraction(), "the grader accepts at this overall score or above")
    relevance: float = setting("RAGBUS_MIN_RELEVANCE", 0.65, Fraction(), "the grader's minimum relevance to accept")
    completeness: float = setting("RAGBUS_MIN_COMPLETENESS", 0.55, Fraction(),
                                  "the grader's minimum completeness to accept")


@dataclass(frozen=True)
class Settings:
    home: Path = setting("RAGBUS_HOME", Path(".ragbus"), Directory(), "data directory of the embedded runtime",
                         shown="`./.ragbus`")
    model_cache: str = setting(
        "RAGBUS_MODEL_CACHE", "", FolderOrOff(),
        "local runtime: folder of the packaged embedder's optimised ONNX graph (about 90 MB; a start loads it "
        "instead of optimising the model again, and rebuilds it when missing, stale or damaged); `off` (or `0`, "
        "`false`, `no`): optimise at every start, saving nothing", shown="`$RAGBUS_HOME/cache`")
    runtime: str = setting("RAGBUS_RUNTIME", "local", Choice(("local", "gcp")), "`local` (embedded) or `gcp`")
    allow_loopback: bool = setting(
        "RAGBUS_ALLOW_LOOPBACK", False, Flag(),
        "allow feed/page URLs on 127.0.0.0/8 and ::1 (also `--allow-loopback`); other private, link-local "
        "and reserved ranges are always refused")
    llm_provider: str = setting(
        "RAGBUS_LLM", "local", Choice(("local", *sorted(n for n in PROVIDER_NAMES if n != "local"))),
        ", ".join(f"`{p.name}` ({p.summary})" for p in PROVIDERS[:-1]) + f" or `{PROVIDERS[-1].name}` "
        f"({PROVIDERS[-1].summary}); the registry is `shared/contract/providers.py`")
    # gemini
    gemini_model: str = setting(
        "RAGBUS_GEMINI_MODEL", DEFAULT_GEMINI_MODEL, Text(strip=True),
        "model for the gemini provider (the default is `DEFAULT_GEMINI_MODEL` in `shared/contract/config.py`; "
        "see [Google Cloud](google-cloud.md#the-gemini-model))")
    gemini_location: str = setting(
        "RAGBUS_GEMINI_LOCATION", DEFAULT_GEMINI_LOCATION, Location(),
        "Vertex AI location of the Gemini model: `global`, `us`, `eu` or, for a model regional endpoints serve, "
        "a region (each model's locations: `shared/contract/gemini_locations.json`; a location that does not "
        "serve the model is refused at start-up); not `GOOGLE_CLOUD_LOCATION`, which places the regional resources",
        shown="`global`; `eu` when `GOOGLE_CLOUD_LOCATION` is a `europe-*` region")
    # one HTTP attempt; the SDK makes up to three (gemini.py), and all of them must end before
    # the function's timeout (require_call_budget)
    gemini_timeout_s: float = setting(
        "RAGBUS_GEMINI_TIMEOUT_S", 40.0, Seconds(),
        "one HTTP attempt of a Gemini call; google-genai makes up to 3 (on Cloud Functions all of them must end "
        "before the function's timeout, checked at start-up); the attempts' sockets share one deadline of 3 x "
        "this, however slowly a reply arrives")
    # openai: any OpenAI-compatible chat completions server (Ollama, llama.cpp, vLLM, LM Studio)
    openai_base_url: str | None = setting(
        "RAGBUS_OPENAI_BASE_URL", None, Text(strip=True, rstrip="/"),
        "`RAGBUS_LLM=openai`: the server's API base as the OpenAI SDK takes it, usually ending in `/v1`, "
        "without a query or fragment (required)")
    openai_model: str | None = setting(
        "RAGBUS_OPENAI_MODEL", None, Text(strip=True),
        "`RAGBUS_LLM=openai`: a model the server serves, one of the ids `GET <base>/models` lists (required)")
    openai_api_key: str | None = setting(
        "RAGBUS_OPENAI_API_KEY", None, Text(strip=True, secret=True),
        "sent as `Authorization: Bearer` (over https, or plain http to 127.0.0.1/localhost only; printable ASCII, "
        "no spaces or line breaks: refused at start-up otherwise); "
        "`OPENAI_API_KEY` is read only for `https://api.openai.com`; local servers need none", secret=True)
    openai_timeout_s: float = setting(
        "RAGBUS_OPENAI_TIMEOUT_S", 60.0, Seconds(),
        "one model call's time limit in seconds, above 0 (a slow local model may need more): one deadline for "
        "the whole call (connecting, the headers, every byte of the reply, retries), cut to the query's own "
        "time left; a reply is read up to 4 MiB")
    # feeds
    removed_item_policy: str = setting(
        "RAGBUS_REMOVED_ITEMS", "remove", Choice(("remove", "keep")),
        "an item gone from a feed that parsed cleanly: `remove` its chunks, or `keep` them (for feeds that "
        "page old items out)")
    # query loop
    max_iterations: int = setting("RAGBUS_MAX_ITERATIONS", 2, Whole(0), "refinement rounds after the first retrieval")
    max_model_calls: int = setting("RAGBUS_MAX_MODEL_CALLS", 12, Whole(1), "model calls one query may spend")
    top_k: int = setting("RAGBUS_TOP_K", 10, Whole(1), "contexts kept per iteration")
    query_timeout_s: float = setting("RAGBUS_QUERY_TIMEOUT_S", 60.0, Seconds(),
                                     "a query not answered by then ends `timed_out`")
    max_queued_queries: int = setting(
        "RAGBUS_MAX_QUEUED_QUERIES", 64, Whole(1),
        "questions one gateway (`ragbus serve`) holds queued or running at once (REST, chat completions and MCP "
        "together); one more is refused at once (429 with `Retry-After`), not queued to time out")
    # issue 27: off, time words are only words, with the month and year a provider adds (the old proxy)
    time_filter: bool = setting(
        "RAGBUS_TIME_FILTER", True, Flag(),
        "read the question's time words (\"latest\", \"last week\", \"in 2025\") as a published-date filter; "
        "`0` searches them as words, with the month and year the model adds")
    thresholds: GradeThresholds = _group(GradeThresholds)
    # bus
    max_delivery_attempts: int = setting("RAGBUS_MAX_DELIVERY_ATTEMPTS", 5, Whole(1),
                                         "deliveries before a message is dead-lettered")
    # Cloud Functions: older events are acknowledged unhandled (a poison message cannot retry forever)
    event_max_age_s: float = setting("RAGBUS_EVENT_MAX_AGE_S", 86400.0, Seconds(),
                                     "Cloud Functions entry points acknowledge unhandled an event older than this")
    ack_deadline_s: float = setting(
        "RAGBUS_ACK_DEADLINE_S", 60.0, Seconds(),
        "lease of a delivery; extended every third of it while the handler runs (up to an hour), so only a "
        "dead or stuck worker's delivery goes to another; a delivery whose lease ran out "
        "`RAGBUS_MAX_DELIVERY_ATTEMPTS` times is dead-lettered; on Cloud Functions, the function's timeout")
    # On Cloud Run / Cloud Functions (K_SERVICE set) infra sets RAGBUS_ACK_DEADLINE_S to the
    # function's timeout: the time a model call's retries must fit in (require_call_budget).
    # None elsewhere (the embedded runtime, the emulator topology): no function kills a call.
    function_timeout_s: float | None = None
    retry_min_backoff_s: float = setting("RAGBUS_RETRY_MIN_BACKOFF_S", 0.5, Backoff(),
                                         "first wait of the exponential redelivery backoff")
    retry_max_backoff_s: float = setting("RAGBUS_RETRY_MAX_BACKOFF_S", 60.0, Backoff(),
                                         "longest wait of the exponential redelivery backoff")
    # fetching untrusted pages; bounds on the work one untrusted input can cause (issue 10)
    fetch_timeout_s: float = setting("RAGBUS_FETCH_TIMEOUT_S", 10.0, Seconds(), "one request of an article fetch")
    fetch_max_bytes: int = setting(
        "RAGBUS_FETCH_MAX_BYTES", 5 * 1024 * 1024, Whole(1024),
        "the largest body fetched (the cap also bounds a body while it is decompressed)", shown="`5242880` (5 MiB)")
    fetch_retries: int = 3
    fetch_max_redirects: int = 5
    fetch_deadline_s: float = setting(
        "RAGBUS_FETCH_DEADLINE_S", 30.0, Seconds(),
        "total time for one fetch, every retry and redirect included (a server dripping bytes costs this, "
        "not minutes)")
    fetch_host_concurrency: int = setting("RAGBUS_FETCH_HOST_CONCURRENCY", 4, Whole(1),
                                          "per process, requests in flight to one host")
    fetch_host_rate: float = setting("RAGBUS_FETCH_HOST_RATE", 10.0, Number(),
                                     "per process, requests started per second to one host")
    request_read_timeout_s: float = setting(
        "RAGBUS_REQUEST_READ_TIMEOUT_S", 30.0, Seconds(),
        "time a client of `ragbus serve` has to send one whole request, headers and body; a slower one is "
        "answered 408 and disconnected (the answer, an event stream included, is not bounded by it)")
    max_connections: int = setting(
        "RAGBUS_MAX_CONNECTIONS", 256, Whole(1),
        "connections `ragbus serve` holds at once, event streams included; one more is answered 503 and "
        "disconnected at once (each is a socket and a file descriptor), unless a kept-alive connection waits "
        "for a next request: the longest waiting is closed to make room")
    max_connections_per_address: int = setting(
        "RAGBUS_MAX_CONNECTIONS_PER_ADDRESS", 64, Whole(1),
        "connections `ragbus serve` holds at once from one client address, so that one cannot take all of "
        "RAGBUS_MAX_CONNECTIONS; one more from it is answered 429 and disconnected at once (or, as above, one "
        "of its kept-alive connections closed). Behind a reverse "
        "proxy every client has the proxy's address: raise it to RAGBUS_MAX_CONNECTIONS")
    max_items_per_poll: int = setting(
        "RAGBUS_MAX_ITEMS_PER_POLL", 200, Whole(1),
        "items fetched per feed per poll, newest first; the rest on later polls (`feeds list` says how many wait)")
    max_title_chars: int = setting(
        "RAGBUS_MAX_TITLE_CHARS", 500, Whole(20),
        "titles (and dates) from feeds and documents are cut to this before they reach the header and the chunks")
    max_chunks_per_document: int = setting(
        "RAGBUS_MAX_CHUNKS_PER_DOCUMENT", 2000, Whole(1),
        "a longer document is refused whole with a dead letter naming the cap (a text over the characters that "
        "many chunks can hold, before its text is read); its earlier version stays indexed")
    # reading files (shared/formats): a bound reached refuses or cuts that file alone, named
    max_pages: int = setting(
        "RAGBUS_MAX_PAGES", 1000, Whole(1),
        "pages (slides, e-book chapters) of one file read; the rest are cut and counted as not read")
    max_rows: int = setting(
        "RAGBUS_MAX_ROWS", 100_000, Whole(1), "rows of one spreadsheet (.xlsx, .csv, .tsv) read; the rest are cut")
    parse_seconds: float = setting(
        "RAGBUS_PARSE_SECONDS", 120.0, Seconds(),
        "time to read one PDF, Office file, e-book or text file over 128 KiB (reStructuredText: 4 KiB) in its own "
        "process; a slower file is stopped and refused")
    parse_memory_mb: int = setting(
        "RAGBUS_PARSE_MEMORY_MB", 1024, Whole(64),
        "address space of the process reading one PDF, Office file, e-book or text file over 128 KiB "
        "(reStructuredText: 4 KiB); a file needing more is refused")
    zip_max_entries: int = setting(
        "RAGBUS_ZIP_MAX_ENTRIES", 10_000, Whole(1),
        "entries of an Office file or e-book (a zip container); more is refused as a zip bomb")
    zip_max_mb: int = setting(
        "RAGBUS_ZIP_MAX_MB", 200, Whole(1),
        "expanded size of an Office file's or e-book's entries, all together; more is refused as a zip bomb")
    zip_max_ratio: int = setting(
        "RAGBUS_ZIP_MAX_RATIO", 200, Whole(1),
        "how many times its compressed size one entry (over 1 MB) may expand to; more is refused as a zip bomb")
    ocr: bool = setting(
        "RAGBUS_OCR", True, Flag(),
        "read PDF pages without a text layer by OCR (Debian's `tesseract-ocr`); without the engine, or off, such "
        "pages are skipped and counted")
    ocr_max_pages: int = setting(
        "RAGBUS_OCR_MAX_PAGES", 50, Whole(0), "pages of one PDF read by OCR (about 2 s each); the rest are skipped and counted")
    # Document AI's layout parser as the PDF reader (shared/adapters/gcp/document_ai.py; checked at start-up)
    pdf_reader: str = setting(
        "RAGBUS_PDF_READER", "local", Choice(("local", "documentai"), notes=(("documentai", "Google Cloud"),)),
        "who reads a PDF: PDFium and OCR in process (`local`) or Document AI's layout parser (`documentai`, "
        "with `RAGBUS_DOCUMENTAI_PROCESSOR`; pages billed by Google; see [Google Cloud](google-cloud.md#pdfs-read-by-document-ai))")
    documentai_processor: str | None = setting(
        "RAGBUS_DOCUMENTAI_PROCESSOR", None, Text(strip=True),
        "`RAGBUS_PDF_READER=documentai`: the layout parser processor, `projects/P/locations/L/processors/ID` "
        "(its default version; add `/processorVersions/V` to pin one) or its id (with `GOOGLE_CLOUD_PROJECT`; "
        "infra/ sets it)")
    documentai_location: str = setting(
        "RAGBUS_DOCUMENTAI_LOCATION", "us", Choice(("us", "eu")),
        "`RAGBUS_PDF_READER=documentai`: the processor's location, where its documents are processed")
    documentai_endpoint: str | None = setting(
        "RAGBUS_DOCUMENTAI_ENDPOINT", None, Text(strip=True, rstrip="/"),
        "`RAGBUS_PDF_READER=documentai`: the API base (default `https://{location}-documentai.googleapis.com`); "
        "plain http to 127.0.0.1/localhost only, which is sent no credentials (a stand-in in tests)")
    documentai_pages: int = setting(
        "RAGBUS_DOCUMENTAI_PAGES", 15, Whole(1, maximum=15),
        "pages of a PDF sent in one request: a longer PDF is split into pieces of this many pages (15 is the "
        "layout parser's online limit)")
    documentai_timeout_s: float = setting(
        "RAGBUS_DOCUMENTAI_TIMEOUT_S", 60.0, Seconds(),
        "one request to Document AI, its retries included; below `RAGBUS_PARSE_SECONDS`, which bounds the whole file")
    # front doors
    api_token: str | None = setting(
        "RAGBUS_API_TOKEN", None, Text(strip=True, secret=True),
        "bearer token for the API and MCP (printable ASCII, no spaces); required by `ragbus serve --host` on a "
        "non-loopback address; the cloud gateway honours it too (behind Cloud Run IAM, send the identity token "
        "as `X-Serverless-Authorization`)", shown="unset", secret=True)
    gateway_host: str = setting("RAGBUS_GATEWAY_HOST", "0.0.0.0", Text(),
                                "the gateway function's bind address (the one `RAGBUS_API_TOKEN` is checked for)")
    poll_interval_s: float = setting("RAGBUS_POLL_INTERVAL_S", 900.0, Seconds(), "scheduled polling in `ragbus serve`")
    tracing: bool = setting("RAGBUS_TRACING", True, Flag(), "OpenTelemetry spans to `traces.db`")
    redact_query_text: bool = setting("RAGBUS_REDACT_QUERY_TEXT", False, Flag(), "keep query text out of spans")
    demo_port: int = setting("RAGBUS_DEMO_PORT", 8080, Whole(0),
                             "port of `ragbus demo`'s page and sample feed (the sample citations name it); "
                             "`ragbus serve`'s default")
    query_ttl_days: int = setting("RAGBUS_QUERY_TTL_DAYS", 30, Whole(1),
                                  "query records' `expire_at` (Firestore TTL in gcp); a conversation expires "
                                  "with its newest turn")
    # Retention of the embedded runtime (issue 35, problem 8): without it a long-running `serve` grows
    # until the disk is full. Swept when a runtime starts and every hour while it runs.
    trace_retention_days: int = setting(
        "RAGBUS_TRACE_RETENTION_DAYS", 7, Whole(1),
        "embedded runtime: spans in `traces.db` older than this are deleted (Cloud Trace keeps its own 30 days); "
        "the topology of `ragbus up` holds its own span store and those earlier topologies left "
        "(`topology/traces-until-*.db`) to it too")
    tombstone_retention_days: int = setting(
        "RAGBUS_TOMBSTONE_RETENTION_DAYS", 30, Whole(1),
        "the record a delete leaves (so that no older fetch, retry or run brings the document back) is deleted "
        "this long after the delete, unless a dead letter names the document or the delete's message is still "
        "owed: by the embedded runtime's sweep; in gcp by Firestore TTL on its `expire_at` (at least 7 days, the "
        "time Pub/Sub keeps a message)")
    bus_retention_s: float = setting(
        "RAGBUS_BUS_RETENTION_S", 3600.0, Seconds(),
        "embedded runtime: delivered (acknowledged) bus messages older than this are deleted; query records "
        "and conversations past their `expire_at` (RAGBUS_QUERY_TTL_DAYS) are deleted by the same sweep")
    # A follow-up's history (earlier turns of its conversation, or what the caller sent): the newest
    # turns kept, bounded so a prompt and a stored record stay small whatever a client sends.
    conversation_max_turns: int = setting(
        "RAGBUS_CONVERSATION_MAX_TURNS", 6, Whole(1, maximum=50),
        "the earlier turns of a conversation a follow-up is read with: at most this many, the newest")
    conversation_max_chars: int = setting(
        "RAGBUS_CONVERSATION_MAX_CHARS", 6000, Whole(200, maximum=100_000),
        "the characters of earlier questions and answers a follow-up is read with (older turns dropped first; "
        "the newest is cut to fit, never dropped); at most 100000, so a query record holding a caller's "
        "history stays far below Firestore's 1 MiB")
    # gcp runtime
    gcp_project: str | None = setting("GOOGLE_CLOUD_PROJECT", None, Text(),
                                      "the Google Cloud project (required with `RAGBUS_RUNTIME=gcp`)")
    # the functions' region: Vector Search, regional embedding models
    gcp_location: str | None = setting(
        "GOOGLE_CLOUD_LOCATION", None, Text(),
        "the functions' region: Vector Search and regional embedding models (not Gemini's location)")
    bucket: str | None = setting("RAGBUS_BUCKET", None, Text(),
                                 "the bucket for raw and clean text (required with `RAGBUS_RUNTIME=gcp`)")
    firestore_database: str | None = setting("RAGBUS_FIRESTORE_DATABASE", None, Text(),
                                             "gcp: the Firestore database id, when not `(default)`")
    index_backend: str = setting(
        "RAGBUS_INDEX", "firestore", Choice(("firestore", "vertex")),
        "gcp: the vector index, Firestore's `find_nearest` or Vertex AI Vector Search (`vertex`, with "
        "`RAGBUS_VERTEX_INDEX`, `_ENDPOINT`, `_DEPLOYED_INDEX`)")
    vertex_index: str | None = setting("RAGBUS_VERTEX_INDEX", None, Text(),
                                       "`RAGBUS_INDEX=vertex`: the Vector Search index")
    vertex_endpoint: str | None = setting("RAGBUS_VERTEX_ENDPOINT", None, Text(),
                                          "`RAGBUS_INDEX=vertex`: the index endpoint")
    vertex_deployed_index: str | None = setting("RAGBUS_VERTEX_DEPLOYED_INDEX", None, Text(),
                                                "`RAGBUS_INDEX=vertex`: the deployed index's id")
    embedder: str = setting(
        "RAGBUS_EMBEDDER", "local", Choice(("local", "genai"), notes=(("local", "packaged MiniLM"),)),
        "gcp: the packaged MiniLM (`local`) or google-genai embeddings (`genai`)")
    embed_model: str = setting("RAGBUS_EMBED_MODEL", "gemini-embedding-001", Text(),
                               "`RAGBUS_EMBEDDER=genai`: the embedding model")
    embed_dimension: int = setting("RAGBUS_EMBED_DIMENSION", 768, Whole(None, "a whole number"),
                                   "`RAGBUS_EMBEDDER=genai`: the vector size")
    # Requests in flight at once per embed call: bounded, so one document cannot exhaust the
    # project's per-minute quota in a burst (429s are retried with backoff all the same).
    embed_concurrency: int = setting("RAGBUS_EMBED_CONCURRENCY", 8, Whole(None, "a whole number"),
                                     "`RAGBUS_EMBEDDER=genai`: embedding requests in flight at once")
    # An online embedding request answers in well under a second; with 4 attempts and backoff the
    # worst case (87 s) still ends inside the shortest function that embeds (the retriever's 120 s).
    embed_timeout_s: float = setting("RAGBUS_EMBED_TIMEOUT_S", 20.0, Seconds(quote_raw=True),
                                     "`RAGBUS_EMBEDDER=genai`: one attempt of an embedding request")
    embed_location: str | None = setting(
        "RAGBUS_EMBED_LOCATION", None, Location(),
        "`RAGBUS_EMBEDDER=genai` on Vertex AI: where the model is served; unset, `GOOGLE_CLOUD_LOCATION`, or "
        "`RAGBUS_GEMINI_LOCATION` for a model served only from global/us/eu (gemini-embedding-2)")
    # not settings: constants of the query loop
    max_query_chars: int = 2000
    grade_contexts: int = 15
    grade_context_chars: int = 500
    max_sub_queries: int = 5
    min_sub_queries_for_synthesis: int = 2

    @property
    def db_path(self) -> Path:
        return self.home / "ragbus.db"

    @property
    def bus_path(self) -> Path:
        return self.home / "bus.db"

    @property
    def traces_path(self) -> Path:
        return self.home / "traces.db"

    @property
    def blob_dir(self) -> Path:
        return self.home / "blobs"

    @property
    def index_dir(self) -> Path:
        return self.home / "index"

    @property
    def model_cache_dir(self) -> Path | None:
        """Where the local embedder caches its optimised graph; None when RAGBUS_MODEL_CACHE is ``off``."""
        if not self.model_cache:
            return self.home / "cache"
        return None if self.model_cache.lower() in _FALSE else Path(self.model_cache).expanduser()

    @property
    def llm_model(self) -> str | None:
        """The model the configured provider calls (None for the local provider, which has none)."""
        field_name = PROVIDER_BY_NAME[self.llm_provider].model_setting
        return getattr(self, field_name) if field_name else None

    def with_(self, **changes) -> Settings:
        return replace(self, **changes)


#: Every default, as the dataclass writes it: load_settings reads none of its own.
DEFAULTS = Settings()

#: Variables read before (and whether or not) the settings load, or by a library: documented
#: with the rest; each names its reader.
OTHER_VARIABLES: tuple[Setting, ...] = (
    Setting("RAGBUS_LOG_FORMAT", Text(), "`json` for one JSON object per line (automatic on Cloud Functions); "
            "read by `json_logs_setting`", shown="text"),
    Setting("RAGBUS_LOG_LEVEL", Text(), "log level, any case; `debug` also shows tracebacks in the CLI (same as "
            "`ragbus --debug`); read by `log_level_setting`", shown="`WARNING` (CLI)"),
    Setting("OTEL_EXPORTER_OTLP_ENDPOINT", Text(), "also export traces and metrics over OTLP/HTTP (signed with "
            "Google credentials when the host is `*.googleapis.com`)"),
    Setting("FORWARDED_ALLOW_IPS", Text(), "gunicorn/uvicorn: peers whose `X-Forwarded-Proto` is trusted; "
            "`infra/` sets `*` on the gateway function, behind Cloud Run's TLS front end", shown="`127.0.0.1,::1`"),
)


def _rows(cls: type, prefix: str = "") -> tuple[Setting, ...]:
    out: list[Setting] = []
    for f in fields(cls):
        if "setting" in f.metadata:
            out.append(replace(f.metadata["setting"], field=prefix + f.name))
        elif "group" in f.metadata:
            out.extend(_rows(f.metadata["group"], f"{prefix}{f.name}."))
    return tuple(out)


#: The table: every variable the settings read, in the order docs/configuration.md lists them.
SETTINGS: tuple[Setting, ...] = _rows(Settings)
SETTING_BY_ENV: dict[str, Setting] = {s.env: s for s in SETTINGS}
SETTING_BY_FIELD: dict[str, Setting] = {s.field: s for s in SETTINGS}


def is_set(field: str, env: Mapping[str, str]) -> bool:
    """Whether ``env`` names the setting ``field`` at all: a choice made, even of the default value."""
    return SETTING_BY_FIELD[field].env in env


def _read(cls: type, env: Mapping[str, str], earlier: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in fields(cls):
        if "setting" in f.metadata:
            row: Setting = f.metadata["setting"]
            values[f.name] = earlier[f.name] = row.kind.read(env, row.env, f.default, earlier)
        elif "group" in f.metadata:
            group = f.metadata["group"]
            values[f.name] = group(**_read(group, env, {}))
    return values


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``env`` (default: the process environment), read by the table."""
    env = dict(os.environ if env is None else env)
    values = _read(Settings, env, {})
    for provider in PROVIDERS:
        if provider.standard_key and provider.key_setting:
            # e.g. OPENAI_API_KEY (which the OpenAI SDK reads) only when the base URL is OpenAI's own
            # API: a user's OpenAI key is not sent to a LAN Ollama box or any other server.
            values[provider.key_setting] = values[provider.key_setting] or _standard_key(env, provider, values)
    require_provider(PROVIDER_BY_NAME[values["llm_provider"]], values)
    if values["pdf_reader"] == "documentai":
        values["documentai_processor"] = documentai_processor_name(values, env)
    _check_api_token(values["api_token"])
    _check_provider_key(PROVIDER_BY_NAME[values["llm_provider"]], values, env)
    if values["llm_provider"] == "gemini" or values["embedder"] == "genai":
        for variable in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):  # google-genai reads them itself
            _check_header_secret(variable, (env.get(variable) or "").strip(), "every call to Gemini would fail",
                                 "the key exactly as Google issued it")
    # Whatever a model server or proxy echoes back is redacted of these (shared.contract.redaction).
    for provider in PROVIDERS:
        if provider.key_setting:
            remember_secret((values[provider.key_setting] or "").strip())
        if provider.base_url_setting:
            remember_url_credentials(values[provider.base_url_setting])
    for secret in (env.get("GOOGLE_API_KEY"), env.get("GEMINI_API_KEY")):
        remember_secret((secret or "").strip())
    if values["retry_min_backoff_s"] > values["retry_max_backoff_s"]:
        raise ConfigError(f"RAGBUS_RETRY_MIN_BACKOFF_S={values['retry_min_backoff_s']} is above "
                          f"RAGBUS_RETRY_MAX_BACKOFF_S={values['retry_max_backoff_s']}")
    if "K_SERVICE" in env:
        values["function_timeout_s"] = values["ack_deadline_s"]
    if not (env.get("RAGBUS_GEMINI_LOCATION") or "").strip():
        # An EU deployment keeps Gemini's processing in the EU multi-region unless told otherwise.
        values["gemini_location"] = default_location(values["gcp_location"])
    return Settings(**values)


def provider_missing(name: str, env: Mapping[str, str]) -> str | None:
    """None when the provider ``name`` can run with ``env`` (the eval's test); else what is missing."""
    provider = PROVIDER_BY_NAME[name]
    if not provider.needs_one_of or any((env.get(v) or "").strip() for v in provider.needs_one_of):
        return None
    return provider.unconfigured


def settings_table() -> str:
    """The table as docs/configuration.md holds it (``python -m shared.tools.docs``)."""
    lines = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for row in (*SETTINGS, *OTHER_VARIABLES):
        lines.append(f"| `{row.env}` | {row.kind.describe()} | {_shown_default(row)} | {row.description} |")
    return "\n".join(lines) + "\n"


def _shown_default(row: Setting) -> str:
    if row.shown is not None:
        return row.shown
    if not row.field:
        return "—"
    value: Any = DEFAULTS
    for part in row.field.split("."):
        value = getattr(value, part)
    if value is None:
        return "—"
    if isinstance(value, bool):
        return f"`{int(value)}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


def model_location(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """A Vertex AI location for a model: ``global``, a multi-region (``us``, ``eu``) or a region."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    value = raw.lower()
    if value in MULTI_REGIONAL_LOCATIONS or _REGION.fullmatch(value):
        return value
    raise ConfigError(f"{name}={raw!r} is not a Vertex AI location; use 'global' (the default), a "
                      "multi-region ('us', 'eu') or a region such as europe-west4")


def require_call_budget(settings: Settings, *, who: str, budget_s: float, formula: str, knob: str) -> None:
    """Refuse a model whose whole retry budget outlasts the function that calls it.

    On Cloud Run a call still running at the function's timeout is killed, the message is
    redelivered and a delivery attempt is spent on nothing. The function's timeout reaches the
    code as RAGBUS_ACK_DEADLINE_S (infra/functions.tf sets the two equal), so this is checked
    where a function runs (``settings.function_timeout_s``); elsewhere nothing kills the call.
    """
    limit = settings.function_timeout_s
    if limit is None or budget_s < limit:
        return
    raise ConfigError(
        f"{who}: one model call may take up to {budget_s:g} s ({formula}), not less than "
        f"this function's timeout of {limit:g} s (RAGBUS_ACK_DEADLINE_S); lower {knob} "
        "or raise the function's timeout"
    )


def require_provider_budget(settings: Settings, provider: Provider) -> None:
    """:func:`require_call_budget` for a model provider, from its row's
    :class:`~shared.contract.providers.CallBudget` (the plan checks the same, infra/registry.tf)."""
    budget = provider.call_budget
    if budget is None:
        return
    timeout_s = getattr(settings, budget.setting)
    knob = SETTING_BY_FIELD[budget.setting].env
    require_call_budget(settings, who=f"RAGBUS_LLM={provider.name}", budget_s=budget.seconds(timeout_s),
                        formula=f"{budget.formula}; {knob}={timeout_s:g} s", knob=knob)


#: The shortest RAGBUS_API_TOKEN accepted for a gateway other machines can reach: 16 random
#: characters (~95 bits from base64url) cannot be guessed over HTTP; "a" or "secret" can.
MIN_REMOTE_TOKEN_CHARS = 16
_TOKEN_HINT = "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def _check_header_secret(variable: str, value: str | None, consequence: str, remedy: str) -> None:
    """A token or key sent in an ``Authorization`` header: printable ASCII only, since a header
    carries no other characters intact (a token with "é" could never match what a client sends; a
    key with a pasted line break fails every call before it leaves). The message never shows the
    secret, only what kind of character is wrong."""
    bad = next((c for c in value or "" if not "!" <= c <= "~"), None)
    if bad is None:
        return
    what = ("a line break" if bad in "\r\n" else "a space" if bad.isspace()
            else f"the control character U+{ord(bad):04X}" if not bad.isprintable() else repr(bad))
    raise ConfigError(f"{variable} holds {what}, which no Authorization header can carry as it is, so {consequence}; "
                      f"use {remedy}")


def _check_api_token(token: str | None) -> None:
    _check_header_secret("RAGBUS_API_TOKEN", token, "no client could ever match it",
                         f"printable ASCII without spaces ({_TOKEN_HINT})")


def _check_provider_key(provider: Provider, values: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """The chosen provider's key (``RAGBUS_OPENAI_API_KEY``, else the vendor's ``OPENAI_API_KEY``)."""
    if not provider.key_setting:
        return
    variable = SETTING_BY_FIELD[provider.key_setting].env
    if not (env.get(variable) or "").strip() and provider.standard_key:
        variable = provider.standard_key[0]
    _check_header_secret(variable, values[provider.key_setting], "every call to the model would fail",
                         "the key exactly as the server issued it")


def check_api_token(token: str | None, host: str) -> None:
    """Refuse a token too weak to guard a gateway bound to ``host`` (not loopback)."""
    if token is None or host in _LOOPBACK_HOSTS:
        return
    if len(token) < MIN_REMOTE_TOKEN_CHARS or len(set(token)) < 4:
        raise ConfigError(f"RAGBUS_API_TOKEN is too weak to guard a gateway on {host}, which other machines "
                          f"can reach: use at least {MIN_REMOTE_TOKEN_CHARS} random characters ({_TOKEN_HINT})")
_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


def _standard_key(env: Mapping[str, str], provider: Provider, values: Mapping[str, Any]) -> str | None:
    """The vendor's standard key variable (``OPENAI_API_KEY``), for the vendor's own API only."""
    assert provider.standard_key and provider.base_url_setting
    variable, api_host = provider.standard_key
    base_url = values[provider.base_url_setting]
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    return (env.get(variable) or "").strip() or None if host == api_host else None


def redacted_url(url: str) -> str:
    """``url`` without a ``user:password@`` part, for messages and logs."""
    scheme, netloc, path, query, fragment = urlsplit(url)
    if "@" not in netloc:
        return url
    return urlunsplit((scheme, "***@" + netloc.rsplit("@", 1)[1], path, query, fragment))


def require_provider(provider: Provider, values: Mapping[str, Any]) -> None:
    """What the chosen provider's row requires (:class:`~shared.contract.providers.Required`), its API
    base an http(s) URL without query or fragment, and its key never sent in clear text."""
    missing = [f"{SETTING_BY_FIELD[r.setting].env} ({r.hint})" for r in provider.required if not values[r.setting]]
    base_url = values[provider.base_url_setting] if provider.base_url_setting else None
    if base_url:
        variable = SETTING_BY_FIELD[provider.base_url_setting].env
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{variable}={redacted_url(base_url)!r} is not an http(s) URL; "
                              "use e.g. http://127.0.0.1:11434/v1")
        if parts.query or parts.fragment or base_url.endswith(("?", "#")):
            # requests would go to ".../v1?query/chat/completions", and a key in the query would be named
            # wherever the server is (redacted_url drops only user:password)
            raise ConfigError(f"{variable}={redacted_url(urlunsplit(parts[:3] + ('', '')))!r} carries a query or "
                              "fragment; the API base is scheme, host and path (e.g. https://llm.example.com/v1), "
                              f"and a key goes in {SETTING_BY_FIELD[provider.key_setting].env if provider.key_setting else 'its key setting'}")
        if provider.key_setting and values[provider.key_setting] and parts.scheme == "http" \
                and parts.hostname not in _LOOPBACK_HOSTS:
            raise ConfigError(f"{SETTING_BY_FIELD[provider.key_setting].env} would be sent in clear text to "
                              f"{redacted_url(base_url)}: use https for a server on another host (plain http only "
                              "to 127.0.0.1/localhost)")
    if missing:
        raise ConfigError(f"RAGBUS_LLM={provider.name} needs: " + "; ".join(missing) + "; or use RAGBUS_LLM=local")


# a processor (served at its default version) or one of its versions (a pinned one)
_DOCUMENTAI_PROCESSOR = re.compile(r"projects/([^/]+)/locations/([^/]+)/processors/([^/]+)(?:/processorVersions/([^/]+))?")


def documentai_processor_name(values: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The layout parser processor's full resource name for ``RAGBUS_PDF_READER=documentai``:
    ``RAGBUS_DOCUMENTAI_PROCESSOR`` as given, or its id in ``GOOGLE_CLOUD_PROJECT`` and
    ``RAGBUS_DOCUMENTAI_LOCATION``. What is missing or contradicts itself is named, at start-up."""
    given = values["documentai_processor"]
    location = values["documentai_location"]
    if not given:
        raise ConfigError("RAGBUS_PDF_READER=documentai needs RAGBUS_DOCUMENTAI_PROCESSOR (the layout parser "
                          "processor: projects/P/locations/L/processors/ID, or its id with GOOGLE_CLOUD_PROJECT); "
                          "or use RAGBUS_PDF_READER=local")
    named = _DOCUMENTAI_PROCESSOR.fullmatch(given)
    if named:
        if named.group(2) not in ("us", "eu"):
            raise ConfigError(f"RAGBUS_DOCUMENTAI_PROCESSOR={given!r} is in location {named.group(2)!r}; Document "
                              "AI processors live in 'us' or 'eu'")
        if is_set("documentai_location", env) and named.group(2) != location:
            raise ConfigError(f"RAGBUS_DOCUMENTAI_PROCESSOR={given!r} is in {named.group(2)!r} but "
                              f"RAGBUS_DOCUMENTAI_LOCATION={location!r}; name one location (or leave the second unset)")
        name = given
    elif "/" in given:
        raise ConfigError(f"RAGBUS_DOCUMENTAI_PROCESSOR={given!r} is neither a processor id nor "
                          "projects/P/locations/L/processors/ID[/processorVersions/V]")
    elif not values["gcp_project"]:
        raise ConfigError(f"RAGBUS_DOCUMENTAI_PROCESSOR={given!r} is an id: its project (GOOGLE_CLOUD_PROJECT) is "
                          "needed, or give the full name projects/P/locations/L/processors/ID")
    else:
        name = f"projects/{values['gcp_project']}/locations/{location}/processors/{given}"
    if values["documentai_timeout_s"] >= values["parse_seconds"]:
        raise ConfigError(f"RAGBUS_DOCUMENTAI_TIMEOUT_S={values['documentai_timeout_s']:g} is not below "
                          f"RAGBUS_PARSE_SECONDS={values['parse_seconds']:g}, which bounds the whole file: one "
                          "request could never finish in time; lower the first or raise the second")
    endpoint = values["documentai_endpoint"]
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise ConfigError(f"RAGBUS_DOCUMENTAI_ENDPOINT={redacted_url(endpoint)!r} is not an http(s) API base "
                              "(scheme, host and an optional path)")
        if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
            raise ConfigError(f"RAGBUS_DOCUMENTAI_ENDPOINT={redacted_url(endpoint)!r}: plain http only to "
                              "127.0.0.1/localhost (a stand-in); Google's endpoint is https")
    return name


def documentai_location_of(processor: str) -> str:
    """The location a full processor name lives in ("us" for projects/p/locations/us/processors/x)."""
    named = _DOCUMENTAI_PROCESSOR.fullmatch(processor)
    if not named:
        raise ConfigError(f"{processor!r} is not a processor name (projects/P/locations/L/processors/ID)")
    return named.group(2)


def require_gcp(settings: Settings) -> None:
    """Refuse to start the gcp runtime without what it needs, naming each missing variable."""
    missing = []
    if not settings.gcp_project:
        missing.append("GOOGLE_CLOUD_PROJECT (the project id)")
    if not settings.bucket:
        missing.append("RAGBUS_BUCKET (the bucket for raw and clean text)")
    if settings.index_backend == "vertex":
        for name, value in (("RAGBUS_VERTEX_INDEX", settings.vertex_index),
                            ("RAGBUS_VERTEX_ENDPOINT", settings.vertex_endpoint),
                            ("RAGBUS_VERTEX_DEPLOYED_INDEX", settings.vertex_deployed_index)):
            if not value:
                missing.append(f"{name} (RAGBUS_INDEX=vertex)")
    # Gemini itself has RAGBUS_GEMINI_LOCATION (default global); these are regional resources.
    if settings.index_backend == "vertex" and not settings.gcp_location:
        missing.append("GOOGLE_CLOUD_LOCATION (the region of the Vector Search index)")
    if settings.embedder == "genai" and not settings.gcp_location and not settings.embed_location \
            and not (os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")):
        missing.append("GOOGLE_CLOUD_LOCATION or RAGBUS_EMBED_LOCATION (Vertex AI location of the embedding "
                       "model), or GOOGLE_API_KEY for the Gemini API")
    if missing:
        raise ConfigError("RAGBUS_RUNTIME=gcp needs: " + "; ".join(missing))


# Logging is configured before (and whether or not) the other settings load, so its two
# variables are read on their own (OTHER_VARIABLES documents them).


def log_level_setting(env: Mapping[str, str] | None = None) -> str | None:
    """``RAGBUS_LOG_LEVEL`` as given (any case), or None when unset."""
    return (os.environ if env is None else env).get("RAGBUS_LOG_LEVEL") or None


def json_logs_setting(env: Mapping[str, str] | None = None) -> bool:
    """``RAGBUS_LOG_FORMAT=json``, or running on Cloud Run / Cloud Functions (``K_SERVICE``)."""
    env = os.environ if env is None else env
    return env.get("RAGBUS_LOG_FORMAT", "").lower() == "json" or "K_SERVICE" in env
