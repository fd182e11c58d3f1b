"""The production topology on one machine (`shared.tools.topology.up`): Pub/Sub push into
functions-framework stage servers, Firestore state, GCS blobs, all on the real emulators.

One topology (emulators + feed_poller, cleaner, indexer, grader and dead_letters
servers) is shared by the module; each test uses its own documents, feeds or topics. What the emulator does
differently from Pub/Sub in the cloud is asserted where it matters (no
``deliveryAttempt`` in the push envelope, dead-lettering after N deliveries).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.contract import state_collections, topics
from shared.contract.config import load_settings
from shared.contract.deps import Deps
from shared.contract.ids import file_document_id
from shared.contract.messages import ContextsRetrieved, DocumentIndexed, FeedPollRequested, decode
from shared.ingest.files import ingest_path
from shared.ingest.listings import add_listing
from shared.query.state import new_query_record
from shared.tools import emulators, topology
from tests.probes.pubsub_probe import read_log
from tests.support import REPO, Site, article_html, rss, serve_site, topic_paragraphs

PROJECT = "ragbus-topology-test"
PROBE_SOURCE = REPO / "tests" / "probes" / "pubsub_probe.py"
MAX_ATTEMPTS = 5


def _missing() -> str | None:
    missing = {k: v for k, v in emulators.emulators_available().items() if v}
    return "; ".join(f"{k}: {v}" for k, v in missing.items()) or None


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The ingestion stages of the topology, with the client env set in this process."""
    if _missing():
        pytest.skip(f"emulators not installed: {_missing()}")
    home = tmp_path_factory.mktemp("topology-home")
    state = topology.up(
        home, stages=("feed_poller", "cleaner", "indexer", "grader", "dead_letters"), project=PROJECT,
        max_delivery_attempts=MAX_ATTEMPTS, min_backoff_s=0.1, max_backoff_s=1.0, ack_deadline_s=60,
        allow_loopback=True, stage_env={"RAGBUS_TRACING": "0"},
    )
    with pytest.MonkeyPatch.context() as mp:
        for name, value in state["env"].items():
            mp.setenv(name, value)
        mp.setenv("RAGBUS_HOME", str(home))
        mp.setenv("RAGBUS_TRACING", "0")
        try:
            yield {**state, "home": home}
        finally:
            stopped = topology.down(home)
            assert set(stopped) == {p["name"] for p in state["processes"]}
            assert not (home / topology.STATE_FILE).exists()


@pytest.fixture(scope="module")
def client(topo: dict[str, Any]) -> Deps:
    """A client of the topology: the gcp runtime's ports, as `ragbus` commands build them."""
    from shared.runtime.bootstrap import build_gcp

    return build_gcp(load_settings(dict(os.environ)))


# ---------------------------------------------------------------- helpers


def _eventually(check: Callable[[], Any], timeout_s: float = 120.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"{what} did not hold within {timeout_s:.0f}s")


def _observer(topic: str) -> str:
    """A pull subscription on ``topic`` (messages published from now on are kept)."""
    from shared.adapters.gcp.pubsub import ensure_pull_subscription

    return ensure_pull_subscription(PROJECT, f"observe-{topic}-{uuid.uuid4().hex[:8]}", topic)


def _pull(subscription: str, want: int, timeout_s: float = 120.0, settle_s: float = 3.0) -> list[Any]:
    """Pull and ack until ``want`` messages arrived, then ``settle_s`` more to catch any extra."""
    from google.api_core import exceptions as gexc
    from google.cloud import pubsub_v1

    subscriber = pubsub_v1.SubscriberClient()
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    settle_until: float | None = None
    try:
        while time.monotonic() < deadline:
            if len(got) >= want:
                settle_until = settle_until or time.monotonic() + settle_s
                if time.monotonic() >= settle_until:
                    break
            try:
                response = subscriber.pull(request={"subscription": subscription, "max_messages": 100}, timeout=2)
            except gexc.DeadlineExceeded:
                continue
            if response.received_messages:
                got.extend(m.message for m in response.received_messages)
                subscriber.acknowledge(request={"subscription": subscription,
                                                "ack_ids": [m.ack_id for m in response.received_messages]})
            else:
                time.sleep(0.2)
    finally:
        subscriber.close()
    return got


def _decoded(messages: list[Any]) -> list[Any]:
    return [decode(m.data, dict(m.attributes)) for m in messages]


# ------------------------------------------------------------------ tests


def test_the_topology_is_recorded_and_a_second_up_is_refused(topo):
    home = topo["home"]
    names = [p["name"] for p in topo["processes"]]
    assert names == ["pubsub-emulator", "firestore-emulator", "gcs-emulator", "feed_poller", "cleaner", "indexer",
                     "grader", "dead_letters"]
    assert topology.running_env(home) == topo["env"]
    assert {"RAGBUS_RUNTIME", "GOOGLE_CLOUD_PROJECT", "RAGBUS_BUCKET", "PUBSUB_EMULATOR_HOST",
            "FIRESTORE_EMULATOR_HOST", "STORAGE_EMULATOR_HOST"} <= set(topo["env"])
    assert sorted(Path(s).name for s in topo["subscriptions"]) == sorted(
        ["feed_poller.feed-poll-requested", "cleaner.document-fetched", "indexer.document-cleaned",
         "indexer.document-deleted", "grader.contexts-retrieved"]
        + [f"dead_letters.{topics.dead_letter_topic(t)}" for t in topics.ALL_TOPICS])
    assert all(Path(p["log"]).exists() for p in topo["processes"])
    with pytest.raises(topology.TopologyError, match="already running"):
        topology.up(home, stages=("cleaner",))


def test_publish_push_handler_and_a_duplicate_changes_nothing(topo, client, tmp_path):
    indexed = _observer("document-indexed")
    page = tmp_path / "volcano.html"
    page.write_text(article_html("All about volcanoes", topic_paragraphs("volcano")))
    (fetched,) = ingest_path(page, state=client.state, blobs=client.blobs, publisher=client.publisher,
                             clock=client.clock)
    # no settling here: an extra announcement of this first delivery would come on the same subscription during
    # the pull below, which settles for both (and then finds three)
    first = _decoded(_pull(indexed, 1, settle_s=0.0))
    assert [m.document_id for m in first] == [fetched.document_id]
    document = client.state.get(state_collections.DOCUMENTS, fetched.document_id)
    assert document and document["chunk_count"] == len(first[0].chunk_ids) >= 1
    chunks_before = client.index.count_chunks()

    # the same message twice more, at once: each delivery is handled (the indexer
    # announces the document again) and neither changes the document or its chunks
    client.publisher.publish(fetched)
    client.publisher.publish(fetched)
    again = _decoded(_pull(indexed, 2))
    assert len(again) == 2
    assert all(isinstance(m, DocumentIndexed) and m.chunk_ids == first[0].chunk_ids for m in again)
    assert client.state.get(state_collections.DOCUMENTS, fetched.document_id) == document
    assert client.index.count_chunks() == chunks_before


def test_a_permanent_failure_in_a_stage_is_recorded_and_acknowledged(topo, client, tmp_path):
    empty = tmp_path / "empty.html"
    empty.write_text("<html><body><nav>menu</nav><script>x()</script></body></html>")
    (fetched,) = ingest_path(empty, state=client.state, blobs=client.blobs, publisher=client.publisher,
                             clock=client.clock)

    def letter():
        return [d for d in client.state.list(state_collections.DEAD_LETTERS) if fetched.document_id in d.get("data", "")]

    (recorded,) = _eventually(letter, what="the cleaner's dead letter")
    assert recorded["subscription"] == "cleaner.document-fetched" and "no main text" in recorded["error"]
    assert client.state.get(state_collections.DOCUMENTS, fetched.document_id) is None


def test_a_handler_that_keeps_failing_is_redelivered_then_dead_lettered(topo, tmp_path):
    """Through a probe server that always answers 500: N deliveries, then the dead-letter topic.

    The emulator honours the dead-letter policy; its push envelope carries no
    ``deliveryAttempt`` (and functions-framework's conversion of the raw
    envelope would drop it), so a stage sees attempt 1 on every delivery there.
    """
    from google.cloud import pubsub_v1

    from shared.adapters.gcp.pubsub import (
        ensure_pull_subscription,
        ensure_push_subscription,
        ensure_topics,
        topic_path,
    )

    probe_log = tmp_path / "probe.jsonl"
    port = emulators.free_port()
    env = {**os.environ, "PROBE_LOG": str(probe_log)}
    server = topology.start_server(
        "probe-failing", topology.stage_command("always_failing", port, source=PROBE_SOURCE), port, env,
        tmp_path / "logs")
    try:
        topology.wait_until_answering([server], 120)
        ensure_topics(PROJECT, ["probe-work", "probe-work-dead-letter"])
        dead = ensure_pull_subscription(PROJECT, "probe-work-dead-letter.keep", "probe-work-dead-letter")
        ensure_push_subscription(PROJECT, "probe.probe-work", "probe-work", server.url + "/",
                                 dead_letter_topic="probe-work-dead-letter", max_delivery_attempts=MAX_ATTEMPTS,
                                 ack_deadline_s=10, min_backoff_s=0.1, max_backoff_s=1.0)
        publisher = pubsub_v1.PublisherClient()
        message_id = publisher.publish(topic_path(PROJECT, "probe-work"), b"poison", reason="test").result(30)
        publisher.stop()

        (letter,) = _pull(dead, 1)
        assert letter.data == b"poison" and letter.attributes["reason"] == "test"
        assert letter.attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == str(MAX_ATTEMPTS)
        deliveries = [d for d in read_log(probe_log) if d["message_id"] == message_id]
        assert len(deliveries) == MAX_ATTEMPTS
        assert all(d["delivery_attempt"] is None and d["envelope_keys"] == ["message"] for d in deliveries)
        assert all(d["attributes"] == {"reason": "test"} for d in deliveries)
    finally:
        emulators.stop_process_group(server.pid)
        server.popen.wait(10)


def test_a_query_message_that_keeps_failing_is_recorded_and_its_query_fails(topo, client):
    """The emulator dead-letters after N deliveries (each seen as attempt 1); the dead_letters
    server, pushed to by the dead-letter topic's subscription, records it and ends the query."""
    query_id = f"q-{uuid.uuid4().hex[:10]}"
    client.state.put(state_collections.QUERIES, query_id, new_query_record(
        query_id, "what is a volcano?", top_k=5, max_iterations=1, max_model_calls=5,
        now=client.clock.now(), timeout_s=600))
    # The grader retries until the retriever has stored the iteration's contexts: never, here.
    client.publisher.publish(ContextsRetrieved(query_id=query_id, iteration=0))

    def failed():
        record = client.state.get(state_collections.QUERIES, query_id)
        return record if record and record["status"] == "failed" else None

    record = _eventually(failed, what="the query to end failed")
    assert f"after {MAX_ATTEMPTS} delivery attempts on grader.contexts-retrieved" in record["error"]
    (letter,) = [d for d in client.state.list(state_collections.DEAD_LETTERS) if query_id in d.get("data", "")]
    assert letter["subscription"] == "grader.contexts-retrieved" and letter["topic"] == "contexts-retrieved"
    assert letter["attempts"] == MAX_ATTEMPTS and letter["type"] == "ContextsRetrieved"


def test_a_push_on_the_last_allowed_attempt_ends_the_query_in_a_real_stage_server(topo, client):
    """Pub/Sub in the cloud sets deliveryAttempt (the emulator does not): posted as Pub/Sub
    would, to the grader's functions-framework process, the last attempt is recorded and acked."""
    import base64
    import urllib.error
    import urllib.request

    from shared.contract.messages import encode

    query_id = f"q-{uuid.uuid4().hex[:10]}"
    client.state.put(state_collections.QUERIES, query_id, new_query_record(
        query_id, "what is a volcano?", top_k=5, max_iterations=1, max_model_calls=5,
        now=client.clock.now(), timeout_s=600))
    data, attributes = encode(ContextsRetrieved(query_id=query_id, iteration=0))
    grader = next(p for p in topo["processes"] if p["name"] == "grader")

    def push(attempt: int) -> int:
        body = {"message": {"data": base64.b64encode(data).decode(), "attributes": attributes,
                            "messageId": f"m-{query_id}-{attempt}"},
                "subscription": f"projects/{PROJECT}/subscriptions/grader.contexts-retrieved",
                "deliveryAttempt": attempt}
        request = urllib.request.Request(f"{grader['url']}/projects/{PROJECT}/topics/contexts-retrieved",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert push(2) == 500  # attempts left: redeliver
    assert client.state.get(state_collections.QUERIES, query_id)["status"] == "pending"
    assert push(MAX_ATTEMPTS) == 200  # the last one: recorded and acknowledged
    record = client.state.get(state_collections.QUERIES, query_id)
    assert record["status"] == "failed" and "has not recorded iteration 0 yet" in record["error"]
    (letter,) = [d for d in client.state.list(state_collections.DEAD_LETTERS) if query_id in d.get("data", "")]
    assert letter["attempts"] == MAX_ATTEMPTS and f"attempt {MAX_ATTEMPTS} of {MAX_ATTEMPTS}" in letter["error"]


def test_two_polls_racing_on_one_feed_index_each_item_once(topo, client):
    """Two FeedPollRequested at once, handled concurrently by the poller's server.

    A poll that meets an item the other poll claimed but has not published yet
    sends it again (a claim left pending by a crash must not be lost), so an
    item may be fetched and cleaned twice; what must hold is that it is indexed
    once: one document per item, one set of chunks, every announcement the same.
    """
    fetched = _observer("document-fetched")
    indexed = _observer("document-indexed")
    chunks_before = client.index.count_chunks()
    topics = ["harbor", "lantern", "quartz"]
    with serve_site(Site()) as site:
        items = []
        for n, name in enumerate(topics):
            path = f"/race/{name}.html"
            site.put(path, article_html(f"Race {name}", topic_paragraphs(name, seed=n)))
            items.append({"title": f"Race {name}", "path": path, "guid": f"race-{name}"})
        site.put("/race.xml", rss(site.base, items), "application/rss+xml")
        site.delay_s = 0.2  # slow pages: the two polls overlap item by item
        feed = f"{site.base}/race.xml"
        add_listing(client.state, feed, allow_loopback=True, now=client.clock.now())
        barrier = threading.Barrier(2)

        def request_poll() -> None:
            barrier.wait()
            client.publisher.publish(FeedPollRequested(
                request_id=uuid.uuid4().hex, feed_urls=[feed], requested_at=client.clock.now()))

        threads = [threading.Thread(target=request_poll) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        sent = _decoded(_pull(fetched, len(topics), settle_s=8.0))
        announced = _decoded(_pull(indexed, len(sent), settle_s=3.0))

    guids = [m.guid for m in sent]
    assert set(guids) == {i["guid"] for i in items}
    assert all(guids.count(g) <= 2 for g in guids)  # at most once per poll
    docs = {d["document_id"]: d for d in client.state.list(state_collections.DOCUMENTS)
            if d["url"].startswith(site.base)}
    assert set(docs) == {m.document_id for m in sent}
    for document_id, doc in docs.items():
        announcements = [m for m in announced if m.document_id == document_id]
        assert announcements and all(m.chunk_ids == doc["chunk_ids"] for m in announcements)
        assert len(set(doc["chunk_ids"])) == doc["chunk_count"] >= 1
    assert client.index.count_chunks() - chunks_before == sum(d["chunk_count"] for d in docs.values())


def test_query_state_updates_from_two_clients_are_transactions(topo):
    """Two state stores (two Firestore clients, as two function instances) update one record."""
    from shared.adapters.gcp.firestore_state import FirestoreStateStore

    stores = [FirestoreStateStore(project=PROJECT) for _ in range(2)]
    key = f"q-{uuid.uuid4().hex}"
    stores[0].put(state_collections.QUERIES, key, {"id": key, "iterations": [], "model_calls": 0})
    per_client = 4

    def bump(store: FirestoreStateStore, who: int) -> None:
        for n in range(per_client):
            store.update(state_collections.QUERIES, key, lambda doc, n=n: {
                **doc, "model_calls": doc["model_calls"] + 1, "iterations": [*doc["iterations"], f"{who}/{n}"]})

    threads = [threading.Thread(target=bump, args=(store, who)) for who, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    record = stores[1].get(state_collections.QUERIES, key)
    assert record["model_calls"] == 2 * per_client
    assert sorted(record["iterations"]) == sorted(f"{w}/{n}" for w in range(2) for n in range(per_client))
    for store in stores:
        store.close()
    json.dumps(record)  # the record stays plain JSON (no Firestore types leak out)


def test_a_pdf_uploaded_to_the_bucket_is_indexed_cited_to_its_pages(topo, client, monkeypatch):
    """Issue 31: a real PDF written to the documents bucket (fake-gcs-server) and announced by the
    Cloud Storage trigger's own entry point, with the object's metadata as the bucket reports it; the
    cleaner and indexer servers, pushed by the Pub/Sub emulator, read it from the bucket and index
    chunks that know their pages."""
    from cloudevents.http import CloudEvent

    from shared.runtime import functions
    from tests.support import root_main

    indexed = _observer("document-indexed")
    manual = (REPO / "tests" / "data" / "formats" / "fontconfig-user.pdf").read_bytes()
    ref = client.blobs.put("manuals/fontconfig-user.pdf", manual, content_type="application/pdf")
    bucket, name = ref[len("gs://"):].split("/", 1)
    blob = client.blobs.client.bucket(bucket).get_blob(name)  # what Cloud Storage's event carries of it
    data = {"bucket": bucket, "name": name, "generation": str(blob.generation), "md5Hash": blob.md5_hash,
            "contentType": blob.content_type, "size": str(blob.size), "timeCreated": blob.time_created.isoformat()}
    monkeypatch.setattr(functions, "_deps", client)  # the function's deps, built from the same environment
    root_main().gcs_finalized(CloudEvent({"type": "google.cloud.storage.object.v1.finalized",
                                          "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
                                          "id": uuid.uuid4().hex}, data))

    (done,) = _decoded(_pull(indexed, 1, timeout_s=240))
    assert done.document_id == file_document_id(ref)
    chunks = client.index.get_chunks(done.chunk_ids)
    assert len(chunks) == len(done.chunk_ids) >= 5
    assert all(c.position.startswith(("p. ", "pp. ")) for c in chunks), [c.position for c in chunks]
    assert len({c.position for c in chunks}) >= 5  # the manual's pages, not one position for all
    document = client.state.get(state_collections.DOCUMENTS, done.document_id)
    assert document and document["chunk_count"] == len(chunks)
