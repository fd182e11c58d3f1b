"""Where this process's traces and metrics go, chosen once per process from the settings.

- traces: the local span store (``$RAGBUS_HOME/traces.db``) in the embedded
  runtime and on the emulator topology; in the gcp runtime OTLP/HTTP to the
  Telemetry API (``https://telemetry.googleapis.com/v1/traces``) with the
  function's Google credentials, which Google recommends over the Cloud Trace
  exporter ("Migrate from the Trace exporter to the OTLP endpoint",
  cloud.google.com/trace/docs/migrate-to-otlp-endpoints: an ``AuthorizedSession``
  from Application Default Credentials as the exporter's session, the project in
  the ``gcp.project_id`` resource attribute); OTLP as well whenever
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (with Google credentials when it names a
  googleapis.com host).
- metrics: Cloud Monitoring in the gcp runtime (as workload.googleapis.com/ragbus.*),
  OTLP when an endpoint is set; otherwise they are recorded but not exported.
  Either way at most one write per 10 s per instance (:class:`ThrottledMetricExporter`).
- ``RAGBUS_TRACING=0`` turns both off.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

try:
    import fcntl
except ImportError:  # not POSIX (Windows): no lock to share, so each topology process sweeps, as before the lock
    fcntl = None  # type: ignore[assignment]

from shared.contract.config import Settings
from shared.observability.tracing import add_exporter

log = logging.getLogger("ragbus.telemetry")

_lock = threading.Lock()
_span_stores: dict[str, object] = {}
_remote_installed = False
#: How often a process of the emulator topology deletes the spans past RAGBUS_TRACE_RETENTION_DAYS from its span
#: store: the embedded runtime's sweep (shared/runtime/retention.py) does it for its own, the topology had none.
SPAN_SWEEP_INTERVAL_S = 3600.0
_sweeps_end = threading.Event()  # set: the sweepers started after it was set to a new Event end (a test's)
_sweep_locks: list[Any] = []  # the open lock file of each store this process sweeps: held until it exits


def install_local_span_store(settings: Settings):
    """Export this process's spans to ``$RAGBUS_HOME/traces.db`` (once per path); None when
    that file cannot be used: traces are telemetry, so a damaged one costs them (with a
    warning naming the file), never the command."""
    from shared.adapters.local.spans import SqliteSpanStore
    from shared.contract.errors import DataFileError

    key = str(settings.traces_path.resolve())
    with _lock:
        if key not in _span_stores:
            settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)  # its owner's alone: documents, questions
            try:
                store = SqliteSpanStore(settings.traces_path)
            except DataFileError as exc:
                log.warning("traces are not recorded: %s", exc)
                _span_stores[key] = None
                return None
            add_exporter(store)
            _span_stores[key] = store
            if on_emulators() and _sweeper_of(settings.traces_path):  # the topology's: nothing else holds it
                threading.Thread(target=_sweep_spans, args=(store, settings.trace_retention_days, _sweeps_end),
                                 name="span-retention", daemon=True).start()
        return _span_stores[key]


def _sweeper_of(traces_path: Path) -> bool:
    """Whether this process is the one that sweeps the span store at ``traces_path``: every process of a topology
    (its stage servers, a `ragbus` command on it) writes the one store, and one sweeper is enough. The first to
    lock ``traces.sweep.lock`` beside it is that one, for as long as it runs (the lock goes with the process)."""
    if fcntl is None:
        return True
    try:
        lock = open(traces_path.with_suffix(".sweep.lock"), "a")  # noqa: SIM115 - held open while the process runs
    except OSError as exc:  # traces are telemetry: never the command's failure; sweep, as before the lock (if every
        log.warning("span-sweep lock %s cannot be made, sweeping anyway: %s", exc.filename, exc)  # process failed
        return True  # here and none swept, the store would grow without bound)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another process sweeps it
        lock.close()
        return False
    _sweep_locks.append(lock)
    return True


def _sweep_spans(store: Any, retention_days: int, end: threading.Event) -> None:
    """Delete the spans that ended more than ``retention_days`` ago, now and every :data:`SPAN_SWEEP_INTERVAL_S`."""
    while True:
        try:
            deleted = store.delete_older_than(retention_days, time.time())
            if deleted:
                log.info("retention: deleted %d span(s) older than %d day(s)", deleted, retention_days)
        except Exception as exc:  # noqa: BLE001 - a locked or damaged store: telemetry, tried again next time
            log.warning("span retention sweep failed (tried again in %.0f s): %s", SPAN_SWEEP_INTERVAL_S, exc)
        if end.wait(SPAN_SWEEP_INTERVAL_S):
            return


def on_emulators() -> bool:
    return bool(os.environ.get("PUBSUB_EMULATOR_HOST") or os.environ.get("FIRESTORE_EMULATOR_HOST"))


def setup_telemetry(settings: Settings) -> None:
    """Install this process's exporters (idempotent)."""
    global _remote_installed
    if not settings.tracing:
        return
    cloud = settings.runtime == "gcp" and not on_emulators()
    if not cloud:
        install_local_span_store(settings)
    with _lock:
        if _remote_installed:
            return
        _remote_installed = True
    readers = []
    if cloud:
        from opentelemetry.exporter.cloud_monitoring import CloudMonitoringMetricsExporter

        add_exporter(google_otlp_span_exporter())
        # add_unique_identifier: every instance writes its own time series; without it two
        # instances of a function write the same series and Cloud Monitoring refuses one.
        readers.append(metric_reader(CloudMonitoringMetricsExporter(
            project_id=settings.gcp_project, add_unique_identifier=True), interval_s=60))
    otlp_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        session = google_session() if _is_google_host(otlp_endpoint) else None
        add_exporter(OTLPSpanExporter(session=session))
        # Metrics go where the endpoint for every signal points, unless turned off as the
        # OpenTelemetry SDK's variables say: a traces-only backend (Arize Phoenix answers
        # /v1/metrics with 405) is named by OTEL_EXPORTER_OTLP_TRACES_ENDPOINT alone.
        if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") and \
                os.environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() != "none":
            readers.append(metric_reader(OTLPMetricExporter(session=session), interval_s=30))
    if readers:
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource

        service = os.environ.get("OTEL_SERVICE_NAME") or os.environ.get("K_SERVICE") or "ragbus"
        metrics.set_meter_provider(MeterProvider(metric_readers=readers,
                                                 resource=Resource.create({"service.name": service})))
        log.info("metrics exported by %d reader(s)", len(readers))


#: The Telemetry (OTLP) API's trace endpoint (cloud.google.com/stackdriver/docs/reference/telemetry/v1.traces.post).
TELEMETRY_TRACES_URL = "https://telemetry.googleapis.com/v1/traces"
_GOOGLE_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


def _is_google_host(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == "googleapis.com" or host.endswith(".googleapis.com")


def google_session(credentials: Any = None) -> Any:
    """A requests session that signs every request with Google credentials (Application
    Default Credentials unless given): the function's service account on Cloud Run."""
    from google.auth.transport.requests import AuthorizedSession

    if credentials is None:
        import google.auth

        credentials, _ = google.auth.default(scopes=list(_GOOGLE_SCOPES))
    return AuthorizedSession(credentials)


def google_otlp_span_exporter(endpoint: str = TELEMETRY_TRACES_URL, credentials: Any = None) -> Any:
    """OTLP/HTTP (protobuf) span exporter to the Telemetry API, authenticated with Google credentials.

    The spans' resource carries ``gcp.project_id`` (:func:`shared.observability.tracing.tracer_provider`
    reads ``GOOGLE_CLOUD_PROJECT``), which tells the API which project stores them.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint, session=google_session(credentials))


def metric_reader(exporter: Any, *, interval_s: float, clock: Callable[[], float] = time.monotonic) -> Any:
    """A periodic reader whose exporter writes at most once per 10 s (see ThrottledMetricExporter):
    the end-of-invocation flush and the reader's own timer share that one budget."""
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    from shared.observability.metric_writes import ThrottledMetricExporter

    return PeriodicExportingMetricReader(ThrottledMetricExporter(exporter, clock=clock),
                                         export_interval_millis=int(interval_s * 1000))


#: How long the end of an invocation may wait for exports. Cloud Functions (Cloud Run)
#: throttles the CPU once the response is sent, so the background export threads may
#: never run again; a bounded flush before returning gets the spans out without letting
#: a slow exporter hold every invocation hostage.
FLUSH_TIMEOUT_MS = 2_000


def flush_telemetry(timeout_millis: int = FLUSH_TIMEOUT_MS) -> None:
    """Export this process's pending spans and metrics now, waiting at most ``timeout_millis``.

    Spans are sent every time; metrics are offered every time but written at most once per
    10 s (:class:`~shared.observability.metric_writes.ThrottledMetricExporter`), the rest carried
    by the next write.

    Never raises: losing telemetry must not turn a handled message into a redelivery.
    """
    from opentelemetry import metrics, trace

    deadline = time.monotonic() + timeout_millis / 1000
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        flush = getattr(provider, "force_flush", None)
        if flush is None:  # the API's no-op providers: nothing was recorded
            continue
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))  # one budget for both
        try:
            if not flush(timeout_millis=left_ms):
                log.warning("%s did not finish exporting within %d ms", type(provider).__name__, left_ms)
        except Exception:  # noqa: BLE001 - see above
            log.warning("flushing %s failed", type(provider).__name__, exc_info=True)
