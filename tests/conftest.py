"""Markers follow the folder: tests/unit -> unit, tests/integration -> integration, tests/e2e -> e2e,
tests/hostile -> hostile."""

from __future__ import annotations

from pathlib import Path

import pytest

_ROOT = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        kind = Path(str(item.fspath)).relative_to(_ROOT).parts[0]
        if kind in {"unit", "integration", "e2e", "hostile"}:
            item.add_marker(getattr(pytest.mark, kind))
