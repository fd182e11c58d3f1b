"""Where this process's traces and metrics go, chosen once per process from the settings.

- traces: the local span store (``$RAGBUS_HOME/traces.db``) in the embedded
  runtime and on the emulator topology; Cloud Trace in the gcp runtime; OTLP as
  well whenever ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.
- metrics: Cloud Monitoring in the gcp runtime (as workload.googleapis.com/ragbus.*),
  OTLP when an endpoint is set; otherwise they are recorded but not exported.
- ``RAGBUS_TRACING=0`` turns both off.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from shared.contract.config import Settings
from shared.observability.tracing import add_exporter

log = logging.getLogger("ragbus.telemetry")

_lock = threading.Lock()
_span_stores: dict[str, object] = {}
_remote_installed = False


def install_local_span_store(settings: Settings):
    """Export this process's spans to ``$RAGBUS_HOME/traces.db`` (once per path)."""
    from shared.adapters.local.spans import SqliteSpanStore

    key = str(settings.traces_path.resolve())
    with _lock:
        if key not in _span_stores:
            settings.home.mkdir(parents=True, exist_ok=True)
            store = SqliteSpanStore(settings.traces_path)
            add_exporter(store)
            _span_stores[key] = store
        return _span_stores[key]


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
        from opentelemetry.exporter.cloud_trace import CloudTraceSpanExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        add_exporter(CloudTraceSpanExporter(project_id=settings.gcp_project))
        readers.append(PeriodicExportingMetricReader(
            CloudMonitoringMetricsExporter(project_id=settings.gcp_project), export_interval_millis=60_000))
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        add_exporter(OTLPSpanExporter())
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=30_000))
    if readers:
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource

        service = os.environ.get("OTEL_SERVICE_NAME") or os.environ.get("K_SERVICE") or "ragbus"
        metrics.set_meter_provider(MeterProvider(metric_readers=readers,
                                                 resource=Resource.create({"service.name": service})))
        log.info("metrics exported by %d reader(s)", len(readers))


#: How long the end of an invocation may wait for exports. Cloud Functions (Cloud Run)
#: throttles the CPU once the response is sent, so the background export threads may
#: never run again; a bounded flush before returning gets the spans out without letting
#: a slow exporter hold every invocation hostage.
FLUSH_TIMEOUT_MS = 2_000


def flush_telemetry(timeout_millis: int = FLUSH_TIMEOUT_MS) -> None:
    """Export this process's pending spans and metrics now, waiting at most ``timeout_millis``.

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
