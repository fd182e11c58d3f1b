import threading

import pytest

from shared.adapters.local.blobs import FolderBlobStore
from shared.adapters.local.state import SqliteStateStore
from tests.fakes import InMemoryStateStore


@pytest.fixture(params=["sqlite", "memory"])
def store(request, tmp_path):
    # the fake must behave like the real store, or unit tests built on it lie
    return SqliteStateStore(tmp_path / "s.db") if request.param == "sqlite" else InMemoryStateStore()


def test_create_is_create_if_absent(store):
    assert store.create("c", "k", {"v": 1})
    assert not store.create("c", "k", {"v": 2})
    assert store.get("c", "k") == {"v": 1}


def test_put_get_delete(store):
    store.put("c", "k", {"v": 1})
    store.put("c", "k", {"v": 2})
    assert store.get("c", "k") == {"v": 2}
    assert store.delete("c", "k")
    assert not store.delete("c", "k")
    assert store.get("c", "k") is None


def test_update_is_read_modify_write_and_none_leaves_unchanged(store):
    assert store.update("c", "k", lambda d: {"n": 1} if d is None else None) == {"n": 1}
    assert store.update("c", "k", lambda d: None) == {"n": 1}
    assert store.update("c", "k", lambda d: {"n": d["n"] + 1}) == {"n": 2}


def test_list_and_count_filter_by_fields(store):
    store.put("c", "a", {"feed": "x", "ok": True, "meta": {"lang": "en"}})
    store.put("c", "b", {"feed": "y", "ok": False, "meta": {"lang": "de"}})
    store.put("c", "c", {"feed": "x", "ok": False, "meta": {"lang": "en"}})
    store.put("other", "a", {"feed": "x"})
    assert [d["ok"] for d in store.list("c", {"feed": "x"})] == [True, False]
    assert store.count("c", {"ok": False}) == 2
    assert store.count("c", {"meta.lang": "en"}) == 2
    assert len(store.list("c", limit=1)) == 1
    assert store.count("c") == 3


def test_concurrent_updates_lose_nothing(tmp_path):
    store = SqliteStateStore(tmp_path / "s.db")
    store.put("c", "k", {"n": 0})

    def bump():
        for _ in range(50):
            store.update("c", "k", lambda d: {"n": d["n"] + 1})

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get("c", "k") == {"n": 200}


def test_folder_blobs_round_trip_and_refuse_escapes(tmp_path):
    blobs = FolderBlobStore(tmp_path / "b")
    ref = blobs.put("raw/doc-1/abc", b"hello")
    assert ref == "blob:raw/doc-1/abc" and blobs.get(ref) == b"hello"
    blobs.put("raw/doc-1/abc", b"again")
    assert blobs.get(ref) == b"again"
    blobs.delete(ref)
    with pytest.raises(KeyError, match="no blob"):
        blobs.get(ref)
    for bad in ("../x", "/etc/passwd", "a/../../b", "a b"):
        with pytest.raises(ValueError, match="relative path"):
            blobs.put(bad, b"x")
    with pytest.raises(KeyError, match="not a local blob reference"):
        blobs.get("gs://bucket/x")
