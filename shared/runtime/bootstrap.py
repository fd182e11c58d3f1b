"""The one place that wires adapters to ports, per runtime."""

from __future__ import annotations

from dataclasses import dataclass

from shared.adapters.language_models import language_model
from shared.adapters.local.blobs import FolderBlobStore
from shared.adapters.local.bus import SqliteBus
from shared.adapters.local.clock import SystemClock
from shared.adapters.local.coalescing import packaged_embedder
from shared.adapters.local.sqlite import file_lost
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps, Lazy
from shared.contract.errors import ConfigError
from shared.contract.ports import Fetcher
from shared.ingest.recovery import resend_if_index_lost
from shared.observability.tracing import TracingPublisher
from shared.runtime.stages import subscription_topics
from shared.runtime.telemetry import setup_telemetry


def safe_fetcher(settings: Settings) -> Fetcher:
    """The fetcher of feeds and pages, imported when a command first fetches: its httpx was about
    70 ms of every CLI start (docs/benchmarks.md, "CLI cold start")."""
    from shared.adapters.http_fetch import SafeFetcher

    return SafeFetcher.from_settings(settings)


@dataclass
class LocalSystem:
    settings: Settings
    bus: SqliteBus
    deps: Deps


def build_local(settings: Settings, **overrides: object) -> LocalSystem:
    """The embedded runtime: SQLite bus and state under ``settings.home``, local models.

    ``overrides`` replace a port by name (a ready object or a :class:`Lazy`), for
    tests and benchmarks that need, say, a scripted model in the real runtime.
    """
    try:
        settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)  # its owner's alone: documents, questions
    except OSError as exc:  # under a file, or where this user may not write: the OS's words name no setting
        raise ConfigError(f"RAGBUS_HOME={str(settings.home)!r} cannot be made a folder ({exc.strerror or exc}); "
                          "name a folder this user may write") from exc
    bus = SqliteBus.from_settings(settings, subscription_topics())
    setup_telemetry(settings)

    def local_index():
        from shared.adapters.local.index import HybridIndex

        return resend_if_index_lost(HybridIndex(settings.index_dir, dimension=384), deps.state)

    deps = Deps(
        settings,
        publisher=TracingPublisher(bus) if settings.tracing else bus,
        state=SqliteStateStore(settings.db_path),
        blobs=FolderBlobStore(settings.blob_dir),
        clock=SystemClock(),
        fetcher=Lazy(lambda: safe_fetcher(settings)),
        embedder=Lazy(lambda: packaged_embedder(settings.model_cache_dir)),
        index=Lazy(local_index),
        llm=Lazy(lambda: language_model(settings, deps)),
    )
    for name, provider in overrides.items():
        deps.override(name, provider)
    index_lost = file_lost(settings.index_dir / "chunks.db")
    if "index" not in overrides and index_lost and deps.state.count(state_collections.DOCUMENTS):
        # open it now, not at the first search: the command about to run (an ingest that would
        # call every document unchanged) must already see the documents marked to be sent again
        deps.index  # noqa: B018
    return LocalSystem(settings=settings, bus=bus, deps=deps)


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
        return packaged_embedder()

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

    deps = Deps(
        settings,
        publisher=Lazy(publisher),
        state=Lazy(state),
        blobs=Lazy(blobs),
        clock=SystemClock(),
        fetcher=Lazy(lambda: safe_fetcher(settings)),
        embedder=Lazy(embedder),
        index=Lazy(index),
        llm=Lazy(lambda: language_model(settings, holder["deps"])),
    )
    holder["deps"] = deps
    return deps


@dataclass
class Runtime:
    """The runtime ``settings.runtime`` names: its ports, and the embedded runtime's system (its bus,
    for a command that runs the stages in this process), None for gcp."""

    deps: Deps
    local: LocalSystem | None


def build_runtime(settings: Settings) -> Runtime:
    """The runtime ``settings.runtime`` names (a command's; a stage instance takes :func:`build_deps`)."""
    if settings.runtime == "gcp":
        return Runtime(build_gcp(settings), None)
    system = build_local(settings)
    return Runtime(system.deps, system)


def build_deps(settings: Settings) -> Deps:
    """The dependencies of one stage instance for ``settings.runtime``."""
    return build_runtime(settings).deps
