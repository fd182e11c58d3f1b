"""A disk that fills while `serve` runs (issue 35, problem 6): named, never a generic 500.

The home lives on a small tmpfs (root only; skipped elsewhere, saying why). Once a filler takes the
last byte: POST /v1/queries answers 507 naming the disk, /v1/chat/completions the same in OpenAI's
error shape (read by the `openai` SDK), MCP `ask` a tool error saying it, and /readyz 503 with a
`storage` reason; freed, everything answers again. A write that fails for that reason inside a
request (the disk filled between the check and the write) is the same 507, and a segment flush that
fails for it logs "the disk is full" with the segment, not numpy's "N requested and M written".
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import anyio
import httpx
import numpy as np
import openai
import pytest

from shared.contract.errors import DataFileError
from tests.support import mcp_session, serving_documents, tmpfs, topic_files

pytestmark = pytest.mark.hostile


def _fill(mount: Path) -> Path:
    filler = mount / "filler"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


@pytest.fixture(scope="module")
def serving(tmp_path_factory):
    """(gateway URL, home, mount) of a runtime serving a home on a 48 MB tmpfs."""
    root = tmp_path_factory.mktemp("full")
    docs = topic_files(root / "docs", "quillon", 3)
    with tmpfs(root, "48m") as mount, serving_documents({"RAGBUS_HOME": str(mount / "home")}, docs) as server:
        yield server.url, mount / "home", mount


def test_a_full_disk_is_a_named_507_on_every_write_path_and_a_readyz_reason(serving):
    url, home, mount = serving
    assert httpx.get(f"{url}/readyz", timeout=30).json()["status"] == "ready"
    filler = _fill(mount)
    try:
        asked = httpx.post(f"{url}/v1/queries", json={"question": "what does quillon1 report?"}, timeout=60)
        assert asked.status_code == 507 and "disk" in asked.json()["error"] and "full" in asked.json()["error"]
        assert str(home) in asked.json()["error"]
        retried = httpx.post(f"{url}/v1/dead-letters/retry", json={}, timeout=30)
        assert retried.status_code == 507
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="not-needed", max_retries=0, timeout=60)
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(model="ragbus", messages=[{"role": "user", "content": "quillon1?"}])
        assert refused.value.status_code == 507
        body = refused.value.body
        assert body["code"] == "insufficient_storage" and body["type"] == "server_error" and "full" in body["message"]
        streamed = httpx.post(f"{url}/v1/chat/completions", timeout=60, json={
            "model": "ragbus", "stream": True, "messages": [{"role": "user", "content": "quillon1?"}]})
        assert streamed.status_code == 507 and streamed.json()["error"]["code"] == "insufficient_storage"

        async def ask():
            async with mcp_session(f"{url}/mcp") as session:
                return await session.call_tool("ask", {"question": "what does quillon1 report?"})

        told = anyio.run(ask)
        assert told.is_error and "full" in told.content[0].text and str(home) in told.content[0].text
        ready = httpx.get(f"{url}/readyz", timeout=30)
        assert ready.status_code == 503 and ready.json()["status"] == "unready"
        assert str(home) in ready.json()["storage"] and "full" in ready.json()["storage"]
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200  # live: the fix is space, not a restart
        assert httpx.get(f"{url}/v1/search", params={"q": "quillon1"}, timeout=60).status_code == 200  # reads go on
    finally:
        filler.unlink()
    assert httpx.get(f"{url}/readyz", timeout=30).json()["status"] == "ready"
    answered = httpx.post(f"{url}/v1/queries", json={"question": "what does quillon1 report?", "wait_s": 90},
                          timeout=120)
    assert answered.status_code == 200 and answered.json()["status"] == "answered", answered.text


class _FullStateStore:
    """A state store whose every write meets a full disk (the disk filled after the gateway's check)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name in ("create", "put", "update", "transact", "set", "merge", "delete"):
            def refuse(*args, **kwargs):
                raise DataFileError("/data/ragbus.db: the disk is full (database or disk is full); free space", "full")
            return refuse
        return attr


def test_a_write_that_meets_a_full_disk_is_a_507_and_readyz_says_so_a_moment(tmp_path):
    from starlette.testclient import TestClient

    from services.gateway.app import create_app
    from shared.contract.config import Settings
    from shared.contract.deps import Deps
    from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher

    deps = Deps(Settings(home=tmp_path), publisher=RecordingPublisher(), state=_FullStateStore(InMemoryStateStore()),
                clock=FakeClock())
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        asked = client.post("/v1/queries", json={"question": "what is bm25?"})
        chat = client.post("/v1/chat/completions", json={"model": "ragbus",
                                                         "messages": [{"role": "user", "content": "bm25?"}]})
        ready = client.get("/readyz")
    assert asked.status_code == 507 and "/data/ragbus.db: the disk is full" in asked.json()["error"]
    assert chat.status_code == 507 and chat.json()["error"]["code"] == "insufficient_storage"
    assert "/data/ragbus.db" in chat.json()["error"]["message"]
    assert ready.status_code == 503 and "/data/ragbus.db: the disk is full" in ready.json()["storage"]


def test_a_flush_that_fills_the_disk_says_so_plainly(tmp_path, caplog):
    from shared.adapters.local.index import HybridIndex
    from shared.contract.ports import Chunk

    with tmpfs(tmp_path, "24m") as mount:
        index = HybridIndex(mount / "index", 384, background_merges=False)
        rng = np.random.default_rng(0)
        for d in range(40):
            chunks = [Chunk(chunk_id=f"d{d:02d}:v1:{i}", document_id=f"d{d:02d}", ordinal=i, text=f"topic{d} " * 50)
                      for i in range(50)]
            index.upsert(f"d{d:02d}", chunks, rng.normal(size=(50, 384)).astype(np.float32))
        filler = _fill(mount)
        try:
            with pytest.raises(DataFileError, match=r"the disk is full while writing an index segment") as failed:
                index.maintain(flush=True)
            assert str(mount / "index" / "segments") in str(failed.value)
            caplog.set_level(logging.ERROR, logger="ragbus.index")
            index._maintain_quietly(True)  # what the background thread runs
            said = caplog.text
            assert "the disk is full while writing an index segment" in said and "Traceback" not in said
            assert not list((mount / "index" / "segments").glob(".tmp-*"))  # nothing half-written left
        finally:
            filler.unlink()
        assert index.maintain(flush=True)["flushed"] and index.count_chunks() == 2000
        index.close()
