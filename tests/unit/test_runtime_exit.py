"""A command that ends while a stopped runtime's worker is still busy in a handler exits with its own
status: before, Python's exit ended that thread inside onnxruntime and the process aborted (134,
"terminate called without an active exception") after printing its answer."""

import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime

import pytest

from shared.adapters.local.bus import SqliteBus
from shared.contract import topics
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import QuerySubmitted
from shared.runtime import local
from shared.runtime.local import LocalRuntime
from shared.runtime.stages import Consumer
from tests.fakes import FakeClock, InMemoryStateStore

pytestmark = pytest.mark.unit

ENTERED = threading.Event()
RELEASE = threading.Event()


def busy_handler(message, deps):
    ENTERED.set()
    RELEASE.wait(30)


BUSY = Consumer("busy", topics.QUERY_SUBMITTED, "tests.unit.test_runtime_exit:busy_handler")


def busy_runtime(tmp_path):
    """A bus, its deps and a started runtime whose one worker blocks in ``busy_handler``."""
    ENTERED.clear()
    RELEASE.clear()
    bus = SqliteBus(tmp_path / "bus.db")
    deps = Deps(Settings(home=tmp_path), publisher=bus, state=InMemoryStateStore(),
                clock=FakeClock(datetime(2026, 1, 1, tzinfo=UTC)))
    return bus, deps, LocalRuntime(deps, bus, consumers=[BUSY]).start()


def test_stop_says_when_a_worker_is_still_in_a_handler(tmp_path):
    bus, deps, runtime = busy_runtime(tmp_path)
    try:
        bus.publish(QuerySubmitted(query_id="q1"))
        assert ENTERED.wait(10)
        said: list[str] = []
        assert runtime.stop(timeout=1.5, waiting=lambda: said.append("waiting")) is False
        assert said == ["waiting"]  # once, after a second
        assert any(t.name.startswith(BUSY.subscription) for t in local._LEFT_BUSY)
        # handed back uncounted: the next run takes it up as a first attempt, at once
        (again,) = bus.pull(BUSY.subscription)
        assert again.attempt == 1 and again.data
        bus.release([again])
    finally:
        RELEASE.set()
        for thread in local._LEFT_BUSY:
            thread.join(10)
        local._LEFT_BUSY.clear()
    idle = LocalRuntime(deps, bus, consumers=[BUSY]).start()
    assert idle.wait_idle(10)  # the handed-back delivery, done by the next runtime
    assert idle.stop(timeout=5, waiting=lambda: pytest.fail("an idle runtime's stop does not wait")) is True
    assert bus.progress(0)[BUSY.subscription] == {"pending": 0, "acked": 1, "dead": 0}


def test_no_busy_worker_leaves_the_exit_to_python():
    assert not any(t.is_alive() for t in local._LEFT_BUSY)
    assert local.exit_past_busy_workers(0) is None  # returned: nothing to exit past


SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    from shared.adapters.local.embedder import OnnxMiniLMEmbedder
    from shared.runtime import local

    embedder = OnnxMiniLMEmbedder()
    embedder.embed(["warm"])
    running = threading.Event()

    def work():  # a handler still embedding when the command ends
        while True:
            embedder.embed(["a passage long enough to keep the session busy for a while " * 6] * 8)
            running.set()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    local._LEFT_BUSY.append(worker)
    running.wait(60)
    time.sleep(0.3)  # inside the next call
    atexit.register(lambda: print("exit handlers ran", flush=True))
    print("the answer", flush=True)
    local.exit_past_busy_workers(3)
    sys.exit(3)  # Python's own exit: aborts inside onnxruntime
""")


def test_a_command_ends_with_its_own_status_while_a_worker_embeds(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**__import__("os").environ, "PYTHONPATH": str(_repo())})
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["the answer", "exit handlers ran"]
    assert "terminate called" not in done.stderr


def _repo():
    from pathlib import Path

    return Path(__file__).resolve().parents[2]


def test_a_second_ctrl_c_while_stopping_stops_waiting_and_still_hands_the_delivery_back(tmp_path):
    """Ctrl-C, then Ctrl-C again during stop's wait for a busy worker: the KeyboardInterrupt raised in
    the join skipped the hand-back, the delivery stayed leased with its attempt counted, and the
    process aborted inside onnxruntime ("terminate called", -6). Now the second one cuts the wait."""
    import os
    import signal
    import time

    bus, deps, runtime = busy_runtime(tmp_path)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    done = threading.Event()

    def ctrl_c_again() -> None:
        # only while stop() catches it: a KeyboardInterrupt anywhere else would end the whole test run
        # (without that, stop() waits out its timeout and the time is asserted below)
        while not done.wait(0.01):
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                os.kill(os.getpid(), signal.SIGINT)
                return

    interrupt = threading.Thread(target=ctrl_c_again, daemon=True)
    try:
        bus.publish(QuerySubmitted(query_id="q1"))
        assert ENTERED.wait(10)
        started = time.monotonic()
        interrupt.start()
        assert runtime.stop(timeout=15) is False  # no KeyboardInterrupt out of it
        assert time.monotonic() - started < 10
        assert any(t.name.startswith(BUSY.subscription) for t in local._LEFT_BUSY)
        (again,) = bus.pull(BUSY.subscription)
        assert again.attempt == 1
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back
    finally:
        done.set()
        signal.signal(signal.SIGINT, previous)
        RELEASE.set()
        for thread in local._LEFT_BUSY:
            thread.join(10)
        local._LEFT_BUSY.clear()
