"""Metric writes paced for Cloud Monitoring: at most one per 10 s per process.

Kept apart from :mod:`shared.observability.metrics` so that recording metrics needs only
the OpenTelemetry API; the SDK's exporter classes load only where metrics are exported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)

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
