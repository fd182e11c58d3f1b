"""The one place that wires adapters to ports, per runtime."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shared.adapters.local.blobs import FolderBlobStore
from shared.adapters.local.bus import RetrySettings, SqliteBus
from shared.adapters.local.clock import SystemClock
from shared.adapters.local.state import SqliteStateStore
from shared.contract.config import Settings
from shared.contract.deps import Deps, Lazy
from shared.contract.providers import PROVIDER_BY_NAME
from shared.observability.tracing import TracingLanguageModel, TracingPublisher
from shared.runtime.stages import subscription_topics
from shared.runtime.telemetry import setup_telemetry

log = logging.getLogger("ragbus.runtime")


@dataclass
class LocalSystem:
    settings: Settings
    bus: SqliteBus
    deps: Deps


def _embedder(settings: Settings):
    from shared.adapters.local.coalescing import CoalescingEmbedder
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder

    return CoalescingEmbedder(OnnxMiniLMEmbedder())


def _index(settings: Settings, embedder_dimension: int = 384):
    from shared.adapters.local.index import HybridIndex

    return HybridIndex(settings.index_dir, dimension=embedder_dimension)


def _rebuilt_if_lost(index, state) -> None:
    """An index found new while the state store lists indexed documents lost them (its
    chunks.db was damaged and set aside, emptied or deleted): mark every document to be
    sent again, so the next poll and ingest rebuild it instead of calling them unchanged."""
    from shared.contract import state_collections
    from shared.ingest.recovery import resend_all

    if not getattr(index, "started_new", False) or not state.count(state_collections.DOCUMENTS):
        return
    count = resend_all(state)
    aside = f" (the damaged file is kept as {index.set_aside})" if index.set_aside else ""
    log.warning("the index at %s is new but the state store listed %d indexed document(s)%s; they are marked to "
                "be sent again: `ragbus poll` re-reads every feed and sitemap, and `ragbus ingest` on the same "
                "files sends them again (serve re-polls by itself)", index.path, count, aside)


def _fetcher(settings: Settings):
    from shared.adapters.http_fetch import SafeFetcher

    return SafeFetcher(
        allow_loopback=settings.allow_loopback,
        timeout_s=settings.fetch_timeout_s,
        max_bytes=settings.fetch_max_bytes,
        retries=settings.fetch_retries,
        max_redirects=settings.fetch_max_redirects,
        total_deadline_s=settings.fetch_deadline_s,
        host_concurrency=settings.fetch_host_concurrency,
        host_rate=settings.fetch_host_rate,
    )


def _served_llm(settings: Settings):
    """The language model a provider serves over an API (``RAGBUS_LLM``, the provider registry), else None."""
    provider = PROVIDER_BY_NAME[settings.llm_provider]
    return provider.model_class().from_settings(settings) if provider.served else None


def build_local(settings: Settings, **overrides: object) -> LocalSystem:
    """The embedded runtime: SQLite bus and state under ``settings.home``, local models.

    ``overrides`` replace a port by name (a ready object or a :class:`Lazy`), for
    tests and benchmarks that need, say, a scripted model in the real runtime.
    """
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
    setup_telemetry(settings)
    holder: dict[str, Deps] = {}

    def llm():
        deps = holder["deps"]
        served = _served_llm(settings)
        if served is not None:
            return served
        from shared.adapters.local.llm import LocalLanguageModel

        return LocalLanguageModel(index=deps.index, embedder=deps.embedder)

    def traced_llm():
        model = llm()
        return TracingLanguageModel(model) if settings.tracing else model

    def local_index():
        built = _index(settings)
        _rebuilt_if_lost(built, holder["deps"].state)
        return built

    deps = Deps(
        settings,
        publisher=TracingPublisher(bus) if settings.tracing else bus,
        state=SqliteStateStore(settings.db_path),
        blobs=FolderBlobStore(settings.blob_dir),
        clock=SystemClock(),
        fetcher=Lazy(lambda: _fetcher(settings)),
        embedder=Lazy(lambda: _embedder(settings)),
        index=Lazy(local_index),
        llm=Lazy(traced_llm),
    )
    for name, provider in overrides.items():
        deps.override(name, provider)
    holder["deps"] = deps
    if "index" not in overrides and _index_file_lost(settings, deps.state):
        # open it now, not at the first search: the command about to run (an ingest that would
        # call every document unchanged) must already see the documents marked to be sent again
        deps.index  # noqa: B018
    return LocalSystem(settings=settings, bus=bus, deps=deps)


def _index_file_lost(settings: Settings, state) -> bool:
    """Whether chunks.db is missing, empty or visibly broken while the state store lists documents
    (a look at its header, no SQLite call; the index itself checks properly when it opens)."""
    from shared.adapters.local.sqlite import shortfall
    from shared.contract import state_collections

    chunks = settings.index_dir / "chunks.db"
    try:
        intact = chunks.stat().st_size > 0 and shortfall(chunks) is None
    except FileNotFoundError:
        intact = False
    if intact:
        return False
    return state.count(state_collections.DOCUMENTS) > 0


def build_gcp(settings: Settings) -> Deps:
    """The gcp runtime: Pub/Sub, Firestore, GCS, Firestore or Vertex index, local or genai models.

    Emulators are used when the standard ``*_EMULATOR_HOST`` variables are set
    (the client libraries read them); no credentials are needed then.
    """
    from shared.contract.config import require_gcp

    require_gcp(settings)
    setup_telemetry(settings)
    project = settings.gcp_project
    holder: dict[str, Deps] = {}

    def publisher():
        from shared.adapters.gcp.pubsub import PubSubPublisher

        inner = PubSubPublisher(project)
        return TracingPublisher(inner) if settings.tracing else inner

    def state():
        from shared.adapters.gcp.firestore_state import FirestoreStateStore

        return FirestoreStateStore(project=project, database=settings.firestore_database)

    def blobs():
        from shared.adapters.gcp.gcs_blobs import GcsBlobStore

        return GcsBlobStore(settings.bucket, project=project)

    def embedder():
        if settings.embedder == "genai":
            from shared.adapters.gcp.genai_embedder import GenAiEmbedder

            return GenAiEmbedder.from_settings(settings)
        return _embedder(settings)

    def index():
        deps = holder["deps"]
        dimension = deps.embedder.dimension
        if settings.index_backend == "vertex":
            from shared.adapters.gcp.vertex_index import VertexVectorSearchIndex

            return VertexVectorSearchIndex.connect(
                index_name=settings.vertex_index, endpoint_name=settings.vertex_endpoint,
                deployed_index_id=settings.vertex_deployed_index, state=deps.state, dimension=dimension,
                project=project, location=settings.gcp_location,
            )
        from shared.adapters.gcp.firestore_index import FirestoreIndex

        return FirestoreIndex(project=project, database=settings.firestore_database, dimension=dimension)

    def llm():
        deps = holder["deps"]
        model = _served_llm(settings)
        if model is None:
            from shared.adapters.local.llm import LocalLanguageModel

            model = LocalLanguageModel(index=deps.index, embedder=deps.embedder)
        return TracingLanguageModel(model) if settings.tracing else model

    deps = Deps(
        settings,
        publisher=Lazy(publisher),
        state=Lazy(state),
        blobs=Lazy(blobs),
        clock=SystemClock(),
        fetcher=Lazy(lambda: _fetcher(settings)),
        embedder=Lazy(embedder),
        index=Lazy(index),
        llm=Lazy(llm),
    )
    holder["deps"] = deps
    return deps


def build_deps(settings: Settings) -> Deps:
    """The dependencies of one stage instance for ``settings.runtime``."""
    if settings.runtime == "gcp":
        return build_gcp(settings)
    return build_local(settings).deps
