"""The production topology on one machine: `ragbus up --emulators` / `ragbus down`.

``up`` records what it started in ``$RAGBUS_HOME/topology.json``: every process
(emulators and one functions-framework server per stage) by pid, and the
environment a client needs to talk to them. Other ``ragbus`` commands read it
with :func:`running_env`, so ``poll``, ``ingest``, ``ask`` and ``stats`` work
against the topology while it runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

STATE_FILE = "topology.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(home: Path) -> dict[str, Any] | None:
    """The recorded topology under ``home``, or None when nothing was started there."""
    path = home / STATE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None


def running_env(home: Path) -> dict[str, str] | None:
    """The client environment of a topology that is up under ``home`` (all its processes alive)."""
    state = read_state(home)
    if not state:
        return None
    pids = [p["pid"] for p in state.get("processes", [])]
    if not pids or not all(_alive(int(pid)) for pid in pids):
        return None
    return {str(k): str(v) for k, v in state.get("env", {}).items()}
