import threading
import types

import pytest

from shared.adapters.local import bus as bus_module
from shared.adapters.local.bus import RetrySettings, SqliteBus
from shared.contract.messages import QuerySubmitted


@pytest.fixture
def clock(monkeypatch):
    """The bus's time.time, moved by the test alone: a lease of 0.05 s checked right after it was taken ran
    out wherever the loaded machine stalled the test that long between two statements."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(bus_module, "time", types.SimpleNamespace(time=lambda: now[0]))

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def _bus(tmp_path, **retry):
    return SqliteBus(
        tmp_path / "bus.db",
        {"a.query-submitted": "query-submitted", "b.query-submitted": "query-submitted"},
        RetrySettings(**{"min_backoff_s": 0.0, "max_backoff_s": 0.0, **retry}),
    )


def test_publish_fans_out_to_every_subscription(tmp_path):
    bus = _bus(tmp_path)
    bus.publish(QuerySubmitted(query_id="q1"))
    a = bus.pull("a.query-submitted")
    b = bus.pull("b.query-submitted")
    assert [d.attributes["idempotency_key"] for d in a + b] == ["q1/submitted"] * 2
    assert a[0].message_id == b[0].message_id


def test_leased_message_is_not_redelivered_until_the_deadline(tmp_path, clock):
    bus = _bus(tmp_path, ack_deadline_s=0.2)
    bus.publish(QuerySubmitted(query_id="q1"))
    first = bus.pull("a.query-submitted")
    clock(0.19)
    assert bus.pull("a.query-submitted") == []
    clock(0.06)
    again = bus.pull("a.query-submitted")
    assert again and again[0].attempt == 2 and again[0].message_id == first[0].message_id


def test_ack_removes_and_nack_redelivers_then_dead_letters(tmp_path):
    bus = _bus(tmp_path, max_attempts=3)
    bus.publish(QuerySubmitted(query_id="q1"))
    bus.publish(QuerySubmitted(query_id="q2"))
    d1, d2 = bus.pull("a.query-submitted", 2)
    bus.ack(d1)
    for attempt in (1, 2, 3):
        assert d2.attempt == attempt
        dead = bus.nack(d2, f"boom {attempt}")
        if attempt < 3:
            assert not dead
            (d2,) = bus.pull("a.query-submitted")
    assert dead
    assert bus.pull("a.query-submitted") == []
    (letter,) = bus.dead_letters()
    assert letter["error"] == "boom 3" and letter["attempts"] == 3
    assert bus.dead_letter_count() == 1
    assert bus.outstanding(["a.query-submitted"]) == 0
    assert bus.outstanding(["b.query-submitted"]) == 2


def test_permanent_nack_dead_letters_at_once(tmp_path):
    bus = _bus(tmp_path)
    bus.publish(QuerySubmitted(query_id="q1"))
    (d,) = bus.pull("a.query-submitted")
    assert bus.nack(d, "SchemaError: bad", permanent=True)
    assert bus.dead_letters()[0]["error"] == "SchemaError: bad"


def test_backoff_grows_exponentially_and_is_capped():
    r = RetrySettings(min_backoff_s=0.5, max_backoff_s=3.0)
    assert [r.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_state_survives_a_new_bus_object_on_the_same_file(tmp_path):
    bus = _bus(tmp_path)
    bus.publish(QuerySubmitted(query_id="q1"))
    bus.close()
    reopened = _bus(tmp_path)
    (d,) = reopened.pull("a.query-submitted")
    assert d.attributes["type"] == "QuerySubmitted"


def test_concurrent_pullers_never_get_the_same_delivery(tmp_path):
    bus = _bus(tmp_path)
    for n in range(60):
        bus.publish(QuerySubmitted(query_id=f"q{n}"))
    seen, lock = [], threading.Lock()

    def worker():
        while True:
            got = bus.pull("a.query-submitted", 3)
            if not got:
                return
            with lock:
                seen.extend(d.id for d in got)
            for d in got:
                bus.ack(d)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 60 and len(set(seen)) == 60


def test_subscription_created_later_sees_only_later_messages(tmp_path):
    bus = _bus(tmp_path)
    bus.publish(QuerySubmitted(query_id="early"))
    bus.ensure_subscriptions({"c.query-submitted": "query-submitted"})
    bus.publish(QuerySubmitted(query_id="late"))
    got = bus.pull("c.query-submitted", 5)
    assert [d.attributes["idempotency_key"] for d in got] == ["late/submitted"]


def test_leases_of_a_dead_process_are_reclaimed_at_once(tmp_path):
    import subprocess
    import sys

    bus = _bus(tmp_path, ack_deadline_s=3600)
    bus.publish(QuerySubmitted(query_id="q1"))
    # another process leases the delivery and dies without acking
    code = (
        "from shared.adapters.local.bus import SqliteBus;"
        f"b = SqliteBus({str(tmp_path / 'bus.db')!r});"
        "assert len(b.pull('a.query-submitted')) == 1"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert bus.pull("a.query-submitted") == []  # still leased by the dead process
    assert bus.reclaim_orphaned_leases() == 1
    (d,) = bus.pull("a.query-submitted")
    assert d.attempt == 2
    assert bus.reclaim_orphaned_leases() == 0  # our own live lease is kept


def test_a_delivery_whose_lease_ran_out_max_attempts_times_is_dead_lettered_not_redelivered(tmp_path):
    import time

    bus = _bus(tmp_path, ack_deadline_s=0.05, max_attempts=3)
    bus.publish(QuerySubmitted(query_id="q1"))
    attempts = []
    for _ in range(3):  # each time the worker "dies": the lease runs out unsettled
        (d,) = bus.pull("a.query-submitted")
        attempts.append(d.attempt)
        time.sleep(0.06)
    (spent,) = bus.pull("a.query-submitted")
    assert attempts == [1, 2, 3]
    assert spent.exhausted and spent.attempt == 3
    assert bus.pull("a.query-submitted") == []
    (letter,) = bus.dead_letters()
    assert letter["attempts"] == 3 and "without being acknowledged" in letter["error"]


def test_extending_a_lease_keeps_the_delivery_from_other_pullers(tmp_path, clock):
    bus = _bus(tmp_path, ack_deadline_s=0.1)
    bus.publish(QuerySubmitted(query_id="q1"))
    (d,) = bus.pull("a.query-submitted")
    for _ in range(5):
        clock(0.09)
        assert bus.extend_leases([d]) == []
        assert bus.pull("a.query-submitted") == []
    bus.ack(d)
    assert bus.extend_leases([d]) == [d]  # settled: nothing left to extend


def test_a_stale_nack_does_not_touch_the_later_delivery(tmp_path, clock):
    bus = _bus(tmp_path, ack_deadline_s=0.05, max_attempts=2)
    bus.publish(QuerySubmitted(query_id="q1"))
    (first,) = bus.pull("a.query-submitted")
    clock(0.06)
    (second,) = bus.pull("a.query-submitted")
    assert bus.nack(first, "late failure of the first worker") is False
    assert bus.pull("a.query-submitted") == []  # the second lease still holds
    assert bus.dead_letter_count() == 0
    bus.ack(second)
    assert bus.outstanding(["a.query-submitted"]) == 0


def test_a_waiter_wakes_for_its_own_topic_only(tmp_path):
    """Each publish used to wake every idle worker of every stage, which then all took the
    database's write lock to pull nothing; a worker now waits on its own topic."""
    from shared.contract.messages import QueryTransformed

    bus = _bus(tmp_path)
    seen = bus.publish_count("query-transformed")
    woke = threading.Event()

    def wait():
        bus.wait_for_messages(30.0, seen, "query-transformed")
        woke.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    bus.publish(QuerySubmitted(query_id="q1"))  # another topic: the waiter sleeps on
    assert not woke.wait(0.3)
    assert bus.publish_count("query-submitted") == 1 and bus.publish_count() == 1
    bus.publish(QueryTransformed(query_id="q1", iteration=0))
    assert woke.wait(10.0)
    waiter.join(10.0)


def test_a_publish_between_the_count_and_the_wait_is_not_missed_and_stopping_wakes_everyone(tmp_path):
    bus = _bus(tmp_path)
    seen = bus.publish_count("query-submitted")
    bus.publish(QuerySubmitted(query_id="q1"))
    bus.wait_for_messages(30.0, seen, "query-submitted")  # returns at once: the publish came first

    woke = threading.Event()
    waiter = threading.Thread(
        target=lambda: (bus.wait_for_messages(30.0, bus.publish_count("query-submitted"), "query-submitted"),
                        woke.set()), daemon=True)
    waiter.start()
    assert not woke.wait(0.2)
    bus.wake_waiters()
    assert woke.wait(10.0)


def test_an_empty_pull_reads_without_taking_the_write_lock(tmp_path):
    bus = _bus(tmp_path)
    statements: list[str] = []
    bus._db.connection().set_trace_callback(statements.append)
    assert bus.pull("a.query-submitted") == []
    assert statements and not any("BEGIN" in s for s in statements)
    bus.publish(QuerySubmitted(query_id="q1"))
    statements.clear()
    (delivery,) = bus.pull("a.query-submitted")
    assert any(s.startswith("BEGIN IMMEDIATE") for s in statements)  # a lease is a write
    statements.clear()
    assert bus.pull("a.query-submitted") == []  # leased: nothing ready, and no write lock taken
    assert not any("BEGIN" in s for s in statements)
    assert delivery.attributes["idempotency_key"] == "q1/submitted"


def test_a_publish_notifies_only_the_waiters_of_its_topic_and_of_any_topic(tmp_path):
    from shared.contract.messages import QueryTransformed

    bus = _bus(tmp_path)
    notified: list[tuple] = []
    waiters = (("query-transformed", "a.query-transformed"), ("query-transformed", None),
               ("query-submitted", "a.query-submitted"), (None, None))
    for topic, subscription in waiters:
        bus.wait_for_messages(0.0, bus.publish_count(topic), topic, subscription)  # registers the condition
        condition = bus._waiting[topic][subscription]
        condition.notify = lambda n=1, key=(topic, subscription): notified.append((*key, "one"))
        condition.notify_all = lambda key=(topic, subscription): notified.append((*key, "all"))
    bus.publish(QueryTransformed(query_id="q1", iteration=0))
    # one worker of the subscription leases it; waiters naming no subscription (or topic) all wake
    assert sorted(notified, key=str) == sorted([("query-transformed", "a.query-transformed", "one"),
                                                ("query-transformed", None, "all"), (None, None, "all")], key=str)
    notified.clear()
    bus.wake_waiters()  # a stopping runtime wakes everyone
    assert sorted(notified, key=str) == sorted([(*w, "all") for w in waiters], key=str)


def test_one_publish_wakes_one_worker_of_each_subscription(tmp_path):
    bus = SqliteBus(tmp_path / "bus.db", {"a.query-submitted": "query-submitted",
                                          "b.query-submitted": "query-submitted"})
    woke: list[str] = []
    ready = threading.Barrier(5)

    def worker(subscription: str) -> None:
        seen = bus.publish_count("query-submitted")
        ready.wait()
        bus.wait_for_messages(30.0, seen, "query-submitted", subscription)
        woke.append(subscription)

    threads = [threading.Thread(target=worker, args=(s,), daemon=True)
               for s in ("a.query-submitted", "a.query-submitted", "b.query-submitted", "b.query-submitted")]
    for t in threads:
        t.start()
    ready.wait()
    while sum(len(c._waiters) for c in bus._waiting.get("query-submitted", {}).values()) < 4:
        threading.Event().wait(0.01)  # every worker asleep on its condition
    bus.publish(QuerySubmitted(query_id="q1"))
    while len(woke) < 2:
        threading.Event().wait(0.01)
    assert sorted(woke) == ["a.query-submitted", "b.query-submitted"]
    bus.wake_waiters()
    for t in threads:
        t.join(10.0)
    assert sorted(woke) == ["a.query-submitted"] * 2 + ["b.query-submitted"] * 2


def test_progress_about_given_subjects_counts_only_their_messages(tmp_path):
    # two commands share the bus: each counts its own work (issue 35, problem 17: an ingest's
    # progress counted another command's failures)
    bus = _bus(tmp_path)
    bus.publish(QuerySubmitted(query_id="mine"))
    bus.publish(QuerySubmitted(query_id="theirs"))
    bus.publish(QuerySubmitted(query_id="theirs-too"))
    for delivery in bus.pull("a.query-submitted", 3):
        if delivery.attributes["idempotency_key"].startswith("mine/"):
            bus.ack(delivery)
        else:
            bus.nack(delivery, "boom", permanent=True)
    assert bus.progress(0, {"mine"})["a.query-submitted"] == {"pending": 0, "acked": 1, "dead": 0}
    assert bus.progress(0, {"mine"})["b.query-submitted"] == {"pending": 1, "acked": 0, "dead": 0}
    assert bus.progress(0)["a.query-submitted"] == {"pending": 0, "acked": 1, "dead": 2}
    assert bus.progress(0, set()) == {}
