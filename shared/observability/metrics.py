"""OpenTelemetry metrics of the pipeline (Cloud Monitoring in gcp: workload.googleapis.com/ragbus.*).

Instruments are created from the global MeterProvider on first use, so a
process that installs a provider (``shared.runtime.telemetry``) before handling
messages exports them, and one that does not pays almost nothing. Label names
match the dashboard in ``infra/`` (``outcome``, ``stage``, ``subscription``).
"""

from __future__ import annotations

import functools

from opentelemetry import metrics


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
        "feedback": meter.create_counter("ragbus.feedback", unit="1",
                                         description="answers rated, by rating (up, down) and outcome"),
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


def feedback_given(rating: str, outcome: str) -> None:
    _instruments()["feedback"].add(1, {"rating": rating, "outcome": outcome})
