"""Settings from the environment, with local defaults.

Everything has a default that works on a fresh machine with no account; the gcp
runtime checks its required settings at start-up and names any that is missing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from shared.contract.errors import ConfigError
from shared.contract.redaction import remember_secret, remember_url_credentials

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _bool(env: dict[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no")


def _int(env: dict[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not an integer") from exc
    if value < minimum:
        raise ConfigError(f"{name}={value} must be >= {minimum}")
    return value


def _float(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not a number") from exc


def _seconds(env: dict[str, str], name: str, default: float) -> float:
    """A time limit: a finite number of seconds above zero (0, a negative one or nan would end or
    break every call, and inf would wait forever)."""
    value = _float(env, name, default)
    if not 0.0 < value < float("inf"):
        raise ConfigError(f"{name}={value} must be a positive number of seconds")
    return value


def _backoff(env: dict[str, str], name: str, default: float) -> float:
    """A wait before a redelivery: 0 (at once) or more seconds, finite."""
    value = _float(env, name, default)
    if not 0.0 <= value < float("inf"):
        raise ConfigError(f"{name}={value} must be a number of seconds, 0 or more")
    return value


def _fraction(env: dict[str, str], name: str, default: float) -> float:
    value = _float(env, name, default)
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name}={value} must be between 0 and 1")
    return value


#: The Gemini model the gemini provider calls unless RAGBUS_GEMINI_MODEL names another: the
#: latest GA Flash model on both the Gemini API and Vertex AI (released 2026-09-02, no shutdown
#: date announced; gemini-2.0-flash, the old default, was shut down on 2026-03-31). This is the
#: only place the default is written; infra/ leaves the variable empty to inherit it.
DEFAULT_GEMINI_MODEL = "gemini-3.8-flash"

#: Where Vertex AI serves Google's models unless RAGBUS_GEMINI_LOCATION names another. Gemini 3.x
#: is served from the global endpoint and the ``us``/``eu`` multi-regions only: a regional
#: endpoint answers 404 for it (Vertex AI "Deployments and endpoints" / the Gemini 3.8 Flash model
#: page; googleapis/python-genai maps ``us``/``eu`` to aiplatform.{us,eu}.rep.googleapis.com).
#: It is a setting of its own because GOOGLE_CLOUD_LOCATION places the functions' regional
#: resources (Vector Search has no global location).
DEFAULT_GEMINI_LOCATION = "global"
MULTI_REGIONAL_LOCATIONS = ("global", "us", "eu")
_REGION = re.compile(r"[a-z]+-[a-z]+[0-9]+")


@dataclass(frozen=True)
class GradeThresholds:
    """From the reference grader: accept when all hold and the contexts are grounded."""

    overall: float = 0.6
    relevance: float = 0.65
    completeness: float = 0.55


@dataclass(frozen=True)
class Settings:
    home: Path = Path(".ragbus")
    runtime: str = "local"  # local | gcp
    allow_loopback: bool = False
    llm_provider: str = "local"  # local | gemini | openai
    # fetching untrusted pages
    fetch_timeout_s: float = 10.0
    fetch_max_bytes: int = 5 * 1024 * 1024
    fetch_retries: int = 3
    fetch_max_redirects: int = 5
    # bounds on the work one untrusted input can cause (issue 10)
    fetch_deadline_s: float = 30.0  # one fetch, every retry and redirect included
    fetch_host_concurrency: int = 4  # requests in flight to one host, per process
    fetch_host_rate: float = 10.0  # requests started per second to one host, per process
    max_title_chars: int = 500  # titles and other metadata are cut to this
    max_chunks_per_document: int = 2000
    max_items_per_poll: int = 200  # items fetched per feed per poll (newest first)
    # bus
    max_delivery_attempts: int = 5
    ack_deadline_s: float = 60.0
    # On Cloud Run / Cloud Functions (K_SERVICE set) infra sets RAGBUS_ACK_DEADLINE_S to the
    # function's timeout: the time a model call's retries must fit in (require_call_budget).
    # None elsewhere (the embedded runtime, the emulator topology): no function kills a call.
    function_timeout_s: float | None = None
    retry_min_backoff_s: float = 0.5
    retry_max_backoff_s: float = 60.0
    # feeds
    removed_item_policy: str = "remove"  # remove | keep
    poll_interval_s: float = 900.0
    # query loop
    top_k: int = 10
    max_iterations: int = 2
    max_model_calls: int = 12
    query_timeout_s: float = 60.0
    max_query_chars: int = 2000
    thresholds: GradeThresholds = field(default_factory=GradeThresholds)
    grade_contexts: int = 15
    grade_context_chars: int = 500
    max_sub_queries: int = 5
    min_sub_queries_for_synthesis: int = 2
    redact_query_text: bool = False
    tracing: bool = True
    # gemini
    gemini_model: str = DEFAULT_GEMINI_MODEL
    gemini_location: str = DEFAULT_GEMINI_LOCATION  # Vertex AI location of the Gemini model (not the functions')
    # one HTTP attempt; the SDK makes up to three (gemini.py), and all of them must end before
    # the function's timeout (require_call_budget)
    gemini_timeout_s: float = 40.0
    gcp_project: str | None = None
    gcp_location: str | None = None  # the functions' region: Vector Search, regional embedding models
    # openai: any OpenAI-compatible chat completions server (Ollama, llama.cpp, vLLM, LM Studio)
    openai_base_url: str | None = None  # the API base, as the OpenAI SDK takes it (usually ends in /v1)
    openai_model: str | None = None
    openai_api_key: str | None = field(default=None, repr=False)  # a secret
    openai_timeout_s: float = 60.0  # one call; a slow local model may need more
    # gcp runtime
    bucket: str | None = None  # raw and clean text
    firestore_database: str | None = None
    embedder: str = "local"  # local (packaged MiniLM) | genai
    index_backend: str = "firestore"  # firestore | vertex
    vertex_index: str | None = None
    vertex_endpoint: str | None = None
    vertex_deployed_index: str | None = None
    query_ttl_days: int = 30
    # Cloud Functions: older events are acknowledged unhandled (a poison message cannot retry forever)
    event_max_age_s: float = 86400.0
    # front doors
    gateway_host: str = "0.0.0.0"  # the gateway function's bind address
    api_token: str | None = field(default=None, repr=False)  # a secret: clients send Authorization: Bearer <token>
    demo_port: int = 8080  # `ragbus demo`'s gateway; `ragbus serve`'s default, which the sample citations name

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
    def llm_model(self) -> str | None:
        """The model the configured provider calls (None for the local provider, which has none)."""
        if self.llm_provider == "gemini":
            return self.gemini_model
        if self.llm_provider == "openai":
            return self.openai_model
        return None

    def with_(self, **changes) -> Settings:
        return replace(self, **changes)


#: Every default, as the dataclass writes it: load_settings reads none of its own.
DEFAULTS = Settings()


def load_settings(env: dict[str, str] | None = None) -> Settings:
    """Settings from ``env`` (default: the process environment)."""
    env = dict(os.environ if env is None else env)
    runtime = env.get("RAGBUS_RUNTIME", str(DEFAULTS.runtime)).strip().lower()
    if runtime not in {"local", "gcp"}:
        raise ConfigError(f"RAGBUS_RUNTIME={runtime!r}: use 'local' (default) or 'gcp'")
    provider = env.get("RAGBUS_LLM", str(DEFAULTS.llm_provider)).strip().lower()
    if provider not in {"local", "gemini", "openai"}:
        raise ConfigError(f"RAGBUS_LLM={provider!r}: use 'local' (default), 'gemini' or 'openai'")
    openai_base_url = (env.get("RAGBUS_OPENAI_BASE_URL") or "").strip().rstrip("/") or None
    openai_model = (env.get("RAGBUS_OPENAI_MODEL") or "").strip() or None
    openai_api_key = _openai_key(env, openai_base_url)
    if provider == "openai":
        _require_openai(openai_base_url, openai_model, openai_api_key)
    policy = env.get("RAGBUS_REMOVED_ITEMS", str(DEFAULTS.removed_item_policy)).strip().lower()
    if policy not in {"remove", "keep"}:
        raise ConfigError(f"RAGBUS_REMOVED_ITEMS={policy!r}: use 'remove' (default) or 'keep'")
    embedder = env.get("RAGBUS_EMBEDDER", str(DEFAULTS.embedder)).strip().lower()
    if embedder not in {"local", "genai"}:
        raise ConfigError(f"RAGBUS_EMBEDDER={embedder!r}: use 'local' (default, packaged MiniLM) or 'genai'")
    index_backend = env.get("RAGBUS_INDEX", str(DEFAULTS.index_backend)).strip().lower()
    if index_backend not in {"firestore", "vertex"}:
        raise ConfigError(f"RAGBUS_INDEX={index_backend!r}: use 'firestore' (default) or 'vertex'")
    api_token = _api_token(env)
    # Whatever a model server or proxy echoes back is redacted of these (shared.contract.redaction).
    for secret in (openai_api_key, api_token, env.get("GOOGLE_API_KEY"), env.get("GEMINI_API_KEY")):
        remember_secret((secret or "").strip())
    remember_url_credentials(openai_base_url)
    min_backoff = _backoff(env, "RAGBUS_RETRY_MIN_BACKOFF_S", DEFAULTS.retry_min_backoff_s)
    max_backoff = _backoff(env, "RAGBUS_RETRY_MAX_BACKOFF_S", DEFAULTS.retry_max_backoff_s)
    if min_backoff > max_backoff:
        raise ConfigError(f"RAGBUS_RETRY_MIN_BACKOFF_S={min_backoff} is above RAGBUS_RETRY_MAX_BACKOFF_S={max_backoff}")
    return Settings(
        home=Path(env.get("RAGBUS_HOME", str(DEFAULTS.home))).expanduser(),
        runtime=runtime,
        allow_loopback=_bool(env, "RAGBUS_ALLOW_LOOPBACK", DEFAULTS.allow_loopback),
        llm_provider=provider,
        fetch_timeout_s=_seconds(env, "RAGBUS_FETCH_TIMEOUT_S", DEFAULTS.fetch_timeout_s),
        fetch_max_bytes=_int(env, "RAGBUS_FETCH_MAX_BYTES", DEFAULTS.fetch_max_bytes, 1024),
        fetch_deadline_s=_seconds(env, "RAGBUS_FETCH_DEADLINE_S", DEFAULTS.fetch_deadline_s),
        fetch_host_concurrency=_int(env, "RAGBUS_FETCH_HOST_CONCURRENCY", DEFAULTS.fetch_host_concurrency, 1),
        fetch_host_rate=_float(env, "RAGBUS_FETCH_HOST_RATE", DEFAULTS.fetch_host_rate),
        max_title_chars=_int(env, "RAGBUS_MAX_TITLE_CHARS", DEFAULTS.max_title_chars, 20),
        max_chunks_per_document=_int(env, "RAGBUS_MAX_CHUNKS_PER_DOCUMENT", DEFAULTS.max_chunks_per_document, 1),
        max_items_per_poll=_int(env, "RAGBUS_MAX_ITEMS_PER_POLL", DEFAULTS.max_items_per_poll, 1),
        max_delivery_attempts=_int(env, "RAGBUS_MAX_DELIVERY_ATTEMPTS", DEFAULTS.max_delivery_attempts, 1),
        ack_deadline_s=_seconds(env, "RAGBUS_ACK_DEADLINE_S", DEFAULTS.ack_deadline_s),
        function_timeout_s=_seconds(env, "RAGBUS_ACK_DEADLINE_S", DEFAULTS.ack_deadline_s) if "K_SERVICE" in env else None,
        retry_min_backoff_s=min_backoff,
        retry_max_backoff_s=max_backoff,
        removed_item_policy=policy,
        poll_interval_s=_seconds(env, "RAGBUS_POLL_INTERVAL_S", DEFAULTS.poll_interval_s),
        top_k=_int(env, "RAGBUS_TOP_K", DEFAULTS.top_k, 1),
        max_iterations=_int(env, "RAGBUS_MAX_ITERATIONS", DEFAULTS.max_iterations, 0),
        max_model_calls=_int(env, "RAGBUS_MAX_MODEL_CALLS", DEFAULTS.max_model_calls, 1),
        query_timeout_s=_seconds(env, "RAGBUS_QUERY_TIMEOUT_S", DEFAULTS.query_timeout_s),
        redact_query_text=_bool(env, "RAGBUS_REDACT_QUERY_TEXT", DEFAULTS.redact_query_text),
        tracing=_bool(env, "RAGBUS_TRACING", DEFAULTS.tracing),
        gemini_model=(env.get("RAGBUS_GEMINI_MODEL") or "").strip() or DEFAULTS.gemini_model,
        gemini_location=model_location(env, "RAGBUS_GEMINI_LOCATION", DEFAULTS.gemini_location),
        gemini_timeout_s=_seconds(env, "RAGBUS_GEMINI_TIMEOUT_S", DEFAULTS.gemini_timeout_s),
        gcp_project=env.get("GOOGLE_CLOUD_PROJECT") or None,
        gcp_location=env.get("GOOGLE_CLOUD_LOCATION") or None,
        openai_base_url=openai_base_url,
        openai_model=openai_model,
        openai_api_key=openai_api_key,
        openai_timeout_s=_seconds(env, "RAGBUS_OPENAI_TIMEOUT_S", DEFAULTS.openai_timeout_s),
        bucket=env.get("RAGBUS_BUCKET") or None,
        firestore_database=env.get("RAGBUS_FIRESTORE_DATABASE") or None,
        embedder=embedder,
        index_backend=index_backend,
        vertex_index=env.get("RAGBUS_VERTEX_INDEX") or None,
        vertex_endpoint=env.get("RAGBUS_VERTEX_ENDPOINT") or None,
        vertex_deployed_index=env.get("RAGBUS_VERTEX_DEPLOYED_INDEX") or None,
        query_ttl_days=_int(env, "RAGBUS_QUERY_TTL_DAYS", DEFAULTS.query_ttl_days, 1),
        event_max_age_s=_seconds(env, "RAGBUS_EVENT_MAX_AGE_S", DEFAULTS.event_max_age_s),
        gateway_host=env.get("RAGBUS_GATEWAY_HOST") or DEFAULTS.gateway_host,
        demo_port=_int(env, "RAGBUS_DEMO_PORT", DEFAULTS.demo_port, 0),
        api_token=api_token,
        thresholds=GradeThresholds(
            overall=_fraction(env, "RAGBUS_MIN_SCORE", DEFAULTS.thresholds.overall),
            relevance=_fraction(env, "RAGBUS_MIN_RELEVANCE", DEFAULTS.thresholds.relevance),
            completeness=_fraction(env, "RAGBUS_MIN_COMPLETENESS", DEFAULTS.thresholds.completeness),
        ),
    )


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


OPENAI_API_HOST = "api.openai.com"
#: The shortest RAGBUS_API_TOKEN accepted for a gateway other machines can reach: 16 random
#: characters (~95 bits from base64url) cannot be guessed over HTTP; "a" or "secret" can.
MIN_REMOTE_TOKEN_CHARS = 16
_TOKEN_HINT = "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def _api_token(env: Mapping[str, str]) -> str | None:
    """``RAGBUS_API_TOKEN``: printable ASCII only, since an HTTP header carries no other
    characters intact (a token with "é" could never match what a client sends)."""
    token = (env.get("RAGBUS_API_TOKEN") or "").strip()
    if not token:
        return None
    bad = next((c for c in token if not "!" <= c <= "~"), None)
    if bad is not None:
        raise ConfigError(f"RAGBUS_API_TOKEN holds {'a space' if bad.isspace() else repr(bad)}, which no "
                          "Authorization header can carry as it is, so no client could ever match it; use "
                          f"printable ASCII without spaces ({_TOKEN_HINT})")
    return token


def check_api_token(token: str | None, host: str) -> None:
    """Refuse a token too weak to guard a gateway bound to ``host`` (not loopback)."""
    if token is None or host in _LOOPBACK_HOSTS:
        return
    if len(token) < MIN_REMOTE_TOKEN_CHARS or len(set(token)) < 4:
        raise ConfigError(f"RAGBUS_API_TOKEN is too weak to guard a gateway on {host}, which other machines "
                          f"can reach: use at least {MIN_REMOTE_TOKEN_CHARS} random characters ({_TOKEN_HINT})")
_LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


def _openai_key(env: Mapping[str, str], base_url: str | None) -> str | None:
    """``RAGBUS_OPENAI_API_KEY``; the standard ``OPENAI_API_KEY`` (which the OpenAI SDK reads) only
    when the base URL is OpenAI's own API: a user's OpenAI key is not sent to a LAN Ollama box or
    any other server the base URL names."""
    own = (env.get("RAGBUS_OPENAI_API_KEY") or "").strip()
    if own:
        return own
    host = (urlsplit(base_url).hostname or "") if base_url else ""
    return (env.get("OPENAI_API_KEY") or "").strip() or None if host == OPENAI_API_HOST else None


def redacted_url(url: str) -> str:
    """``url`` without a ``user:password@`` part, for messages and logs."""
    scheme, netloc, path, query, fragment = urlsplit(url)
    if "@" not in netloc:
        return url
    return urlunsplit((scheme, "***@" + netloc.rsplit("@", 1)[1], path, query, fragment))


def _require_openai(base_url: str | None, model: str | None, api_key: str | None = None) -> None:
    missing = []
    if not base_url:
        missing.append("RAGBUS_OPENAI_BASE_URL (the server's API base, e.g. http://127.0.0.1:11434/v1 for "
                       "Ollama, http://127.0.0.1:8080/v1 for llama.cpp's llama-server)")
    elif urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).netloc:
        raise ConfigError(f"RAGBUS_OPENAI_BASE_URL={redacted_url(base_url)!r} is not an http(s) URL; "
                          "use e.g. http://127.0.0.1:11434/v1")
    elif urlsplit(base_url).query or urlsplit(base_url).fragment or base_url.endswith(("?", "#")):
        # requests would go to ".../v1?query/chat/completions", and a key in the query would be named
        # wherever the server is (redacted_url drops only user:password)
        parts = urlsplit(base_url)
        raise ConfigError(f"RAGBUS_OPENAI_BASE_URL={redacted_url(urlunsplit(parts[:3] + ('', '')))!r} carries a "
                          "query or fragment; the API base is scheme, host and path (e.g. https://llm.example.com/v1), "
                          "and a key goes in RAGBUS_OPENAI_API_KEY")
    elif api_key and urlsplit(base_url).scheme == "http" and urlsplit(base_url).hostname not in _LOOPBACK_HOSTS:
        raise ConfigError(f"RAGBUS_OPENAI_API_KEY would be sent in clear text to {redacted_url(base_url)}: "
                          "use https for a server on another host (plain http only to 127.0.0.1/localhost)")
    if not model:
        missing.append("RAGBUS_OPENAI_MODEL (a model the server serves, e.g. llama3.2 for Ollama)")
    if missing:
        raise ConfigError("RAGBUS_LLM=openai needs: " + "; ".join(missing) + "; or use RAGBUS_LLM=local")


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
    if settings.embedder == "genai" and not settings.gcp_location and not os.environ.get("RAGBUS_EMBED_LOCATION") \
            and not (os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")):
        missing.append("GOOGLE_CLOUD_LOCATION or RAGBUS_EMBED_LOCATION (Vertex AI location of the embedding "
                       "model), or GOOGLE_API_KEY for the Gemini API")
    if missing:
        raise ConfigError("RAGBUS_RUNTIME=gcp needs: " + "; ".join(missing))


# Logging is configured before (and whether or not) the other settings load, so its two
# variables are read on their own; they are defined here all the same.
DEFAULT_LOG_LEVEL = "WARNING"


def log_level_setting(env: Mapping[str, str] | None = None) -> str | None:
    """``RAGBUS_LOG_LEVEL`` as given (any case), or None when unset."""
    return (os.environ if env is None else env).get("RAGBUS_LOG_LEVEL") or None


def json_logs_setting(env: Mapping[str, str] | None = None) -> bool:
    """``RAGBUS_LOG_FORMAT=json``, or running on Cloud Run / Cloud Functions (``K_SERVICE``)."""
    env = os.environ if env is None else env
    return env.get("RAGBUS_LOG_FORMAT", "").lower() == "json" or "K_SERVICE" in env
