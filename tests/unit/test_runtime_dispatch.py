"""The dispatcher and the embedded runtime's worker loop, with a probe stage."""

import threading
from datetime import UTC, datetime

from shared.adapters.local.bus import RetrySettings, SqliteBus
from shared.contract import state_collections, topics
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput, RetryableError
from shared.contract.messages import QuerySubmitted
from shared.query.state import new_query_record
from shared.runtime.local import LocalRuntime
from shared.runtime.stages import Consumer
from tests.fakes import FakeClock, InMemoryStateStore

CALLS: list[str] = []
FAIL_TIMES: dict[str, int] = {}
LOCK = threading.Lock()


def probe_handler(message, deps):
    with LOCK:
        CALLS.append(message.query_id)
        remaining = FAIL_TIMES.get(message.query_id, 0)
        if remaining == "permanent":
            raise InvalidInput(f"query {message.query_id} is unusable")
        if remaining:
            FAIL_TIMES[message.query_id] = remaining - 1
            raise RetryableError("transient")


PROBE = Consumer("probe", topics.QUERY_SUBMITTED, "tests.unit.test_runtime_dispatch:probe_handler", workers=2)


def _system(tmp_path):
    CALLS.clear()
    FAIL_TIMES.clear()
    bus = SqliteBus(tmp_path / "bus.db", retry=RetrySettings(max_attempts=3, min_backoff_s=0.01, max_backoff_s=0.02))
    deps = Deps(Settings(home=tmp_path), publisher=bus, state=InMemoryStateStore(), clock=FakeClock())
    return bus, deps, LocalRuntime(deps, bus, consumers=[PROBE])


def test_messages_reach_the_handler_once_each(tmp_path):
    bus, deps, runtime = _system(tmp_path)
    with runtime:
        for n in range(10):
            bus.publish(QuerySubmitted(query_id=f"q{n}"))
        assert runtime.wait_idle(10)
    assert sorted(CALLS) == sorted(f"q{n}" for n in range(10))


def test_retryable_failure_is_redelivered_until_it_succeeds(tmp_path):
    bus, deps, runtime = _system(tmp_path)
    FAIL_TIMES["q1"] = 2
    with runtime:
        bus.publish(QuerySubmitted(query_id="q1"))
        assert runtime.wait_idle(10)
    assert CALLS == ["q1", "q1", "q1"]
    assert deps.state.count(state_collections.DEAD_LETTERS) == 0


def test_poison_message_is_dead_lettered_with_reason_and_ends_its_query(tmp_path):
    bus, deps, runtime = _system(tmp_path)
    now = datetime(2026, 11, 1, tzinfo=UTC)
    deps.state.put(state_collections.QUERIES, "q9", new_query_record(
        "q9", "why?", top_k=10, max_iterations=2, max_model_calls=10, now=now, timeout_s=60))
    FAIL_TIMES["q9"] = 99
    with runtime:
        bus.publish(QuerySubmitted(query_id="q9"))
        assert runtime.wait_idle(10)
    assert CALLS == ["q9"] * 3  # max_attempts
    (letter,) = deps.state.list(state_collections.DEAD_LETTERS)
    assert letter["attempts"] == 3 and "RetryableError: transient" in letter["error"]
    record = deps.state.get(state_collections.QUERIES, "q9")
    assert record["status"] == "failed" and "probe gave up" in record["error"]


def test_permanent_error_dead_letters_without_retrying(tmp_path):
    bus, deps, runtime = _system(tmp_path)
    FAIL_TIMES["q2"] = "permanent"
    with runtime:
        bus.publish(QuerySubmitted(query_id="q2"))
        assert runtime.wait_idle(10)
    assert CALLS == ["q2"]
    (letter,) = deps.state.list(state_collections.DEAD_LETTERS)
    assert letter["error"] == "InvalidInput: query q2 is unusable"


def test_unknown_schema_version_is_dead_lettered_unhandled(tmp_path):
    bus, deps, runtime = _system(tmp_path)
    with runtime:
        bus.publish_raw(topics.QUERY_SUBMITTED, b'{"query_id": "q3"}',
                        {"type": "QuerySubmitted", "schema_version": "7"})
        assert runtime.wait_idle(10)
    assert CALLS == []
    (letter,) = deps.state.list(state_collections.DEAD_LETTERS)
    assert "schema_version '7' is not supported" in letter["error"]
    assert bus.dead_letter_count() == 1


SLOW_CALLS: list[str] = []
SLOW_BUS: dict = {}  # the test's bus and its clock, for the handler


def slow_handler(message, deps):
    """Runs for twice the ack deadline of the bus's clock, a quarter of the deadline at a time, each step only
    once the lease keeper has extended the lease since the last (3 s at most: past that, the lease runs out)."""
    import time

    SLOW_CALLS.append(message.query_id)
    bus, now, deadline = SLOW_BUS["bus"], SLOW_BUS["now"], SLOW_BUS["deadline"]
    for _ in range(8):
        waited = time.monotonic()
        while time.monotonic() - waited < 3:
            (lease,) = bus._db.connection().execute(
                "SELECT lease_until FROM deliveries WHERE subscription = ?", (SLOW.subscription,)).fetchone()
            if lease is None or lease >= now[0] + deadline:  # extended since the clock last moved (or settled)
                break
            time.sleep(0.01)
        now[0] += deadline / 4


SLOW = Consumer("slow", topics.QUERY_SUBMITTED, "tests.unit.test_runtime_dispatch:slow_handler", workers=3)


def test_work_longer_than_the_ack_deadline_is_not_redelivered_while_it_runs(tmp_path, monkeypatch):
    """Issue 10: a handler that runs for twice the ack deadline; without lease extension the other two workers
    receive the same delivery meanwhile and attempts climb. The bus's clock is the test's, moved by the handler
    only once the keeper has extended the lease: on the machine's clock the lease ran out wherever the loaded
    machine kept the keeper thread off a core for a third of the deadline (0.13 s at a 0.2 s deadline, 0.27 s at
    0.4 s)."""
    import types

    from shared.adapters.local import bus as bus_module

    now = [1_800_000_000.0]
    monkeypatch.setattr(bus_module, "time", types.SimpleNamespace(time=lambda: now[0]))
    SLOW_CALLS.clear()
    bus = SqliteBus(tmp_path / "bus.db", retry=RetrySettings(
        max_attempts=5, ack_deadline_s=0.4, min_backoff_s=0.01, max_backoff_s=0.02))
    SLOW_BUS.update(bus=bus, now=now, deadline=0.4)
    deps = Deps(Settings(home=tmp_path), publisher=bus, state=InMemoryStateStore(), clock=FakeClock())
    with LocalRuntime(deps, bus, consumers=[SLOW]) as runtime:
        bus.publish(QuerySubmitted(query_id="slow1"))
        idle = runtime.wait_idle(30)
    assert SLOW_CALLS == ["slow1"] and idle
    assert bus.progress(0)[SLOW.subscription] == {"pending": 0, "acked": 1, "dead": 0}
    assert deps.state.count(state_collections.DEAD_LETTERS) == 0
    attempts = bus._db.connection().execute(
        "SELECT attempts FROM deliveries WHERE subscription = ?", (SLOW.subscription,)).fetchone()[0]
    assert attempts == 1


def test_a_delivery_exhausted_by_expired_leases_is_recorded_as_a_dead_letter(tmp_path):
    bus, deps, runtime = _system(tmp_path)
    bus.retry = RetrySettings(max_attempts=2, ack_deadline_s=0.01)
    bus.ensure_subscriptions({PROBE.subscription: PROBE.topic})
    bus.publish(QuerySubmitted(query_id="q7"))
    import time

    for _ in range(2):  # two workers that died holding it
        assert bus.pull(PROBE.subscription)
        time.sleep(0.02)
    with runtime:
        assert runtime.wait_idle(10)
    assert CALLS == []  # never handed to a handler a third time
    (letter,) = deps.state.list(state_collections.DEAD_LETTERS)
    assert letter["attempts"] == 2 and "without being acknowledged" in letter["error"]
