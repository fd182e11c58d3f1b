"""A burst of Pub/Sub pushes into a function of bounded capacity, on the Pub/Sub emulator.

Cloud Run runs a function on at most ``max_instances`` instances of ``concurrency``
requests each. A push that finds no free slot waits in Cloud Run's pending queue
(up to 10 s, or the instances' average start-up time when longer) and is then
refused with 429, which Pub/Sub counts as a NACK: one delivery attempt spent on
work that never ran ("Exceeding maximum instances",
https://cloud.google.com/run/docs/about-instance-autoscaling). Enough refusals in
a row and the message is dead-lettered without ever reaching the function.

:class:`CapacityFront` is that front: a loopback HTTP proxy with ``slots``
concurrent requests in front of a functions-framework process
(``tests/probes/pubsub_probe.py:busy``, which works ``work_s`` per message), holding a
push up to ``pending_s`` for a slot and answering 429 after that. :func:`run_burst`
publishes a burst to a push subscription with a given dead-letter policy (and retry
policy, if any), and counts what ran and what was dead-lettered.

Used by tests/integration/test_delivery_under_load.py and bench/delivery_burst.py.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from shared.tools import emulators, topology
from tests.probes.pubsub_probe import read_log

PROBE_SOURCE = Path(__file__).resolve().parent / "pubsub_probe.py"
#: Pub/Sub's largest push request (a 10 MB message, base64 in a JSON envelope): the front
#: refuses a bigger body rather than reading it.
MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True)
class Sizing:
    """What decides whether a burst is dead-lettered: the subscription's policies and the
    function's capacity (``slots`` = max instances x per-instance concurrency)."""

    name: str
    max_delivery_attempts: int
    slots: int
    pending_s: float = 0.0
    #: (minimum, maximum) retry backoff, or None for no retry policy (redeliver at once)
    backoff_s: tuple[float, float] | None = None


@dataclass
class BurstResult:
    sizing: Sizing
    messages: int
    ran: int  # distinct messages the function completed
    dead_lettered: int  # distinct messages on the dead-letter topic
    dead_lettered_unrun: int  # of those, how many the function never ran
    refused: int  # pushes answered 429 by the front
    admitted: int  # pushes passed to the function
    seconds: float  # publish of the first message -> every message ran or was dead-lettered
    finished: bool  # every message was accounted for before the deadline
    most_deliveries: int  # the most pushes any one message took (refusals + the run)
    deliveries: Counter[int] = field(default_factory=Counter, repr=False)

    def summary(self) -> dict[str, Any]:
        return {
            "sizing": self.sizing.name,
            "max_delivery_attempts": self.sizing.max_delivery_attempts,
            "backoff_s": list(self.sizing.backoff_s) if self.sizing.backoff_s else None,
            "slots": self.sizing.slots,
            "pending_s": self.sizing.pending_s,
            "messages": self.messages,
            "ran": self.ran,
            "dead_lettered": self.dead_lettered,
            "dead_lettered_unrun": self.dead_lettered_unrun,
            "refused_429": self.refused,
            "admitted": self.admitted,
            "most_deliveries_of_one_message": self.most_deliveries,
            "seconds": round(self.seconds, 1),
            "finished": self.finished,
        }


# ------------------------------------------------------------------ the front


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # The emulator drops its connection after a refused push: not worth a traceback each.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class CapacityFront:
    """A loopback proxy admitting ``slots`` requests at once to ``backend``; a request that
    finds no free slot within ``pending_s`` gets 429, as Cloud Run answers when every
    instance is busy and no more may start."""

    def __init__(self, backend: str, slots: int, pending_s: float) -> None:
        self.backend = backend
        self.pending_s = pending_s
        self._slots = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self.refused = 0
        self.admitted = 0
        self.deliveries: Counter[str] = Counter()  # per message data: pushes seen
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the front is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _count(self, body: bytes) -> None:
        try:
            key = base64.b64decode(json.loads(body)["message"]["data"]).decode()
        except (ValueError, KeyError, TypeError):
            key = "?"
        with self._lock:
            self.deliveries[key] += 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
                pass  # a thousand pushes would bury the test's output

            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self.close_connection = True
                    self._reply(413, b"push body too large")
                    return
                body = self.rfile.read(length)
                front._count(body)
                if not front._slots.acquire(timeout=front.pending_s):
                    with front._lock:
                        front.refused += 1
                    self._reply(429, b"Rate exceeded: no available instance")
                    return
                try:
                    with front._lock:
                        front.admitted += 1
                    status, answer = front._forward(self.path, body, self.headers.get("Content-Type"))
                finally:
                    front._slots.release()
                self._reply(status, answer)

        return Handler

    def _forward(self, path: str, body: bytes, content_type: str | None) -> tuple[int, bytes]:
        host_port = self.backend.removeprefix("http://")
        connection = http.client.HTTPConnection(host_port, timeout=120)
        try:
            connection.request("POST", path, body=body,
                               headers={"Content-Type": content_type or "application/json"})
            response = connection.getresponse()
            return response.status, response.read(64 * 1024)
        except OSError as exc:
            return 502, f"backend unreachable: {exc}".encode()
        finally:
            connection.close()

    def start(self) -> CapacityFront:
        server = _QuietServer((emulators.HOST, 0), self._handler())
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="capacity-front", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)


# ------------------------------------------------------------------ the burst


@contextmanager
def busy_function(workdir: Path, work_s: float, threads: int) -> Iterator[tuple[topology.StageServer, Path]]:
    """The functions-framework process the front admits to: ``threads`` gunicorn threads
    (THREADS, as Cloud Run functions' concurrency page recommends), ``work_s`` per message."""
    probe_log = workdir / f"busy-{uuid.uuid4().hex[:8]}.jsonl"
    port = emulators.free_port()
    env = {**os.environ, "PROBE_LOG": str(probe_log), "PROBE_WORK_S": str(work_s), "THREADS": str(threads)}
    server = topology.start_server("probe-busy", topology.stage_command("busy", port, source=PROBE_SOURCE),
                                   port, env, workdir / "logs")
    try:
        topology.wait_until_answering([server], 120)
        yield server, probe_log
    finally:
        emulators.stop_process_group(server.pid)
        server.popen.wait(10)


def run_burst(project: str, sizing: Sizing, *, messages: int, work_s: float, workdir: Path,
              deadline_s: float, function: tuple[topology.StageServer, Path] | None = None) -> BurstResult:
    """Publish ``messages`` at once to a push subscription sized by ``sizing`` and wait (at most
    ``deadline_s``) until each ran or was dead-lettered. Needs PUBSUB_EMULATOR_HOST set.

    ``function``: a running :func:`busy_function` to reuse (its threads must be >= slots).
    """
    from google.api_core import exceptions as gexc
    from google.cloud import pubsub_v1

    from shared.adapters.gcp.pubsub import (
        ensure_pull_subscription,
        ensure_topics,
        subscription_path,
        topic_path,
    )

    with (_maybe(function) if function else busy_function(workdir, work_s, sizing.slots)) as (server, probe_log):
        already = {line["attributes"].get("seq") for line in read_log(probe_log)}
        run_id = uuid.uuid4().hex[:8]
        topic = f"burst-{run_id}"
        dead_topic = f"{topic}-dead-letter"
        ensure_topics(project, [topic, dead_topic])
        dead = ensure_pull_subscription(project, f"{dead_topic}.keep", dead_topic)
        front = CapacityFront(server.url, sizing.slots, sizing.pending_s).start()
        subscriber = pubsub_v1.SubscriberClient()
        push_name = f"burst.{topic}"
        try:
            request: dict[str, Any] = {
                "name": subscription_path(project, push_name),
                "topic": topic_path(project, topic),
                "ack_deadline_seconds": 60,
                "push_config": {"push_endpoint": front.url + "/"},
                "dead_letter_policy": {"dead_letter_topic": topic_path(project, dead_topic),
                                       "max_delivery_attempts": sizing.max_delivery_attempts},
            }
            if sizing.backoff_s:
                request["retry_policy"] = {"minimum_backoff": timedelta(seconds=sizing.backoff_s[0]),
                                           "maximum_backoff": timedelta(seconds=sizing.backoff_s[1])}
            subscriber.create_subscription(request=request)
            publisher = pubsub_v1.PublisherClient()
            started = time.monotonic()
            futures = [publisher.publish(topic_path(project, topic), f"{run_id}/{n}".encode(), seq=f"{run_id}/{n}")
                       for n in range(messages)]
            for future in futures:
                future.result(60)
            publisher.stop()

            wanted = {f"{run_id}/{n}" for n in range(messages)}
            dead_seqs: set[str] = set()
            ran: set[str] = set()
            finished = False
            while time.monotonic() - started < deadline_s:
                ran = {line["attributes"].get("seq") for line in read_log(probe_log)} - already
                try:
                    response = subscriber.pull(request={"subscription": dead, "max_messages": 500}, timeout=2)
                except gexc.DeadlineExceeded:
                    response = None
                if response and response.received_messages:
                    dead_seqs |= {m.message.attributes.get("seq", "") for m in response.received_messages}
                    subscriber.acknowledge(request={"subscription": dead,
                                                    "ack_ids": [m.ack_id for m in response.received_messages]})
                if wanted <= ran | dead_seqs:
                    finished = True
                    break
                time.sleep(0.5)
            seconds = time.monotonic() - started
            per_message = Counter({int(k.split("/")[1]): v for k, v in front.deliveries.items()
                                   if k.startswith(f"{run_id}/")})
            return BurstResult(
                sizing=sizing, messages=messages, ran=len(ran & wanted), dead_lettered=len(dead_seqs & wanted),
                dead_lettered_unrun=len((dead_seqs - ran) & wanted), refused=front.refused,
                admitted=front.admitted, seconds=seconds, finished=finished,
                most_deliveries=max(per_message.values(), default=0), deliveries=per_message)
        finally:
            # The emulator keeps pushing whatever is left: stop it before the front goes.
            try:
                subscriber.delete_subscription(request={"subscription": subscription_path(project, push_name)})
            except gexc.GoogleAPICallError:
                pass
            subscriber.close()
            front.stop()


@contextmanager
def _maybe(value: Any) -> Iterator[Any]:
    yield value
