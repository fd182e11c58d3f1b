"""Markers follow the folder: tests/unit -> unit, tests/integration -> integration, tests/e2e -> e2e,
tests/hostile -> hostile.

The suite never touches the user's data: RAGBUS_HOME points at a fresh temporary folder for the
whole run (code that reads settings without a home of its own, such as spans recorded by unit
tests, lands there, not in ./.ragbus or the user's RAGBUS_HOME), and a run that changed ./.ragbus
or the user's RAGBUS_HOME fails."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# GNU readline, imported in pytest-xdist's workers (`make test` runs two), exports COLUMNS=80 and LINES=24
# into their environment; rich then wraps at 80 columns what the tests read as unwrapped (a pipe's output).
# Every process of a run keeps the terminal size the run was started with (none in CI).
_STARTED_TERMINAL = json.loads(os.environ.setdefault(
    "TESTS_STARTED_TERMINAL", json.dumps({name: os.environ.get(name) for name in ("COLUMNS", "LINES")})))


def _terminal_as_started() -> None:
    for name, value in _STARTED_TERMINAL.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


_terminal_as_started()

# The registry of stages makes the hop message of each stage another follows (and so its topic):
# every test sees the same message table, whichever module it imports first.
import shared.runtime.stages  # noqa: E402,F401

_ROOT = Path(__file__).parent
# pytest-xdist's workers (`make test` runs two) inherit the controller's environment, whose RAGBUS_HOME
# is already the controller's suite home: each guards the user's home the controller was started with
_USER_HOME = os.environ.setdefault("TESTS_USER_RAGBUS_HOME", os.environ.get("RAGBUS_HOME") or "")
_USER_HOMES = [Path(p) for p in {_USER_HOME, str(Path.cwd() / ".ragbus"), str(_ROOT.parent / ".ragbus")} if p]
_SUITE_HOME = Path(tempfile.mkdtemp(prefix="ragbus-tests-home-"))


def _snapshot(homes: list[Path]) -> dict[str, tuple[int, int]]:
    seen: dict[str, tuple[int, int]] = {}
    for home in homes:
        if home.is_dir():
            for path in home.rglob("*"):
                if path.is_file():
                    stat = path.stat()
                    seen[str(path)] = (stat.st_size, stat.st_mtime_ns)
        elif home.exists():
            seen[str(home)] = (home.stat().st_size, home.stat().st_mtime_ns)
    return seen


_BEFORE = _snapshot(_USER_HOMES)
os.environ["RAGBUS_HOME"] = str(_SUITE_HOME)
# One optimised-graph cache of the embedder for the whole run (xdist's workers inherit the controller's),
# not one of about 90 MB in every test's home: the CLI's processes load it instead of optimising the model
os.environ["RAGBUS_MODEL_CACHE"] = os.environ.setdefault("TESTS_MODEL_CACHE", str(_SUITE_HOME / "model-cache"))


def pytest_sessionstart(session: pytest.Session) -> None:
    _terminal_as_started()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        kind = Path(str(item.fspath)).relative_to(_ROOT).parts[0]
        if kind in {"unit", "integration", "e2e", "hostile"}:
            item.add_marker(getattr(pytest.mark, kind))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _longest_files_first(items)


def _longest_files_first(items: list[pytest.Item]) -> None:
    """In `make test`'s workers (`-n 2 --dist loadfile --no-loadscope-reorder`), files are handed out
    in collection order, one whole file at a time, and the run ends when the last file handed out
    ends: the longest files go first and the many short ones fill in at the end. (xdist's default
    order, most tests first, handed out the one-test e2e and integration files, some of the longest,
    last.) tests/durations.json holds each file's seconds in one whole run (`python -m tests.durations
    RUN.xml` rewrites it from a run's --junitxml); a file not in it counts as the median of its
    folder's (tests/unit, tests/e2e, ...). Tests keep their order within a file, and both workers
    order their collections alike (xdist requires the same collection on each)."""
    try:
        seconds: dict[str, float] = json.loads((_ROOT / "durations.json").read_text())["files"]
    except (OSError, ValueError, KeyError):
        return
    by_folder: dict[str, list[float]] = {}
    for name, value in seconds.items():
        by_folder.setdefault(name.split("/")[1], []).append(value)
    median = {folder: sorted(values)[len(values) // 2] for folder, values in by_folder.items()}

    def cost(item: pytest.Item) -> float:
        name = item.nodeid.split("::", 1)[0]
        return seconds.get(name, median.get(name.split("/")[1] if "/" in name else "", 0.0))

    items.sort(key=cost, reverse=True)  # stable: a file's tests stay together and in order


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    changed = sorted(set(_snapshot(_USER_HOMES).items()) ^ set(_BEFORE.items()))
    shutil.rmtree(_SUITE_HOME, ignore_errors=True)
    if changed:
        paths = sorted({path for path, _ in changed})
        session.config.get_terminal_writer().line(
            "the test run changed the user's data directory: " + ", ".join(paths[:5])
            + " (a test wrote outside its own home, or a ragbus process was running on it)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _message_types_restored():
    """A message class a test declares registers itself in the process-wide message table; it is
    taken out again after the test, so no later test sees a topic only that test needed."""
    from shared.contract import messages

    before = dict(messages.MESSAGE_TYPES)
    yield
    messages.MESSAGE_TYPES.clear()
    messages.MESSAGE_TYPES.update(before)


@pytest.fixture(autouse=True)
def _no_query_deadline_carried_over():
    """A stage called directly by a test (not through a delivery, which runs in a copy of the
    context) notes its query's deadline in this thread's context; without this, a later test's model
    call was cut to what an earlier test's query had left ("the call's deadline passed" in CI)."""
    from shared.query import call_deadline

    token = call_deadline._deadline.set(None)
    yield
    call_deadline._deadline.reset(token)
