"""Every stage's entry point, for functions-framework: ``--target=<stage>``.

Cloud Functions deploys this one source once per stage; each target is the
thin function in ``services/<stage>/main.py``.

The targets are imported on first access (PEP 562 ``__getattr__``), not here:
functions-framework looks its target up with ``getattr`` after loading this file,
so a function imports only its own stage. Importing them all made every
function load the gateway's stack (Starlette, MCP, uvicorn: about 0.6 s of
each cold start) and every stage's dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

from shared.runtime.stages import STAGES

#: target -> the module that defines it (``services/<stage>/main.py``)
_TARGETS = {target: f"services.{stage.name}.main" for stage in STAGES for target in stage.targets}

__all__ = sorted(_TARGETS)


def __getattr__(name: str) -> Any:
    module = _TARGETS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    entry_point = getattr(importlib.import_module(module), name)
    globals()[name] = entry_point  # later lookups skip this hook
    return entry_point


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_TARGETS))
