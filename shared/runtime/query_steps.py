"""A query stage's step bound to the registry: its name, the messages it consumes and the stage it
waits for come from :data:`shared.runtime.stages.STAGES`, so moving a stage in the loop is a
registry edit, not an edit of its neighbours' handlers."""

from __future__ import annotations

from typing import Any

from shared.contract.messages import MESSAGE_TYPES, Message
from shared.query.runner import QueryStep
from shared.runtime.stages import STAGES, Stage


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


def registered_step(module: str, *, consumes: type[Message] | None = None, waits: bool = True,
                    **step: Any) -> QueryStep:
    """The :class:`QueryStep` of the stage ``module`` handles: ``consumes`` (default: the one message
    type the registry delivers to it) and, when ``waits``, the stage that publishes that message
    must have recorded its iteration first. ``step`` holds the rest: ``run``, ``publishes``, ..."""
    stage = stage_handled_by(module)
    by_topic = {cls.TOPIC: cls for cls in MESSAGE_TYPES.values()}
    if consumes is None:
        (topic,) = [t for t, _ in stage.consumes]
        consumes = by_topic[topic]
    return QueryStep(stage=stage.name, consumes=consumes, after=producer_of(consumes) if waits else None, **step)
