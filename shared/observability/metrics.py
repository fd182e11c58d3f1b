"""OpenTelemetry metrics of the pipeline (Cloud Monitoring in gcp: workload.googleapis.com/ragbus.*).

Instruments are created from the global MeterProvider on first use, so a
process that installs a provider (``shared.runtime.telemetry``) before handling
messages exports them, and one that does not pays almost nothing. Label names
match the dashboard in ``infra/`` (``outcome``, ``stage``, ``subscription``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from opentelemetry import metrics
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)

log = logging.getLogger("ragbus.metrics")

#: Cloud Monitoring accepts one point per time series every few seconds and rejects
#: faster writes ("points were written more frequently than the maximum sampling
#: period"); its OpenTelemetry exporter assumes 10 s between writes
#: (opentelemetry.exporter.cloud_monitoring.WRITE_INTERVAL).
MIN_EXPORT_INTERVAL_S = 10.0


class ThrottledMetricExporter(MetricExporter):
    """Sends at most one batch per ``min_interval_s``; a batch offered sooner is skipped.

    Skipping loses nothing because the temporality is cumulative: every batch holds the
    totals since the process started, so the next batch sent carries what a skipped one
    held (aggregated in between). A Cloud Function flushes its metrics at the end of every
    invocation (the CPU is throttled after it), so without this each message would be a
    write, and the periodic reader's own exports would land seconds after those.
    """

    def __init__(self, exporter: MetricExporter, min_interval_s: float = MIN_EXPORT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # No temporality preference: the reader's default is cumulative for every instrument,
        # whatever the wrapped exporter prefers (a delta preference would make skipping lose data).
        super().__init__(preferred_temporality=None)
        self.exporter = exporter
        self.min_interval_s = min_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_sent: float | None = None
        self.sent = 0
        self.skipped = 0

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        with self._lock:
            now = self._clock()
            if self._last_sent is not None and now - self._last_sent < self.min_interval_s:
                self.skipped += 1
                return MetricExportResult.SUCCESS
            # Counted as a write even when it fails: the service may have stored part of it.
            self._last_sent = now
            self.sent += 1
        return self.exporter.export(metrics_data, timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.exporter.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        self.exporter.shutdown(timeout_millis=timeout_millis, **kwargs)


@functools.lru_cache(maxsize=1)
def _instruments() -> dict[str, object]:
    meter = metrics.get_meter("ragbus")
    return {
        "queries": meter.create_counter("ragbus.queries", unit="1", description="queries ended, by outcome"),
        "refinements": meter.create_counter("ragbus.refinements", unit="1", description="refinement rounds started"),
        "iterations": meter.create_histogram("ragbus.query.iterations", unit="1",
                                             description="iterations a query used"),
        "grades": meter.create_histogram("ragbus.grade.score", unit="1", description="grade scores, by decision"),
        "stage": meter.create_histogram("ragbus.stage.duration", unit="ms",
                                        description="time in a stage handler, by stage"),
        "items": meter.create_counter("ragbus.ingested.items", unit="1", description="documents indexed"),
        "chunks": meter.create_counter("ragbus.ingested.chunks", unit="1", description="chunks indexed"),
        "dead": meter.create_counter("ragbus.dead_letters", unit="1", description="messages dead-lettered"),
        "unusable": meter.create_counter("ragbus.model.unusable", unit="1",
                                         description="model calls the API refused as misconfigured"),
    }


def query_ended(outcome: str, iterations: int) -> None:
    m = _instruments()
    m["queries"].add(1, {"outcome": outcome})
    m["iterations"].record(iterations, {"outcome": outcome})


def query_graded(score: float, decision: str) -> None:
    m = _instruments()
    m["grades"].record(score, {"decision": decision})
    if decision == "refine":
        m["refinements"].add(1)


def stage_handled(stage: str, milliseconds: float, delivery: str) -> None:
    _instruments()["stage"].record(milliseconds, {"stage": stage, "delivery": delivery})


def document_indexed(source: str, chunks: int) -> None:
    m = _instruments()
    m["items"].add(1, {"source": source})
    m["chunks"].add(chunks, {"source": source})


def dead_lettered(subscription: str) -> None:
    _instruments()["dead"].add(1, {"subscription": subscription})


def model_unusable(model: str, status: int, stage: str) -> None:
    _instruments()["unusable"].add(1, {"model": model, "status": str(status), "stage": stage})
