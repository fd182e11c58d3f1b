"""The production topology as a user drives it: `ragbus up --emulators`, the same
commands as on the embedded runtime, questions through the gateway over HTTP, `ragbus down`.

The assertions are those of the embedded runtime's e2e tests (test_ingestion_e2e,
test_query_e2e); only the runtime differs: Pub/Sub push into one
functions-framework process per stage, Firestore, GCS, all on the emulators.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.request
from pathlib import Path

import pytest

from shared.contract import state_collections
from shared.tools import emulators, topology
from shared.tools.demo import CORPUS, QUESTIONS, serve_corpus
from tests.support import (
    Site,
    article_html,
    cli_json,
    publish_feed,
    put_topic_articles,
    run_cli,
    serve_site,
    topic_paragraphs,
)

TOPICS = ["volcano", "saxophone", "glacier", "satellite"]
ANSWERED_AT_ONCE, _REFINED, UNANSWERABLE = QUESTIONS

pytestmark = pytest.mark.skipif(
    any(emulators.emulators_available().values()),
    reason=f"emulators not installed: {emulators.emulators_available()}",
)


def _documents(state, base: str) -> dict[str, dict]:
    return {d["url"].rsplit("/", 1)[-1]: d for d in state.list(state_collections.DOCUMENTS) if d["url"].startswith(base)}


def _post(url: str, body: dict, timeout: float = 120) -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}/v1/queries", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, json.loads(response.read())


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.timeout(900)  # the whole topology: 273 s on a shared machine at load 24, 554 s at load 30
def test_up_ingest_ask_over_http_down(tmp_path, monkeypatch):
    home = tmp_path / "home"
    long_ago = _spans_earlier_topologies_left(home)
    refused = run_cli(home, "up", check=False)
    assert refused.returncode == 2 and "--emulators" in refused.stderr and "infra/" in refused.stderr

    started = run_cli(home, "up", "--emulators", timeout=400)
    assert not long_ago.exists()  # past RAGBUS_TRACE_RETENTION_DAYS: `up` deleted it
    state = topology.read_state(home)
    pids = [int(p["pid"]) for p in state["processes"]]
    try:
        printed = " ".join(started.stdout.split())
        assert state["gateway_url"] in printed and "ragbus down" in printed
        assert len(state["processes"]) == 3 + len(topology.ALL_STAGES)
        again = run_cli(home, "up", "--emulators", check=False)
        assert again.returncode == 2 and "already running" in again.stderr
        # a newcomer's commands on the home alone (no variable exported) find the topology: its storage named
        stats = run_cli(home, "stats", COLUMNS="200")
        assert "the emulators of `ragbus up --emulators`" in stats.stderr and "documents: 0" in stats.stdout
        run_cli(home, "ask", "what is bm25", check=False, timeout=300)

        # read Firestore as the stages write it (the client env the commands use)
        for name, value in state["env"].items():
            monkeypatch.setenv(name, value)
        from shared.adapters.gcp.firestore_state import FirestoreStateStore

        store = FirestoreStateStore(project=state["project"])
        _ingestion(home, store)
        asked = _questions(home, state["gateway_url"])
        store.close()
        _traces_on_the_topology(home, asked)
    finally:
        stopped = run_cli(home, "down")
    assert "stopped" in stopped.stdout and "stopped gateway" in stopped.stdout
    assert not any(_alive(pid) for pid in pids)
    assert topology.read_state(home) is None
    assert "nothing was running" in run_cli(home, "down").stdout
    # the commands above ran with the client env exported but RAGBUS_HOME at `home`: their spans went with
    # the topology's, so the embedded runtime's traces hold no query whose record went with the emulators
    monkeypatch.undo()
    assert cli_json(home, "traces") == []
    # the earlier topology's spans are kept aside, not lost
    (kept,) = topology.data_home(home).glob("traces-until-*.db")
    with sqlite3.connect(kept) as db:
        assert db.execute("SELECT query_id FROM spans").fetchall() == [("earlierquery0001",)]


def _spans_earlier_topologies_left(home: Path) -> Path:
    """Write the span store an earlier topology left under ``home`` (its records went with its Firestore
    emulator); return one a topology of long ago left aside, past RAGBUS_TRACE_RETENTION_DAYS."""
    from shared.adapters.local.spans import SqliteSpanStore

    earlier = topology.data_home(home) / "traces.db"
    SqliteSpanStore(earlier).shutdown()
    with sqlite3.connect(earlier) as db:
        db.execute("INSERT INTO spans VALUES (?, ?, NULL, 'gateway submit', 'INTERNAL', ?, ?, 'UNSET', NULL, "
                   "'{}', '[]', 'earlierquery0001')", ("e" * 32, "f" * 16, time.time_ns() - 10**9, time.time_ns()))
    long_ago = earlier.with_name("traces-until-20200101T000000Z.db")
    SqliteSpanStore(long_ago).shutdown()
    return long_ago


def _traces_on_the_topology(home: Path, asked: dict) -> None:
    """The commands on the home alone and those with the client env exported (RAGBUS_HOME left at the home)
    list their queries from the topology's one span store; a trace holds the client's spans too."""
    spans = json.loads(run_cli(home, "trace", asked["id"], "--json").stdout)
    assert "gateway submit" in {s["name"] for s in spans}  # the whole trace: the client's spans too
    with pytest.MonkeyPatch.context() as bare:  # no variable exported: the home alone
        for name in topology.read_state(home)["env"]:
            bare.delenv(name, raising=False)
        listed = json.loads(run_cli(home, "traces", "--json", "--limit", "100").stdout)
        assert {"what is bm25", ANSWERED_AT_ONCE} <= {str(r["question"]) for r in listed}, listed
        assert asked["id"] in {r["query_id"] for r in listed}
        assert "earlierquery0001" not in {r["query_id"] for r in listed}  # set aside with its topology
        assert all(r["question"] not in (None, "", "unknown") for r in listed), listed  # no orphan span rows
        assert "what is bm25" in run_cli(home, "traces", "--limit", "100", COLUMNS="200").stdout


def _ingestion(home: Path, store) -> None:
    """test_ingestion_e2e.test_poll_twice_then_change_and_remove, on the topology."""
    with serve_site(Site()) as site:
        items = put_topic_articles(site, TOPICS)
        publish_feed(site, items)
        feed = f"{site.base}/feed.xml"
        run_cli(home, "feeds", "add", feed)

        run_cli(home, "poll")
        first = _documents(store, site.base)
        assert set(first) == {f"{t}.html" for t in TOPICS}
        stats = cli_json(home, "stats")
        assert stats["documents"] == 4 and stats["chunks"] >= 4 and stats["dead_letters"] == 0
        (feed_stats,) = stats["feeds"]
        assert feed_stats["url"] == feed and feed_stats["last_poll"] and feed_stats["last_error"] is None

        hits = cli_json(home, "search", "saxophone report", "--k", "3")
        assert hits[0]["url"].endswith("/posts/saxophone.html")
        assert "cookies" not in " ".join(h["text"] for h in hits).lower()

        # the second poll indexes nothing and fetches no article again
        article_hits = site.hits["/posts/volcano.html"]
        run_cli(home, "poll")
        assert _documents(store, site.base) == first
        assert site.hits["/posts/volcano.html"] == article_hits

        # change one item, remove another
        site.put("/posts/glacier.html", article_html("All about glaciers, revised", topic_paragraphs("iceberg", seed=9)))
        items[2] = {**items[2], "title": "All about glaciers, revised"}
        publish_feed(site, [i for i in items if i["guid"] != "guid-satellite"])
        run_cli(home, "poll")
        after = _documents(store, site.base)
        assert set(after) == {"volcano.html", "saxophone.html", "glacier.html"}
        assert after["glacier.html"]["content_hash"] != first["glacier.html"]["content_hash"]
        assert after["volcano.html"] == first["volcano.html"]
        hits = cli_json(home, "search", "iceberg report", "--k", "10")
        glacier_chunks = [h for h in hits if h["url"].endswith("/posts/glacier.html")]
        assert glacier_chunks and all("iceberg" in h["text"] for h in glacier_chunks)
        assert not [h for h in cli_json(home, "search", "satellite", "--k", "10") if "satellite.html" in h["url"]]
        stats = cli_json(home, "stats")
        assert stats["documents"] == 3
        assert stats["chunks"] == sum(d["chunk_count"] for d in after.values())

        # a file that has no main text is a dead letter, visible in stats
        empty = home.parent / "empty.html"
        empty.write_text("<html><body><nav>menu</nav><script>x()</script></body></html>")
        assert run_cli(home, "ingest", str(empty), check=False).returncode == 1
        stats = cli_json(home, "stats")
        assert stats["dead_letters"] == 1 and stats["documents"] == 3
        (letter,) = stats["recent_dead_letters"]
        assert letter["subscription"] == "cleaner.document-fetched" and "no main text" in letter["error"]


def _questions(home: Path, gateway: str) -> dict:
    """test_query_e2e's answered-at-once and unanswerable questions, through the gateway over HTTP."""
    with serve_corpus(port=0) as base:
        run_cli(home, "feeds", "add", f"{base}/feed.xml")
        run_cli(home, "poll", "--feed", f"{base}/feed.xml")
    run_cli(home, "ingest", str(CORPUS / "docs"))
    stats = cli_json(home, "stats")
    assert stats["documents"] == 3 + 12 and stats["dead_letters"] == 1

    with urllib.request.urlopen(f"{gateway}/healthz", timeout=30) as response:
        assert json.loads(response.read())["runtime"] == "gcp"

    status, record = _post(gateway, {"query": ANSWERED_AT_ONCE, "wait_s": 90})
    assert status == 200 and record["outcome"] in ("answered", "answered_with_caveat")  # issue 36: a caveat when unsure
    assert len(record["iterations"]) == 1 and record["iterations"][0]["decision"] == "accept"
    assert record["citations"] and all(c["title"] and c["url"] and c["document_id"] for c in record["citations"])
    assert record["citations"][0]["url"].endswith("/articles/bm25-ranking-explained.html")
    assert "[1]" in record["answer"]
    _feedback(home, gateway, record["id"])

    status, record = _post(gateway, {"query": UNANSWERABLE, "wait_s": 90})
    assert status == 200 and record["outcome"] == "not_answerable"
    assert len(record["iterations"]) == 1 and record["iterations"][0]["decision"] == "abstain"
    assert record["citations"] == [] and "not" in record["answer"].lower()

    # `ragbus ask` on the same topology reads the same query state
    asked = json.loads(run_cli(home, "ask", ANSWERED_AT_ONCE, "--json").stdout)
    assert asked["outcome"] in ("answered", "answered_with_caveat")  # issue 36: a caveat when unsure
    assert asked["citations"][0]["url"].endswith("/articles/bm25-ranking-explained.html")
    _conversations(gateway)
    return asked


def _feedback(home: Path, gateway: str, query_id: str) -> None:
    """A rating through the gateway function, kept in Firestore; `ragbus feedback` on the same state."""
    request = urllib.request.Request(
        f"{gateway}/v1/queries/{query_id}/feedback", method="POST",
        data=json.dumps({"rating": "down", "comment": "wrong <b>page</b>", "wrong_citations": [1]}).encode(),
        headers={"Content-Type": "application/json", "X-Ragbus-Client": "page-e2e"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read()) == {"query_id": query_id, "rating": "down", "replaced": False,
                                               "up": 0, "down": 1}
    with urllib.request.urlopen(f"{gateway}/v1/queries/{query_id}", timeout=30) as response:
        (kept,) = json.loads(response.read())["feedback"]
    assert (kept["rating"], kept["comment"], kept["wrong_citations"]) == ("down", "wrong <b>page</b>", [1])
    rated = json.loads(run_cli(home, "feedback", query_id[:10], "up", "--comment", "fine after all", "--json").stdout)
    assert rated == {"query_id": query_id, "rating": "up", "replaced": False, "up": 1, "down": 1}


def _conversations(gateway: str) -> None:
    """test_chat_surfaces' conversation checks on Firestore: a follow-up over REST, MCP ask with a
    conversation id (the mcp SDK's client), /v1/chat/completions through the openai SDK, streamed too."""
    import anyio
    import openai
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    status, first = _post(gateway, {"question": "What is BM25?", "wait_s": 90})
    conversation = first["conversation_id"]
    status, second = _post(gateway, {"question": "Who developed it?", "wait_s": 90, "conversation_id": conversation})
    assert status == 200 and second["conversation_id"] == conversation
    assert "bm25" in second["standalone_question"].lower() and "Robertson" in second["answer"]
    with urllib.request.urlopen(f"{gateway}/v1/conversations/{conversation}", timeout=30) as response:
        turns = json.loads(response.read())["turns"]
    assert [t["query_id"] for t in turns] == [first["id"], second["id"]]

    async def ask_twice():
        async with streamable_http_client(f"{gateway}/mcp") as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            one = (await session.call_tool("ask", {"question": "What is BM25?"})).structured_content
            two = await session.call_tool("ask", {"question": "Who developed it?",
                                                  "conversation_id": one["conversation_id"]})
            return one, two.structured_content

    one, two = anyio.run(ask_twice)
    assert two["conversation_id"] == one["conversation_id"] and "bm25" in two["standalone_question"].lower()

    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key="unused", max_retries=0, timeout=120)
    answer = client.chat.completions.create(model="ragbus", messages=[{"role": "user", "content": "What is BM25?"}])
    follow = client.chat.completions.create(model="ragbus", messages=[
        {"role": "user", "content": "What is BM25?"},
        {"role": "assistant", "content": answer.choices[0].message.content},
        {"role": "user", "content": "Who developed it?"}])
    assert "Robertson" in follow.choices[0].message.content and "\n\nSources:\n1. [" in follow.choices[0].message.content
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="ragbus", stream=True, messages=[{"role": "user", "content": ANSWERED_AT_ONCE}]) if c.choices)
    assert "bm25-ranking-explained.html" in streamed
