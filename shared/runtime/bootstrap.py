"""The one place that wires adapters to ports, per runtime."""

from __future__ import annotations

from dataclasses import dataclass

from shared.adapters.local.blobs import FolderBlobStore
from shared.adapters.local.bus import RetrySettings, SqliteBus
from shared.adapters.local.clock import SystemClock
from shared.adapters.local.state import SqliteStateStore
from shared.config import Settings
from shared.runtime.deps import Deps, Lazy
from shared.runtime.stages import subscription_topics
from shared.tracing import TracingLanguageModel, TracingPublisher, add_exporter

_span_stores: dict[str, object] = {}


def install_local_span_store(settings: Settings):
    """Export this process's spans to ``$RAGBUS_HOME/traces.db`` (once per path)."""
    from shared.adapters.local.spans import SqliteSpanStore

    key = str(settings.traces_path.resolve())
    if key not in _span_stores:
        store = SqliteSpanStore(settings.traces_path)
        add_exporter(store)
        _span_stores[key] = store
    return _span_stores[key]


@dataclass
class LocalSystem:
    settings: Settings
    bus: SqliteBus
    deps: Deps


def _embedder(settings: Settings):
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder

    return OnnxMiniLMEmbedder()


def _index(settings: Settings, embedder_dimension: int = 384):
    from shared.adapters.local.index import HybridIndex

    return HybridIndex(settings.index_dir, dimension=embedder_dimension)


def _fetcher(settings: Settings):
    from shared.adapters.http_fetch import SafeFetcher

    return SafeFetcher(
        allow_loopback=settings.allow_loopback,
        timeout_s=settings.fetch_timeout_s,
        max_bytes=settings.fetch_max_bytes,
        retries=settings.fetch_retries,
        max_redirects=settings.fetch_max_redirects,
    )


def build_local(settings: Settings) -> LocalSystem:
    """The embedded runtime: SQLite bus and state under ``settings.home``, local models."""
    settings.home.mkdir(parents=True, exist_ok=True)
    bus = SqliteBus(
        settings.bus_path,
        subscription_topics(),
        RetrySettings(
            max_attempts=settings.max_delivery_attempts,
            ack_deadline_s=settings.ack_deadline_s,
            min_backoff_s=settings.retry_min_backoff_s,
            max_backoff_s=settings.retry_max_backoff_s,
        ),
    )
    if settings.tracing:
        install_local_span_store(settings)
    holder: dict[str, Deps] = {}

    def llm():
        deps = holder["deps"]
        if settings.llm_provider == "gemini":
            from shared.adapters.gcp.gemini import GeminiLanguageModel

            return GeminiLanguageModel.from_settings(settings)
        from shared.adapters.local.llm import LocalLanguageModel

        return LocalLanguageModel(index=deps.index, embedder=deps.embedder)

    def traced_llm():
        model = llm()
        return TracingLanguageModel(model) if settings.tracing else model

    deps = Deps(
        settings,
        publisher=TracingPublisher(bus) if settings.tracing else bus,
        state=SqliteStateStore(settings.db_path),
        blobs=FolderBlobStore(settings.blob_dir),
        clock=SystemClock(),
        fetcher=Lazy(lambda: _fetcher(settings)),
        embedder=Lazy(lambda: _embedder(settings)),
        index=Lazy(lambda: _index(settings)),
        llm=Lazy(traced_llm),
    )
    holder["deps"] = deps
    return LocalSystem(settings=settings, bus=bus, deps=deps)


def build_deps(settings: Settings) -> Deps:
    """The dependencies of one stage instance for ``settings.runtime``."""
    if settings.runtime == "local":
        return build_local(settings).deps
    from shared.errors import ConfigError

    raise ConfigError(
        f"RAGBUS_RUNTIME={settings.runtime!r} has no wiring in this build yet; use RAGBUS_RUNTIME=local"
    )
