"""Dead letters retried by several requests or commands at once (issue 35, problems 4 and 17): each
letter is published again once, not once a request, and each command counts only what it retried."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime

import httpx

from services.gateway import serve
from shared.adapters.local.clock import SystemClock
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.messages import DocumentCleaned, encode
from tests.hostile.crash import start_captured, wait_for, write_corpus
from tests.support import run_cli


class CountingPublisher:
    """Counts what is published; a publish takes a few milliseconds, as a round trip to a bus does."""

    def __init__(self) -> None:
        self.published: list[str] = []
        self.lock = threading.Lock()

    def publish(self, message, attributes=None) -> str:
        time.sleep(0.005)
        with self.lock:
            self.published.append(message.document_id)
            return str(len(self.published))


def _letters(state: SqliteStateStore, n: int) -> None:
    for i in range(n):
        message = DocumentCleaned(document_id=f"file-{i:04d}", source="file", origin="/docs", url=f"file:///docs/{i}",
                                  title=f"doc {i}", clean_ref=f"clean/{i}", content_hash=f"h{i}", characters=10)
        data, attributes = encode(message)
        state.put(state_collections.DEAD_LETTERS, f"indexer.document-cleaned:m{i}", {
            "subscription": "indexer.document-cleaned", "topic": "document-cleaned", "message_id": f"m{i}",
            **attributes, "data": data.decode(), "error": "the embedder was down", "attempts": 5,
            "at": datetime(2026, 11, 28, tzinfo=UTC).isoformat()})


def test_five_concurrent_retry_requests_publish_each_dead_letter_once(tmp_path):
    state = SqliteStateStore(tmp_path / "state.db")
    _letters(state, 30)
    publisher = CountingPublisher()
    deps = Deps(Settings(home=tmp_path), publisher=publisher, state=state, clock=SystemClock())
    handle = serve(deps, "127.0.0.1", 0)
    answers: list[dict] = []
    try:
        def post() -> None:
            with httpx.Client(base_url=handle.url, timeout=60) as http:
                answers.append(http.post("/v1/dead-letters/retry", json={}).json())

        threads = [threading.Thread(target=post) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        handle.stop()
    assert len(answers) == 5, answers
    assert all("retried" in a for a in answers), answers
    assert sorted(publisher.published) == [f"file-{i:04d}" for i in range(30)]  # once each
    assert sorted(k for a in answers for k in a["retried"]) == sorted(f"indexer.document-cleaned:m{i}" for i in range(30))
    assert state.count(state_collections.DEAD_LETTERS) == 0



def test_two_concurrent_retry_all_commands_each_count_only_their_own_letters(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 7)
    capped = {"RAGBUS_MAX_CHUNKS_PER_DOCUMENT": "1"}  # every document is refused again
    run_cli(home, "ingest", str(docs), check=False, **capped)
    assert len(run_cli(home, "dead-letters", "--json").stdout.split('"message_id"')) - 1 == 7
    both = [start_captured(home, "dead-letters", "retry", "--all", **capped) for _ in range(2)]
    outputs = [proc.communicate(timeout=300)[0] for proc in both]
    counts = []
    for out in outputs:
        retried = int(re.search(r"retried (\d+) dead letter", out).group(1))
        again = re.search(r"(\d+) failed again", out)
        counts.append((retried, int(again.group(1)) if again else 0))
    # each letter is retried by one of them (a letter that failed again before the other looked
    # is a new letter, which that one may retry in turn), and each reports its own failures
    assert sum(r for r, _ in counts) >= 7, outputs
    assert all(again == retried for retried, again in counts), outputs
    assert len(run_cli(home, "dead-letters", "--json").stdout.split('"message_id"')) - 1 == 7  # not 14


def test_a_poll_does_not_fail_on_an_ingests_dead_letter_beside_it(tmp_path):
    from tests.support import Site, put_article_feed, serve_site

    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 this is no PDF")  # dead-lettered by any cleaner
    site = Site()
    site.delay_s = 0.3  # a poll long enough for the ingest to run beside it
    with serve_site(site):
        items = put_article_feed(site, 20, "tundra")
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml", "--allow-loopback")
        poll = start_captured(home, "poll")
        wait_for(lambda: sum(site.hits.get(item["path"], 0) for item in items) >= 2)
        ingest = run_cli(home, "ingest", str(docs), check=False)
        out, errors = poll.communicate(timeout=300)
    assert ingest.returncode == 1 and "1 document(s) could not be processed" in ingest.stderr
    assert poll.returncode == 0, errors  # the ingest's failure is the ingest's, not the poll's
    assert "could not be processed" not in errors
