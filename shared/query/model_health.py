"""What the stages do when the model API refuses them, and what the gateway reads back.

A refusal of the request itself (:class:`~shared.contract.errors.ModelUnusable`: unknown
or retired model, invalid argument, no permission) is not worked around: the
query ends ``failed`` with the model and the status in its reason, the error is
logged at ERROR with the trace id, ``ragbus.model.unusable`` counts it, and a
record in the ``model_health`` collection tells the gateway (which may run in
another process or function) that the model is unusable, for ``/healthz`` and
``/readyz``. The record is removed when a stage process that saw the failure
later gets a reply from the same model (e.g. after access was granted); a new
``RAGBUS_GEMINI_MODEL`` or ``RAGBUS_OPENAI_MODEL`` is a new key, so changing the model
clears it too.

A served model whose server cannot be reached at all (nothing listens at ``RAGBUS_OPENAI_BASE_URL``) is
unusable too while it lasts: the gateway asks the server itself (:meth:`HttpModelAPI.unreachable
<shared.adapters.http_model.HttpModelAPI.unreachable>`) for ``/readyz`` and ``/healthz``, as no stage records a
failure that is only transient.

Transient failures still fall back; :func:`note_fallback` makes each one
visible in the query record's ``fallbacks`` list (stage, iteration, reason).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

from shared.contract import state_collections
from shared.contract.errors import ModelUnusable
from shared.contract.ports import StateStore
from shared.contract.redaction import redact
from shared.observability import metrics
from shared.observability.tracing import annotate, current_trace_id
from shared.query.record import QueryRecord
from shared.query.state import fail_query

log = logging.getLogger("ragbus.model")

_refused: set[str] = set()  # models this process saw refused, so a success knows to clear the record
_refused_lock = threading.Lock()


def health_key(model: str) -> str:
    """The record's key: the model id (a Vertex resource name's slashes are not allowed in keys)."""
    return model.replace("/", "|")


def model_unusable(
    state: StateStore, *, query_id: str, stage: str, error: ModelUnusable, now: datetime
) -> QueryRecord | None:
    """End ``query_id`` as failed because the model refused ``stage``; record and report it."""
    trace_id = current_trace_id()
    log.error("query %s: %s stage cannot use the model: %s (trace %s)", query_id, stage, error, trace_id or "-")
    metrics.model_unusable(error.model, error.status, stage)
    annotate(model_unusable=True, **{"error.type": f"http.{error.status}"})
    state.put(state_collections.MODEL_HEALTH, health_key(error.model), {
        "model": error.model,
        "usable": False,
        "status": error.status,
        "operation": error.operation,
        "stage": stage,
        "reason": redact(str(error)),  # a server's words may quote the key it was sent
        "query_id": query_id,
        "trace_id": trace_id,
        "at": now.isoformat(),
    })
    with _refused_lock:
        _refused.add(error.model)
    reason = redact(f"{stage}: {error}")
    record = fail_query(state, query_id, reason, now)
    if record is not None and record.error == reason:  # ended by this call, not before
        metrics.query_ended("failed", len(record.iterations))
    return record


def model_answered(state: StateStore, model: str | None) -> None:
    """A call to ``model`` succeeded: if this process had recorded it unusable, clear that."""
    if not model:
        return
    with _refused_lock:
        if model not in _refused:
            return
        _refused.discard(model)
    state.delete(state_collections.MODEL_HEALTH, health_key(model))
    log.info("model %s answered again; cleared its unusable record", model)


def model_health(state: StateStore, model: str | None, unreachable: str | None = None) -> dict[str, Any]:
    """``{"model", "usable"}`` plus, when a refusal is recorded, its status, reason, stage and time; else, when the
    model's server cannot be reached (``unreachable``: why), ``reachable`` false and that reason."""
    if not model:
        return {"model": None, "usable": True}
    record = state.get(state_collections.MODEL_HEALTH, health_key(model))
    if not record or record.get("usable", True):
        if unreachable:
            return {"model": model, "usable": False, "reachable": False, "reason": redact(unreachable)}
        return {"model": model, "usable": True}
    shown = {k: record.get(k) for k in ("status", "reason", "stage", "at", "trace_id")}
    if isinstance(shown["reason"], str):
        shown["reason"] = redact(shown["reason"])  # a record written before redaction, or by another version
    return {"model": model, "usable": False, **shown}


def note_fallback(record: QueryRecord, *, stage: str, iteration: int, reason: str) -> None:
    """Inside a query-record change: keep that ``stage`` answered without the model, and why."""
    record.fallbacks.append({"stage": stage, "iteration": iteration, "reason": reason})
