"""Every stage's entry point, for functions-framework: ``--target=<stage>``.

Cloud Functions deploys this one source once per stage. The targets come from the
registry (:data:`shared.runtime.stages.STAGES`): a Pub/Sub stage's is made by
:func:`shared.runtime.functions.pubsub_target`; the gateway, the GCS event functions
and the dead-letter recorder's are in their stage's ``entry_module``.

The targets are made on first access (PEP 562 ``__getattr__``), not here:
functions-framework looks its target up with ``getattr`` after loading this file,
so a function imports only its own stage. Importing them all made every
function load the gateway's stack (Starlette, MCP, uvicorn: about 0.6 s of
each cold start) and every stage's dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

from shared.runtime.stages import STAGES

#: target -> its stage
_TARGETS = {target: stage for stage in STAGES for target in stage.targets}

__all__ = sorted(_TARGETS)


def __getattr__(name: str) -> Any:
    stage = _TARGETS.get(name)
    if stage is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if stage.generated_entry_point:
        entry_point = importlib.import_module("shared.runtime.functions").pubsub_target(stage.name)
    else:
        entry_point = getattr(importlib.import_module(stage.entry_module), name)
    globals()[name] = entry_point  # later lookups skip this hook
    return entry_point


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_TARGETS))
