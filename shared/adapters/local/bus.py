"""A durable local message bus with Pub/Sub semantics, persisted in SQLite.

- Each topic fans out to every subscription attached to it.
- Delivery is at-least-once: a pulled message is leased for the ack deadline;
  unacknowledged when the lease ends (the process died, the handler hung), it
  is delivered again.
- While a handler runs, the runtime extends the lease (:meth:`SqliteBus.extend_leases`,
  the equivalent of the ``modifyAckDeadline`` calls Pub/Sub's client makes for
  streaming pull), so slow work is not handed to a second worker meanwhile.
- A nack schedules redelivery with exponential backoff; after
  ``max_attempts`` deliveries, or at once for a permanent error, the message
  moves to the dead-letter store with the error that killed it. A delivery
  whose lease ran out ``max_attempts`` times (its process died each time) is
  dead-lettered when it would be delivered once more, as Pub/Sub counts an
  expired ack deadline as a failed attempt. A process that stops on purpose while
  a handler still runs hands its delivery back uncounted (:meth:`SqliteBus.release`):
  short commands come and go, and ending one is not the message's failure.

Publishing writes the message and one delivery row per subscription in one
transaction, so a crash never leaves a message half-published.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from shared.adapters.local.processes import process_alive
from shared.adapters.local.sqlite import SqliteDatabase
from shared.contract.config import Settings
from shared.contract.messages import Message, encode

_SCHEMA = """
CREATE TABLE IF NOT EXISTS subscriptions (
  name TEXT PRIMARY KEY,
  topic TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
  id TEXT PRIMARY KEY,
  topic TEXT NOT NULL,
  data BLOB NOT NULL,
  attributes TEXT NOT NULL,
  published_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS deliveries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  subscription TEXT NOT NULL,
  message_id TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  available_at REAL NOT NULL,
  lease_until REAL,
  state TEXT NOT NULL DEFAULT 'pending',
  last_error TEXT,
  lease_owner TEXT,
  UNIQUE(subscription, message_id)
);
CREATE INDEX IF NOT EXISTS deliveries_ready ON deliveries(subscription, state, available_at);
"""


_OWNER = f"{socket.gethostname()}:{os.getpid()}"


class RetrySettings(NamedTuple):
    """How redelivery behaves (Pub/Sub's RetryPolicy and DeadLetterPolicy)."""

    max_attempts: int = 5
    ack_deadline_s: float = 60.0
    min_backoff_s: float = 0.5
    max_backoff_s: float = 60.0

    def backoff(self, attempts: int) -> float:
        return min(self.max_backoff_s, self.min_backoff_s * (2 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class Delivery:
    """One delivery of one message to one subscription."""

    id: int
    subscription: str
    message_id: str
    topic: str
    data: bytes
    attributes: dict[str, str]
    attempt: int  # 1 for the first delivery
    # set when the delivery was dead-lettered at pull time: it had been delivered
    # max_attempts times and never settled; the caller records it, never handles it
    exhausted: bool = False


class SqliteBus:
    """Publisher port + pull/ack/nack for the embedded runtime's dispatcher."""

    def __init__(
        self,
        path: Path | str,
        subscriptions: Mapping[str, str] | None = None,
        retry: RetrySettings | None = None,
    ) -> None:
        self._db = SqliteDatabase(path, _SCHEMA)
        self.retry = retry or RetrySettings()
        # One lock, one condition per (topic, subscription) waited on: a publish wakes one idle
        # worker of each subscription of its topic and nobody else. With one condition for
        # all, each publish woke every idle worker of every stage (17 threads): 15 went back
        # to sleep and the second worker of the subscription raced the first for the lease,
        # all queueing for the GIL and the write lock the next stage's worker needed.
        # Waiters without a subscription (or a topic) are all woken, as before.
        self._wakeup = threading.Lock()
        self._waiting: dict[str | None, dict[str | None, threading.Condition]] = {}
        self._published = 0  # publishes seen in this process, so a waiter cannot miss one
        self._published_to: Counter[str] = Counter()  # the same, per topic
        self._wakes = 0  # wake_waiters calls (a stopping runtime)
        if subscriptions:
            self.ensure_subscriptions(subscriptions)

    @classmethod
    def from_settings(cls, settings: Settings, subscriptions: Mapping[str, str]) -> SqliteBus:
        """The bus under ``settings.home`` with its redelivery settings (``RAGBUS_MAX_DELIVERY_ATTEMPTS``,
        ``RAGBUS_ACK_DEADLINE_S``, ``RAGBUS_RETRY_*_BACKOFF_S``), ``subscriptions`` created."""
        return cls(settings.bus_path, subscriptions, RetrySettings(
            max_attempts=settings.max_delivery_attempts, ack_deadline_s=settings.ack_deadline_s,
            min_backoff_s=settings.retry_min_backoff_s, max_backoff_s=settings.retry_max_backoff_s))

    # ------------------------------------------------------------ set-up

    def ensure_subscriptions(self, subscriptions: Mapping[str, str]) -> None:
        """Create ``{subscription: topic}`` (a subscription sees messages published after it exists)."""
        with self._db.transaction() as conn:
            conn.executemany(
                "INSERT INTO subscriptions(name, topic) VALUES(?, ?) "
                "ON CONFLICT(name) DO UPDATE SET topic=excluded.topic",
                list(subscriptions.items()),
            )

    # ----------------------------------------------------------- publish

    def publish(self, message: Message, attributes: Mapping[str, str] | None = None) -> str:
        data, attrs = encode(message)
        attrs.update(attributes or {})
        return self.publish_raw(type(message).TOPIC, data, attrs)

    def publish_raw(self, topic: str, data: bytes, attributes: Mapping[str, str]) -> str:
        """Publish bytes as they are (used for replay and to test poison messages)."""
        message_id = uuid.uuid4().hex
        now = time.time()
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO messages(id, topic, data, attributes, published_at) VALUES(?,?,?,?,?)",
                (message_id, topic, data, json.dumps(dict(attributes)), now),
            )
            conn.execute(
                "INSERT INTO deliveries(subscription, message_id, available_at) "
                "SELECT name, ?, ? FROM subscriptions WHERE topic = ?",
                (message_id, now, topic),
            )
        with self._wakeup:
            self._published += 1
            self._published_to[topic] += 1
            for subscription, waiting in self._waiting.get(topic, {}).items():
                if subscription is None:
                    waiting.notify_all()
                else:
                    waiting.notify()  # one worker leases the message; the others would find nothing
            for waiting in self._waiting.get(None, {}).values():
                waiting.notify_all()
        return message_id

    # -------------------------------------------------------- pull / ack

    def pull(self, subscription: str, max_messages: int = 1) -> list[Delivery]:
        """Lease up to ``max_messages`` ready deliveries for the ack deadline."""
        now = time.time()
        # Most pulls find nothing (idle workers look every 50 ms): a read, which in WAL mode
        # neither waits for nor holds up a writer, settles those without the write lock that
        # a query's publishes and record updates are queueing for. The transaction below
        # looks again, so two workers seeing the same delivery still lease it once.
        ready = self._db.connection().execute(
            "SELECT 1 FROM deliveries WHERE subscription = ? AND state = 'pending' AND available_at <= ? "
            "AND (lease_until IS NULL OR lease_until <= ?) LIMIT 1",
            (subscription, now, now),
        ).fetchone()
        if ready is None:
            return []
        with self._db.transaction() as conn:
            rows = conn.execute(
                "SELECT d.id, d.message_id, d.attempts, m.topic, m.data, m.attributes "
                "FROM deliveries d JOIN messages m ON m.id = d.message_id "
                "WHERE d.subscription = ? AND d.state = 'pending' AND d.available_at <= ? "
                "AND (d.lease_until IS NULL OR d.lease_until <= ?) "
                "ORDER BY d.available_at, d.id LIMIT ?",
                (subscription, now, now, max_messages),
            ).fetchall()
            if not rows:
                return []
            lease = now + self.retry.ack_deadline_s
            live = [row for row in rows if row["attempts"] < self.retry.max_attempts]
            spent = [row for row in rows if row["attempts"] >= self.retry.max_attempts]
            conn.executemany(
                "UPDATE deliveries SET attempts = attempts + 1, lease_until = ?, lease_owner = ? "
                "WHERE id = ?",
                [(lease, _OWNER, row["id"]) for row in live],
            )
            conn.executemany(
                "UPDATE deliveries SET state = 'dead', lease_until = NULL, "
                "last_error = ? || COALESCE(' (last error: ' || last_error || ')', '') WHERE id = ?",
                [(self.exhausted_reason(row["attempts"]), row["id"]) for row in spent],
            )
        spent_ids = {row["id"] for row in spent}
        return [
            Delivery(
                id=row["id"],
                subscription=subscription,
                message_id=row["message_id"],
                topic=row["topic"],
                data=bytes(row["data"]),
                attributes=json.loads(row["attributes"]),
                attempt=row["attempts"] if row["id"] in spent_ids else row["attempts"] + 1,
                exhausted=row["id"] in spent_ids,
            )
            for row in rows
        ]

    def exhausted_reason(self, attempts: int) -> str:
        return (
            f"delivered {attempts} time(s) (the limit is {self.retry.max_attempts}) without being "
            "acknowledged: the handler's process died or the lease ran out each time"
        )

    def extend_leases(self, deliveries: list[Delivery]) -> list[Delivery]:
        """Push the lease of these in-flight deliveries one ack deadline further.

        Returns the deliveries whose lease was no longer this delivery's (settled
        meanwhile, or redelivered after the lease ran out), which are left alone."""
        if not deliveries:
            return []
        lease = time.time() + self.retry.ack_deadline_s
        lost = []
        with self._db.transaction() as conn:
            for delivery in deliveries:
                cur = conn.execute(
                    "UPDATE deliveries SET lease_until = ? WHERE id = ? AND state = 'pending' "
                    "AND attempts = ? AND lease_owner = ?",
                    (lease, delivery.id, delivery.attempt, _OWNER),
                )
                if cur.rowcount == 0:
                    lost.append(delivery)
        return lost

    def ack(self, delivery: Delivery) -> None:
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE deliveries SET state = 'acked', lease_until = NULL WHERE id = ?",
                (delivery.id,),
            )

    def nack(self, delivery: Delivery, error: str, *, permanent: bool = False) -> bool:
        """Redeliver later with backoff, or dead-letter; return True when dead-lettered."""
        dead = permanent or delivery.attempt >= self.retry.max_attempts
        with self._db.transaction() as conn:
            current = conn.execute(
                "SELECT attempts, state FROM deliveries WHERE id = ?", (delivery.id,)
            ).fetchone()
            if current is None or current["state"] != "pending" or current["attempts"] != delivery.attempt:
                # a later delivery of the same message (this one's lease ran out) owns it now:
                # resetting its lease or dead-lettering under it would be wrong
                return False
            if dead:
                conn.execute(
                    "UPDATE deliveries SET state = 'dead', lease_until = NULL, last_error = ? "
                    "WHERE id = ?",
                    (error, delivery.id),
                )
            else:
                conn.execute(
                    "UPDATE deliveries SET lease_until = NULL, available_at = ?, last_error = ? "
                    "WHERE id = ?",
                    (time.time() + self.retry.backoff(delivery.attempt), error, delivery.id),
                )
        return dead

    def release(self, deliveries: list[Delivery]) -> int:
        """Hand these in-flight deliveries back, the attempt uncounted: this process stops on purpose
        before their handlers finished (a command ending while a worker indexes a large file another
        run left behind). Counted, five short commands in a row would dead-letter a good document as
        if its handler had died five times. Returns how many were still this process's to hand back."""
        if not deliveries:
            return 0
        released = 0
        with self._db.transaction() as conn:
            for delivery in deliveries:
                released += conn.execute(
                    "UPDATE deliveries SET attempts = attempts - 1, lease_until = NULL, lease_owner = NULL "
                    "WHERE id = ? AND state = 'pending' AND attempts = ? AND lease_owner = ?",
                    (delivery.id, delivery.attempt, _OWNER),
                ).rowcount
        return released

    def reclaim_orphaned_leases(self) -> int:
        """Release leases held by processes of this host that no longer exist.

        A killed process cannot ack; rather than wait out the ack deadline, a
        restarted runtime makes those deliveries available again at once.
        """
        host = socket.gethostname()
        conn = self._db.connection()
        owners = [r[0] for r in conn.execute(
            "SELECT DISTINCT lease_owner FROM deliveries WHERE state = 'pending' "
            "AND lease_until IS NOT NULL AND lease_owner LIKE ?", (host + ":%",)).fetchall()]
        dead = [o for o in owners if not process_alive(int(o.rsplit(":", 1)[1]))]
        if not dead:
            return 0
        marks = ",".join("?" * len(dead))
        with self._db.transaction() as conn:
            cur = conn.execute(
                f"UPDATE deliveries SET lease_until = NULL, lease_owner = NULL "
                f"WHERE state = 'pending' AND lease_owner IN ({marks})", dead)
            return cur.rowcount

    # ------------------------------------------------------------ inspect

    def publish_count(self, topic: str | None = None) -> int:
        """How many messages this process has published, to ``topic`` or to any topic (pair with
        :meth:`wait_for_messages`)."""
        with self._wakeup:
            return self._published if topic is None else self._published_to[topic]

    def wait_for_messages(
        self, timeout: float, seen: int | None = None, topic: str | None = None, subscription: str | None = None,
    ) -> None:
        """Block until something is published in this process (to ``topic``, when given), or
        ``timeout`` passes, or :meth:`wake_waiters` is called.

        With ``seen`` (a :meth:`publish_count` of the same ``topic`` taken before the last
        empty pull), return at once if a publish happened since, so a wake-up is never lost.
        With ``topic``, a publish to another topic does not end the wait: a worker wakes for
        its own topic only, instead of every idle worker of every stage taking the database's
        write lock to pull nothing after each publish. With ``subscription`` too (the topic's
        subscription the caller pulls), a publish wakes one of that subscription's waiters,
        not all: one delivery is leased by one worker. Publishes by other processes, and
        deliveries whose retry backoff ends, are noticed by the caller's next pull.
        """
        def count() -> int:
            return self._published if topic is None else self._published_to[topic]

        with self._wakeup:
            baseline = count() if seen is None else seen
            wakes = self._wakes
            by_subscription = self._waiting.setdefault(topic, {})
            key = subscription if topic is not None else None
            waiting = by_subscription.get(key)
            if waiting is None:
                waiting = by_subscription[key] = threading.Condition(self._wakeup)
            # Whoever a publish wakes has a baseline below the new count (both change under
            # this lock), so a waiter woken alone never goes back to sleep on it.
            waiting.wait_for(lambda: count() != baseline or self._wakes != wakes, timeout)

    def wake_waiters(self) -> None:
        """Wake every thread blocked in :meth:`wait_for_messages` (a stopping runtime's workers)."""
        with self._wakeup:
            self._wakes += 1
            for by_subscription in self._waiting.values():
                for waiting in by_subscription.values():
                    waiting.notify_all()

    def outstanding(self, subscriptions: list[str] | None = None) -> int:
        """Deliveries not yet acknowledged nor dead (pending, leased or backing off)."""
        conn = self._db.connection()
        if subscriptions:
            marks = ",".join("?" * len(subscriptions))
            row = conn.execute(
                f"SELECT COUNT(*) FROM deliveries WHERE state = 'pending' AND subscription IN ({marks})",
                subscriptions,
            ).fetchone()
        else:
            row = conn.execute("SELECT COUNT(*) FROM deliveries WHERE state = 'pending'").fetchone()
        return int(row[0])

    def oldest_outstanding(self, subscriptions: list[str]) -> float | None:
        """When the oldest message still outstanding for ``subscriptions`` was published (None: none is)."""
        if not subscriptions:
            return None
        marks = ",".join("?" * len(subscriptions))
        row = self._db.connection().execute(
            f"SELECT MIN(m.published_at) FROM deliveries d JOIN messages m ON m.id = d.message_id "
            f"WHERE d.state = 'pending' AND d.subscription IN ({marks})", subscriptions).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def progress(self, since: float, subjects: Collection[str] | None = None) -> dict[str, dict[str, int]]:
        """Per subscription, deliveries of messages published since ``since`` by state; with
        ``subjects``, only of messages about them (a document or query id: what a message's
        idempotency key starts with), so a command counts its own work, not another's beside it."""
        conn = self._db.connection()
        out: dict[str, dict[str, int]] = {}
        if subjects is None:
            rows = conn.execute(
                "SELECT d.subscription, d.state, COUNT(*) FROM deliveries d "
                "JOIN messages m ON m.id = d.message_id WHERE m.published_at >= ? "
                "GROUP BY d.subscription, d.state",
                (since,),
            ).fetchall()
        else:
            wanted = set(subjects)
            keyed = conn.execute(
                "SELECT d.subscription, d.state, json_extract(m.attributes, '$.idempotency_key') FROM deliveries d "
                "JOIN messages m ON m.id = d.message_id WHERE m.published_at >= ?",
                (since,),
            ).fetchall()
            counted: Counter = Counter((sub, state) for sub, state, key in keyed
                                       if str(key or "").partition("/")[0] in wanted)
            rows = [(sub, state, count) for (sub, state), count in counted.items()]
        for subscription, state, count in rows:
            out.setdefault(subscription, {"pending": 0, "acked": 0, "dead": 0})[state] = int(count)
        return out

    def dead_letters(self, limit: int = 100) -> list[dict]:
        conn = self._db.connection()
        rows = conn.execute(
            "SELECT d.subscription, d.message_id, d.attempts, d.last_error, m.topic, m.attributes, "
            "m.data, m.published_at FROM deliveries d JOIN messages m ON m.id = d.message_id "
            "WHERE d.state = 'dead' ORDER BY d.id DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [
            {
                "subscription": r["subscription"],
                "message_id": r["message_id"],
                "topic": r["topic"],
                "attempts": r["attempts"],
                "error": r["last_error"],
                "attributes": json.loads(r["attributes"]),
                "data": bytes(r["data"]).decode("utf-8", "replace")[:2000],
                "published_at": r["published_at"],
            }
            for r in rows
        ]

    def dead_letter_count(self) -> int:
        row = self._db.connection().execute(
            "SELECT COUNT(*) FROM deliveries WHERE state = 'dead'"
        ).fetchone()
        return int(row[0])

    def pending_data(self) -> list[str]:
        """The data of every message some subscription has still to handle (as text)."""
        rows = self._db.connection().execute(
            "SELECT data FROM messages WHERE id IN (SELECT message_id FROM deliveries WHERE state = 'pending')"
        ).fetchall()
        return [bytes(row[0]).decode("utf-8", "replace") for row in rows]

    def purge_acknowledged(self, older_than_s: float = 3600.0) -> int:
        """Drop acknowledged deliveries (and orphaned messages) older than ``older_than_s``."""
        cutoff = time.time() - older_than_s
        with self._db.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM deliveries WHERE state = 'acked' AND message_id IN "
                "(SELECT id FROM messages WHERE published_at < ?)",
                (cutoff,),
            )
            conn.execute(
                "DELETE FROM messages WHERE published_at < ? AND id NOT IN "
                "(SELECT message_id FROM deliveries)",
                (cutoff,),
            )
            return cur.rowcount

    def close(self) -> None:
        self._db.close()
