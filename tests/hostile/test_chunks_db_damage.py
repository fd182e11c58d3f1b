"""Damage inside chunks.db (issue 35, problem 5): zeroed pages, and rows the index reads as JSON.

Zeroed pages inside a SQLite file raise no error when it is opened, and a query may read the wrong
row from them: a search for one document returned another, and every flush failed "database disk
image is malformed". chunks.db is now checked whole when opened (PRAGMA quick_check, where that is
cheap) and after any "malformed" error met while it is read; a damaged one is named, set aside and
started anew (the index is derived data: the documents are sent again). A manifest or metadata row
that is not JSON is named with its file and read around, never a bare JSONDecodeError.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from shared.adapters.local import chunk_store
from shared.adapters.local.index import HybridIndex
from shared.adapters.local.sqlite import suspect_marker
from shared.contract.errors import DataFileError
from shared.contract.ports import Chunk
from tests.hostile.test_index_damage import index_path  # noqa: F401 - the fixture: a copy of this module's `built`

pytestmark = pytest.mark.hostile

DIM = 16
PAGE = 4096


def _fill(path: Path, documents: int = 40) -> HybridIndex:
    index = HybridIndex(path, DIM, background_merges=False)
    rng = np.random.default_rng(0)
    for d in range(documents):
        chunks = [Chunk(chunk_id=f"d{d:02d}:v1:{i}", document_id=f"d{d:02d}", ordinal=i, title=f"Doc {d}",
                        text=f"topic{d} " * 200) for i in range(5)]
        index.upsert(f"d{d:02d}", chunks, rng.normal(size=(5, DIM)).astype(np.float32))
    return index


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("chunks") / "index"
    index = _fill(path)
    index.maintain(flush=True)
    index.close()
    conn = sqlite3.connect(path / "chunks.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file, where the damage goes
    conn.close()
    return path


def _zero_pages(db: Path, pages: range) -> None:
    data = bytearray(db.read_bytes())
    for page in pages:
        data[page * PAGE:(page + 1) * PAGE] = bytes(PAGE)
    db.write_bytes(bytes(data))


def _readyz(index: HybridIndex):
    from starlette.testclient import TestClient

    from services.gateway.app import create_app
    from shared.contract.config import Settings
    from shared.contract.deps import Deps
    from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher

    deps = Deps(Settings(), publisher=RecordingPublisher(), state=InMemoryStateStore(), clock=FakeClock(), index=index)
    deps.index  # noqa: B018 - built, as a process that searched has it
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        return client.get("/readyz")


def _query(index: HybridIndex, topic: int) -> list[str]:
    vector = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    return [h.chunk.document_id for h in index.search(f"topic{topic}", vector, 5, mode="bm25")]


@pytest.mark.parametrize("pages", [range(5, 8), range(20, 21), range(40, 60)])
def test_zeroed_pages_are_found_when_opened_and_the_file_set_aside(index_path, pages, caplog):  # noqa: F811
    db = index_path / "chunks.db"
    _zero_pages(db, pages)
    caplog.set_level(logging.WARNING, logger="ragbus.index")
    index = HybridIndex(index_path, DIM, background_merges=False)
    try:
        assert index.started_new and index.set_aside is not None and index.set_aside.exists()
        assert index.count_chunks() == 0  # started anew: nothing wrong is served, the documents are sent again
        said = caplog.text
        assert str(db) in said and "is damaged (integrity check:" in said and str(index.set_aside) in said
    finally:
        index.close()


def test_a_malformed_error_while_reading_names_the_file_and_the_next_opening_checks_it(index_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(chunk_store, "CHECK_BELOW_BYTES", 1)  # as if the file were too big to check when opened
    index = HybridIndex(index_path, DIM, background_merges=False)
    db = index_path / "chunks.db"
    try:
        _zero_pages(db, range(2, (db.stat().st_size // PAGE) - 1))  # under the open connection
        with pytest.raises(DataFileError, match=r"chunks\.db is damaged \(.*malformed"):
            for topic in range(40):
                _query(index, topic)
                index.get_chunks([f"d{topic:02d}:v1:0"])
        assert suspect_marker(db).exists()
        (found,) = index.damage().values()
        assert found["file"] == str(db) and "malformed" in found["reason"] and found["answering"] is False
        ready = _readyz(index)
        assert ready.status_code == 503 and ready.json()["status"] == "unready"
        assert str(db) in json.dumps(ready.json()["index"]["damaged"])
    finally:
        index.close()
    again = HybridIndex(index_path, DIM, background_merges=False)  # checked whole though it is "big"
    try:
        assert again.started_new and again.set_aside is not None and not suspect_marker(db).exists()
    finally:
        again.close()


@pytest.mark.parametrize("value", ["{not json", "[1, 2]", '[{"name": "seg-x"}]', '"a string"'])
def test_an_unreadable_manifest_row_is_named_read_around_and_written_whole(index_path, value, caplog):  # noqa: F811
    conn = sqlite3.connect(index_path / "chunks.db")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'manifest'", (value,))
    conn.commit()
    conn.close()
    caplog.set_level(logging.ERROR, logger="ragbus.index")
    index = HybridIndex(index_path, DIM, background_merges=False)
    try:
        assert _query(index, 7)[0] == "d07"  # every row searched from chunks.db meanwhile
        assert str(index_path / "chunks.db") in caplog.text and "'manifest' row" in caplog.text
        assert any("manifest" in key for key in index.damage())
        ready = _readyz(index)
        assert ready.status_code == 200 and ready.json()["status"] == "degraded"  # searches answer meanwhile
        index.maintain()
        assert index.damage() == {} and _query(index, 7)[0] == "d07"
        conn = sqlite3.connect(index_path / "chunks.db")
        manifest = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'manifest'").fetchone()[0])
        conn.close()
        assert len(manifest) == 1 and manifest[0]["rows"] == 200
    finally:
        index.close()


def test_a_metadata_row_that_is_not_json_is_named_and_read_without_it(index_path, caplog):  # noqa: F811
    conn = sqlite3.connect(index_path / "chunks.db")
    conn.execute("UPDATE chunks SET metadata = '{broken' WHERE chunk_id = 'd03:v1:0'")
    conn.commit()
    conn.close()
    caplog.set_level(logging.WARNING, logger="ragbus.index")
    index = HybridIndex(index_path, DIM, background_merges=False)
    try:
        (chunk,) = index.get_chunks(["d03:v1:0"])
        assert chunk.metadata == {} and _query(index, 3)[0] == "d03"
        assert "d03:v1:0" in caplog.text and str(index_path / "chunks.db") in caplog.text
    finally:
        index.close()


def test_the_cli_on_zeroed_pages_names_the_file_and_the_rerun_rebuilds(tmp_path):
    from tests.support import cli_json, run_cli, topic_files

    docs = topic_files(tmp_path / "docs", "zorblax", 3, paragraphs=12)
    home = tmp_path / "home"
    run_cli(home, "ingest", str(docs))
    db = home / "index" / "chunks.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    _zero_pages(db, range(3, max(4, db.stat().st_size // PAGE - 1)))
    search = run_cli(home, "search", "zorblax1", "--json", check=False)
    text = search.stdout + search.stderr
    assert "Traceback" not in text and str(db) in text and "damaged" in text, text[-3000:]
    assert list((home / "index").glob("chunks.db.damaged-*"))
    rerun = run_cli(home, "ingest", str(docs), check=False)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert cli_json(home, "stats")["documents"] == 3
    hits = cli_json(home, "search", "zorblax1")
    assert hits and "zorblax1" in json.dumps(hits[0])
