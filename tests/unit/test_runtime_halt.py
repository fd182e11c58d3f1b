"""A data file the workers cannot write (a full disk) halts the embedded runtime once, leaves the
delivery unsettled (never dead-lettered), and a long-running process tries again after a pause."""

import logging
import threading
import time

from shared.adapters.local.bus import RetrySettings, SqliteBus
from shared.contract import state_collections, topics
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import DataFileError
from shared.contract.messages import QuerySubmitted
from shared.runtime.local import LocalRuntime
from shared.runtime.stages import Consumer
from tests.fakes import FakeClock, InMemoryStateStore

CALLS: list[str] = []
FULL = threading.Event()


def disk_handler(message, deps):
    CALLS.append(message.query_id)
    if FULL.is_set():
        raise DataFileError("/home/x/index/chunks.db: the disk is full (database or disk is full)", "full")


DISK = Consumer("disk", topics.QUERY_SUBMITTED, "tests.unit.test_runtime_halt:disk_handler", workers=3)


def test_a_full_disk_halts_the_workers_once_and_they_resume_after_the_pause(tmp_path, caplog):
    CALLS.clear()
    FULL.set()
    bus = SqliteBus(tmp_path / "bus.db", retry=RetrySettings(max_attempts=2, min_backoff_s=0.01, max_backoff_s=0.02,
                                                             ack_deadline_s=0.5))
    deps = Deps(Settings(home=tmp_path), publisher=bus, state=InMemoryStateStore(), clock=FakeClock())
    runtime = LocalRuntime(deps, bus, consumers=[DISK])
    runtime.resume_after_s = 1.5
    with runtime:
        for n in range(5):
            bus.publish(QuerySubmitted(query_id=f"q{n}"))
        started = time.monotonic()
        assert runtime.wait_idle(10) is False
        assert time.monotonic() - started < 2, "a halted runtime does not make its waiter sit out the timeout"
        assert runtime.halted and "the disk is full" in runtime.halted
        assert len(CALLS) <= 3  # one per worker at most, not one per message and retry
        assert [r.message for r in caplog.records].count(f"workers stopped: {runtime.halted}") == 1
        assert deps.state.count(state_collections.DEAD_LETTERS) == 0 and bus.dead_letter_count() == 0
        FULL.clear()  # someone freed space
        deadline = time.monotonic() + 20
        # every message runs once space is back (outstanding() alone can read 0 while one is between
        # its lease and its redelivery)
        while time.monotonic() < deadline and (runtime.halted or bus.outstanding(["disk"])
                                               or len(set(CALLS)) < 5):
            time.sleep(0.05)
        assert runtime.halted is None and bus.outstanding(["disk"]) == 0
    assert bus.dead_letter_count() == 0, "a message pulled while halted was dead-lettered unrun"
    assert set(CALLS) == {f"q{n}" for n in range(5)}


def test_the_halt_is_logged_before_anyone_can_see_it(tmp_path):
    """A waiter that sees ``halted`` (wait_idle returns False) finds the log line already written:
    it was written after the flag, and the full-disk test, reading the log as soon as it saw the
    flag, sometimes found no line."""
    seen: list[str | None] = []
    bus = SqliteBus(tmp_path / "bus.db", retry=RetrySettings(max_attempts=2))
    runtime = LocalRuntime(Deps(Settings(home=tmp_path), publisher=bus, state=InMemoryStateStore(),
                                clock=FakeClock()), bus, consumers=[])

    class FlagReader(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(runtime.halted)  # what a reader of the flag sees while the line is written

    handler = FlagReader()
    logger = logging.getLogger("ragbus.runtime")
    logger.addHandler(handler)
    try:
        runtime.halt("DataFileError: the disk is full")
    finally:
        logger.removeHandler(handler)
    assert seen == [None] and runtime.halted == "DataFileError: the disk is full"
