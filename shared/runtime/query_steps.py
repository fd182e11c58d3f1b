"""A query stage's step bound to the registry: its name, the message it consumes, the stage it waits
for and the hop it publishes come from :data:`shared.runtime.stages.STAGES`, so moving a stage in the
loop is a registry edit, not an edit of its neighbours' handlers.

The message type a step's ``run`` annotates is checked against the registry when the step is made:
a handler whose annotation disagrees with what the registry delivers to it does not import
(``tests/unit/test_stage_registry.py`` imports every handler).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

from shared.contract.messages import MESSAGE_TYPES, Message, QueryHop, hop_message
from shared.query.record import QueryRecord
from shared.query.runner import QueryStep
from shared.runtime.stages import STAGE_BY_NAME, STAGES, Stage


def stage_handled_by(module: str) -> Stage:
    """The registered stage whose messages ``module`` (a handler module's ``__name__``) handles."""
    found = [s for s in STAGES if s.handler.partition(":")[0] == module]
    if len(found) != 1:
        raise LookupError(f"{module} is the handler of {len(found)} registered stages, not 1: see "
                          "shared/runtime/stages.py")
    return found[0]


def producer_of(message_type: type[Message]) -> str | None:
    """The query stage that publishes ``message_type`` (None when no query stage does, e.g. the gateway)."""
    names = [s.name for s in STAGES if s.group == "query" and message_type.TOPIC in s.publishes]
    return names[0] if len(names) == 1 else None


def consumed_annotation(run: Callable[..., Any]) -> Any:
    """The type ``run(record, message, ports)`` annotates its message with (None when it names none)."""
    parameters = list(inspect.signature(run).parameters)
    if len(parameters) < 2:
        return None
    return get_type_hints(run).get(parameters[1])


def check_consumed(stage: Stage, consumes: type[Message], run: Callable[..., Any]) -> None:
    """Refuse a step whose message type the registry does not deliver to its stage, or whose ``run``
    annotates another type than the one delivered (a hop's run may name any :class:`QueryHop`)."""
    delivered = {t for t, _ in stage.consumes}
    if consumes.TOPIC not in delivered:
        raise TypeError(f"{stage.name} consumes {consumes.__name__} ({consumes.TOPIC}), but the registry delivers "
                        f"it {sorted(delivered)}: see shared/runtime/stages.py")
    annotated = consumed_annotation(run)
    if isinstance(annotated, type) and not issubclass(consumes, annotated):
        raise TypeError(f"{stage.name}: {run.__qualname__} takes {annotated.__name__}, but the registry delivers "
                        f"{consumes.__name__} ({consumes.TOPIC}); annotate it {consumes.__name__}"
                        f"{' or QueryHop' if issubclass(consumes, QueryHop) else ''}")


def hop_publisher(stage: Stage) -> Callable[[QueryRecord, int], QueryHop]:
    """What a stage that another follows publishes: its hop, naming the iteration it recorded."""
    hop = hop_message(stage.hop_topic)

    def publish(record: QueryRecord, iteration: int) -> QueryHop:
        return hop(query_id=record.id, iteration=iteration)

    return publish


def registered_step(module: str, *, consumes: type[Message] | None = None, waits: bool = True,
                    publishes: Callable[[QueryRecord, int], Message | None] | None = None,
                    after: str | None = None, **step: Any) -> QueryStep:
    """The :class:`QueryStep` of the stage ``module`` handles: ``consumes`` (default: the one message
    type the registry delivers to it) and, when ``waits``, the stage that publishes that message must
    have recorded its iteration first (``after``: that stage, named where more than one stage publishes the
    message); ``publishes`` (default: the stage's hop, for the stage that
    follows it). ``step`` holds the rest: ``run``, ``accepts``, ..."""
    stage = stage_handled_by(module)
    by_topic = {cls.TOPIC: cls for cls in MESSAGE_TYPES.values() if not cls.__dict__.get("GENERIC")}
    if consumes is None:
        (topic,) = [t for t, _ in stage.consumes]
        consumes = by_topic[topic]
    check_consumed(stage, consumes, step["run"])
    if after is not None:
        if consumes.TOPIC not in STAGE_BY_NAME[after].publishes:
            raise TypeError(f"{stage.name} waits for {after}, which does not publish {consumes.TOPIC}")
    elif stage.after and consumes.TOPIC == STAGE_BY_NAME[stage.after].hop_topic:
        after = stage.after
    else:
        after = producer_of(consumes)
    if publishes is None:
        publishes = hop_publisher(stage)
    return QueryStep(stage=stage.name, consumes=consumes, after=after if waits else None, publishes=publishes,
                     **step)
