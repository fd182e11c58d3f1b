"""The query-step runner: the bookkeeping every query stage shares, written once.

A stage declares a :class:`QueryStep`: the message it consumes, which earlier stage must have
recorded that message's iteration, a pure ``run(record, message, ports)`` returning the
:class:`Change` to record (or None: nothing to do), and the message it publishes next. The runner
loads the live record, republishes a duplicate delivery's message, checks the precondition, records
the change in one transaction, annotates the stage's span and publishes. :func:`ask_model` holds
the rules for a model call: a refusal ends the query, any other failure falls back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from shared.contract.deps import Deps
from shared.contract.errors import ConfigError, ModelUnusable, RetryableError
from shared.contract.messages import Message
from shared.observability.tracing import annotate
from shared.query.model_health import model_answered, model_unusable
from shared.query.record import QueryRecord
from shared.query.state import apply_stage, read_record, still_live

log = logging.getLogger("ragbus.query")

T = TypeVar("T")


class QueryStopped(Exception):
    """Raised inside ``run`` when the query has ended meanwhile (the model refused it): record nothing."""


@dataclass(frozen=True)
class Change:
    """What one delivery recorded: a pure change of the record (the store may call it again under
    contention), the event it adds, the model calls it spent and what its span is annotated with."""

    apply: Callable[[QueryRecord], None]
    event: str
    detail: str
    model_calls: int = 0
    annotations: Mapping[str, Any] = field(default_factory=dict)
    # Run once when this delivery's change was stored (not for a duplicate): metrics.
    recorded: Callable[[QueryRecord], None] | None = None


def _message_iteration(message: Message) -> int:
    return int(getattr(message, "iteration", 0))


def _always(message: Message) -> bool:
    return True


@dataclass(frozen=True)
class QueryStep:
    """One query stage's handling of one message type.

    ``stage`` is the registry's name, recorded in ``stages_done`` and the events. ``after`` names
    the stage that must have recorded the message's own iteration first (retried until it has).
    ``iteration`` says which iteration this delivery records; ``done`` says when the stored record
    shows this step's work done, which makes a delivery a duplicate and releases the publish.
    """

    stage: str
    consumes: type[Message]
    run: Callable[[QueryRecord, Any, Deps], Change | None]
    publishes: Callable[[QueryRecord, int], Message | None]
    after: str | None = None
    accepts: Callable[[Any], bool] = _always
    iteration: Callable[[Any], int] = _message_iteration
    done: Callable[[QueryRecord, int, str], bool] | None = None

    def is_done(self, record: QueryRecord, iteration: int) -> bool:
        if self.done is not None:
            return self.done(record, iteration, self.stage)
        return not record.ended and record.stage_done(iteration, self.stage)


def handle_query_message(steps: tuple[QueryStep, ...], message: Message, deps: Deps) -> None:
    """Deliver ``message`` to the step consuming its type (the Pub/Sub emulator applies no
    subscription filter, so a step's ``accepts`` drops what belongs to another stage)."""
    step = next((s for s in steps if isinstance(message, s.consumes)), None)
    if step is None:
        log.warning("%s ignores %s", steps[0].stage if steps else "this stage", type(message).__name__)
        return
    if step.accepts(message):
        run_step(step, message, deps)


def run_step(step: QueryStep, message: Any, deps: Deps) -> None:
    """Load, check, run, record and publish one delivery of ``step`` (module docstring)."""
    query_id, iteration = message.query_id, step.iteration(message)
    clock, state = deps.clock, deps.state
    record = read_record(state, query_id)
    if record is not None and step.is_done(record, iteration):
        _publish(step, deps, record, iteration)  # a redelivery: the first publish may have been lost
        return
    record = still_live(state, record, clock.now())
    if record is None:
        log.info("query %s is gone, ended or overdue; %s does nothing", query_id, step.stage)
        return
    seen = _message_iteration(message)
    if step.after is not None and not record.stage_done(seen, step.after):
        raise RetryableError(f"query {query_id}: the {step.after} has not recorded iteration {seen} yet; "
                             "retry once its write is visible")
    start = clock.monotonic()
    try:
        change = step.run(record, message, deps)
    except QueryStopped:
        return
    if change is None:
        return
    elapsed_ms = (clock.monotonic() - start) * 1000.0
    annotate(**change.annotations)
    result = apply_stage(
        state, query_id, iteration=iteration, stage=step.stage, event_type=change.event, detail=change.detail,
        now=clock.now(), change=change.apply, model_calls=change.model_calls, elapsed_ms=elapsed_ms,
    )
    if result.applied and change.recorded is not None and result.record is not None:
        change.recorded(result.record)
    if result.record is not None and step.is_done(result.record, iteration):
        _publish(step, deps, result.record, iteration)


def _publish(step: QueryStep, deps: Deps, record: QueryRecord, iteration: int) -> None:
    message = step.publishes(record, iteration)
    if message is not None:
        deps.publisher.publish(message)


# ------------------------------------------------------------ the model


@dataclass(frozen=True)
class ModelReply(Generic[T]):
    """A model call's reply, or why there is none: ``spent`` (the budget allowed no call) or ``error``."""

    value: T | None
    calls: int
    error: str | None = None

    @property
    def spent(self) -> bool:
        return self.calls == 0


def ask_model(
    deps: Deps, record: QueryRecord, stage: str, call: Callable[[], T], *, instead: str
) -> ModelReply[T]:
    """Call the model when the query's budget allows: a refusal (``ModelUnusable``) ends the query
    and raises :class:`QueryStopped`; a misconfiguration (``ConfigError``) is raised, loud; any other
    failure is logged and returned as ``error``, and the stage does ``instead`` (named in the log)."""
    if record.model_calls_left <= 0:
        return ModelReply(None, 0)
    llm = deps.llm
    try:
        value = call()
    except ModelUnusable as exc:
        model_unusable(deps.state, query_id=record.id, stage=stage, error=exc, now=deps.clock.now())
        raise QueryStopped(stage) from exc
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - every other model failure falls back, as the stage says
        log.warning("query %s: the %s's model call failed, %s: %s", record.id, stage, instead, exc)
        return ModelReply(None, 1, f"{type(exc).__name__}: {exc}")
    model_answered(deps.state, getattr(llm, "model", None))
    return ModelReply(value, 1)
