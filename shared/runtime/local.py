"""The embedded runtime's dispatcher: worker threads that pull the SQLite bus
and hand each delivery to its stage's handler."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from atexit import _run_exitfuncs  # the exit handlers, run before os._exit skips them (CPython's)
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from os import _exit

from shared.adapters.local.bus import Delivery, SqliteBus
from shared.contract.deps import Deps
from shared.contract.errors import DataFileError
from shared.runtime.dispatch import Disposition, handle_delivery, record_dead_letter
from shared.runtime.retention import SWEEP_INTERVAL_S, sweep_quietly
from shared.runtime.stages import CONSUMERS, Consumer

log = logging.getLogger("ragbus.runtime")

# Workers a stopped runtime left busy in a handler (see :func:`exit_past_busy_workers`).
_LEFT_BUSY: list[threading.Thread] = []
_SAY_WAITING_S = 1.0  # a stop still waiting for a worker after this long says so (LocalRuntime.stop's waiting)


class LocalRuntime:
    """Runs the given consumers in this process until :meth:`stop`."""

    def __init__(self, deps: Deps, bus: SqliteBus, consumers: Iterable[Consumer] = CONSUMERS) -> None:
        self.deps = deps
        self.bus = bus
        self.consumers = tuple(consumers)
        bus.ensure_subscriptions({c.subscription: c.topic for c in (*CONSUMERS, *self.consumers)})
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._in_flight: dict[int, tuple[Delivery, float]] = {}  # delivery id -> (delivery, pulled at)
        self._in_flight_lock = threading.Lock()
        # Like the Pub/Sub client's max_lease_duration: a handler stuck for longer than
        # this stops being kept alive, and its delivery goes to another worker.
        self.max_lease_s = 3600.0
        # Why the workers stopped on their own: a data file they cannot write (a full disk).
        # Retrying cannot help until someone frees space, and every retry would log and write
        # again; deliveries left unsettled are taken up by the next run.
        self.halted: str | None = None
        self._halted_at = 0.0
        # A long-running process (serve) tries again after this long: someone may have freed
        # space meanwhile. Once a pause, not per message, so a still-full disk is said once a pause.
        self.resume_after_s = 60.0

    def start(self) -> LocalRuntime:
        reclaimed = self.bus.reclaim_orphaned_leases()
        if reclaimed:
            log.warning("reclaimed %d deliveries leased by processes that died", reclaimed)
        for consumer in self.consumers:
            for n in range(consumer.workers):
                thread = threading.Thread(
                    target=self._work, args=(consumer,), name=f"{consumer.subscription}#{n}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        keeper = threading.Thread(target=self._keep_leases, name="lease-keeper", daemon=True)
        keeper.start()
        self._threads.append(keeper)
        sweeper = threading.Thread(target=self._sweep, name="retention", daemon=True)
        sweeper.start()
        self._threads.append(sweeper)
        return self

    def _sweep(self) -> None:
        """Retention (:mod:`shared.runtime.retention`): now, then every hour while the runtime runs."""
        while True:
            sweep_quietly(self.deps.settings, self.bus, self.deps.state, self.deps.clock.now())
            if self._stop.wait(SWEEP_INTERVAL_S):
                return

    def stop(self, timeout: float = 10.0, waiting: Callable[[], None] | None = None) -> bool:
        """Stop pulling and wait up to ``timeout`` for the workers; False when one is still busy in
        a handler. Its delivery is handed back uncounted (:meth:`SqliteBus.release`) for the next run
        to take up; the handler finishes, or dies with the process. ``waiting`` is called once when a
        worker is still busy after a second (a command says why it has not ended yet)."""
        self._stop.set()
        self.bus.wake_waiters()  # idle workers notice the stop
        started = time.monotonic()
        deadline = started + timeout
        with _hurried_by_interrupt() as hurry:
            for thread in self._threads:
                while thread.is_alive() and not hurry.is_set() and (left := deadline - time.monotonic()) > 0:
                    thread.join(min(left, 0.1))
                    if waiting is not None and thread.is_alive() and time.monotonic() - started >= _SAY_WAITING_S:
                        waiting()
                        waiting = None
            busy = [thread for thread in self._threads if thread.is_alive()]
            self._threads.clear()
            if busy:
                with self._in_flight_lock:
                    unfinished = [delivery for delivery, _ in self._in_flight.values()]
                handed_back = self.bus.release(unfinished)
                log.debug("stopped with %d worker(s) still in a handler (%s); %d delivery(ies) handed back",
                          len(busy), ", ".join(t.name for t in busy), handed_back)
                _LEFT_BUSY.extend(busy)
        return not busy

    def __enter__(self) -> LocalRuntime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def halt(self, reason: str) -> None:
        """Stop every worker of this runtime because of ``reason`` (said once, not per worker)."""
        with self._in_flight_lock:
            if self.halted is not None:
                return
            # said before it is seen: a waiter that finds ``halted`` set finds the line written too
            log.error("workers stopped: %s", reason)
            self.halted = reason
            self._halted_at = time.monotonic()
        self.bus.wake_waiters()

    def wait_idle(self, timeout: float, subscriptions: list[str] | None = None) -> bool:
        """Wait until no delivery is outstanding (for ``subscriptions``, or all); False at
        once when the workers halted."""
        subs = subscriptions or [c.subscription for c in self.consumers]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.halted is None:
            if self.bus.outstanding(subs) == 0:
                return True
            time.sleep(0.02)
        return False

    def process_one(self, consumer: Consumer, delivery: Delivery) -> Disposition:
        if delivery.exhausted:  # the bus dead-lettered it as it came up again
            record_dead_letter(
                self.deps, consumer, delivery.data, delivery.attributes,
                self.bus.exhausted_reason(delivery.attempt),
                attempts=delivery.attempt, message_id=delivery.message_id,
            )
            return Disposition.DEAD
        with self._in_flight_lock:
            self._in_flight[delivery.id] = (delivery, time.monotonic())
        try:
            result = handle_delivery(
                consumer, delivery.data, delivery.attributes, self.deps,
                attempt=delivery.attempt, message_id=delivery.message_id,
            )
        finally:
            with self._in_flight_lock:
                self._in_flight.pop(delivery.id, None)
        if result.halt:
            self.halt(result.error or "a data file cannot be written")
            return Disposition.RETRY
        if result.disposition is Disposition.ACK:
            self.bus.ack(delivery)
            return Disposition.ACK
        dead = self.bus.nack(delivery, result.error or "", permanent=result.disposition is Disposition.DEAD)
        if dead:
            record_dead_letter(
                self.deps, consumer, delivery.data, delivery.attributes, result.error or "",
                attempts=delivery.attempt, message_id=delivery.message_id,
            )
            return Disposition.DEAD
        return Disposition.RETRY

    def _keep_leases(self) -> None:
        """Extend the lease of every delivery whose handler is still running, a third of
        the ack deadline at a time, so no other worker receives it meanwhile."""
        interval = max(0.02, self.bus.retry.ack_deadline_s / 3)
        while not self._stop.wait(interval):
            now = time.monotonic()
            with self._in_flight_lock:
                held = [d for d, since in self._in_flight.values() if now - since < self.max_lease_s]
            try:
                for delivery in self.bus.extend_leases(held):
                    log.warning("%s: lease of delivery %s was lost (redelivered elsewhere)",
                                delivery.subscription, delivery.id)
            except Exception:  # noqa: BLE001 - a locked database: try again next round
                log.exception("could not extend leases")

    def _resumed(self) -> bool:
        """Whether the workers may pull (again): not halted, or halted long enough ago to retry."""
        with self._in_flight_lock:
            if self.halted is None:
                return True
            if time.monotonic() - self._halted_at < self.resume_after_s:
                return False
            self.halted = None
        log.warning("workers resume after %.0f s: trying again", self.resume_after_s)
        return True

    def _work(self, consumer: Consumer) -> None:
        while not self._stop.is_set():
            if not self._resumed():
                self._stop.wait(1.0)
                continue
            seen = self.bus.publish_count(consumer.topic)
            try:
                deliveries = self.bus.pull(consumer.subscription, 1)
            except DataFileError as exc:
                self.halt(str(exc))
                continue
            except Exception:  # noqa: BLE001 - a locked database must not kill the worker
                log.exception("%s: pull failed", consumer.subscription)
                time.sleep(0.5)
                continue
            if not deliveries:
                self.bus.wait_for_messages(0.05, seen, consumer.topic, consumer.subscription)
                continue
            for delivery in deliveries:
                if self.halted is not None:
                    break  # pulled before the halt: left unsettled, redelivered to the next run
                try:
                    self.process_one(consumer, delivery)
                except DataFileError as exc:
                    self.halt(str(exc))
                except Exception:  # noqa: BLE001 - the lease will expire and redeliver
                    log.exception("%s: could not settle delivery %s", consumer.subscription, delivery.id)


@contextmanager
def _hurried_by_interrupt() -> Iterator[threading.Event]:
    """An event set by Ctrl-C (SIGINT) while the block runs, instead of a KeyboardInterrupt: a second
    Ctrl-C while a stopping runtime waits for a busy worker means "stop waiting", and raised in the
    wait it skipped the hand-back (the delivery stayed leased, its attempt counted) and the busy
    worker aborted the process at exit. Only the main thread can catch signals; elsewhere, and where
    SIGINT is ignored, the event is never set."""
    hurry = threading.Event()
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) in (
            signal.SIG_IGN, None):
        yield hurry
        return
    previous = signal.signal(signal.SIGINT, lambda *_: hurry.set())
    try:
        yield hurry
    finally:
        signal.signal(signal.SIGINT, previous)


def workers_left_busy() -> bool:
    """Whether a stopped runtime of this process left a worker still in a handler."""
    return any(thread.is_alive() for thread in _LEFT_BUSY)


def exit_past_busy_workers(code: object) -> None:
    """End the process now with the status ``sys.exit(code)`` gives when a stopped runtime left a worker busy in a handler;
    return otherwise.

    Python's own exit ends such a daemon thread where it stands. Inside onnxruntime (or another C++
    library) that is a forced unwind through C++ frames, which aborts the whole process (SIGABRT,
    "terminate called without an active exception"): a command that had printed its answer exited
    134. Here the exit handlers run first (spans exported, index repairs finished), the streams are
    flushed, and the process ends without finalising the interpreter. The busy worker's delivery was
    handed back when the runtime stopped, and the next run takes it up.
    """
    if not workers_left_busy():
        return
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # what sys.exit does with a message
        code = 1
    _run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    _exit(code or 0)
