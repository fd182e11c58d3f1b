"""The embedder's optimised-graph cache, with a stand-in for ONNX Runtime: a "build" writes a graph
and a weights file the way ONNX Runtime saves an optimised model, a "load" reads them back.

A checked entry is loaded without building; a damaged, truncated, stale or foreign one is rebuilt
and what was loaded from it is never returned; a cache that cannot be written still gives a session;
concurrent starts leave one valid entry and no leftovers. (The real model, cached against uncached
vectors: tests/integration/test_embedder.py.)"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from pathlib import Path

import pytest

from shared.adapters.local import graph_cache
from shared.adapters.local.graph_cache import GRAPH, MANIFEST, WEIGHTS, GraphCache

KEY = {"onnxruntime": "9.9.9", "optimisation": "ORT_ENABLE_ALL", "cpu": "avx2 sse4_2"}


class FakeRuntime:
    """Builds write ``graph`` and ``weights`` bytes beside the graph path, as ONNX Runtime does."""

    def __init__(self, weights: bytes = b"w" * 5000) -> None:
        self.weights = weights
        self.builds: list[Path | None] = []
        self.loads: list[Path] = []

    def build(self, graph: Path | None) -> str:
        self.builds.append(graph)
        if graph is not None:
            graph.write_bytes(b"graph of " + self.weights[:8])
            (graph.parent / WEIGHTS).write_bytes(self.weights)
        return "built"

    def load(self, graph: Path) -> str:
        self.loads.append(graph)
        return "loaded:" + (graph.parent / WEIGHTS).read_bytes()[:8].decode()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"int8 weights" * 100)
    return path


def cache_session(root: Path, model: Path, runtime: FakeRuntime, **key: str) -> str:
    return GraphCache(root, model, {**KEY, **key}).session(runtime.load, runtime.build)


def test_the_first_start_builds_and_saves_the_next_loads_without_building(tmp_path, model):
    runtime = FakeRuntime()
    assert cache_session(tmp_path / "cache", model, runtime) == "built"
    assert cache_session(tmp_path / "cache", model, runtime) == "loaded:wwwwwwww"
    assert len(runtime.builds) == 1 and runtime.builds[0] is not None
    (entry,) = (tmp_path / "cache").iterdir()  # no temporary folder left
    manifest = json.loads((entry / MANIFEST).read_text())
    assert set(manifest["files"]) == {GRAPH, WEIGHTS} and manifest["files"][WEIGHTS]["bytes"] == 5000
    assert manifest["key"]["onnxruntime"] == "9.9.9" and len(manifest["model_sha256"]) == 64


def damage_weights(entry: Path) -> None:
    data = bytearray((entry / WEIGHTS).read_bytes())
    data[2500] ^= 0x01  # one bit, the size unchanged
    (entry / WEIGHTS).write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [
    damage_weights,
    lambda entry: (entry / WEIGHTS).write_bytes(b"w" * 10),
    lambda entry: (entry / WEIGHTS).unlink(),
    lambda entry: (entry / GRAPH).write_bytes(b"graph of xxxxxxxx"),
    lambda entry: (entry / MANIFEST).write_text("{not json"),
    lambda entry: (entry / MANIFEST).write_bytes(b"\xff\xfe"),
    lambda entry: (entry / MANIFEST).unlink(),
], ids=["flipped-bit", "truncated", "missing-weights", "other-graph", "bad-manifest", "not-utf8", "no-manifest"])
def test_a_damaged_entry_is_rebuilt_and_never_used(tmp_path, model, damage, caplog):
    runtime = FakeRuntime()
    cache_session(tmp_path / "cache", model, runtime)
    (entry,) = (tmp_path / "cache").iterdir()
    damage(entry)
    finished = (entry / MANIFEST).exists()  # an entry without one was never finished: no warning
    with caplog.at_level(logging.WARNING, "ragbus.embedder"):
        assert cache_session(tmp_path / "cache", model, runtime) == "built"
    assert len(runtime.builds) == 2
    assert ("rebuilding" in caplog.text) == finished
    assert cache_session(tmp_path / "cache", model, runtime) == "loaded:wwwwwwww"  # the rebuilt entry is good
    assert len(runtime.builds) == 2 and [p.name for p in (tmp_path / "cache").iterdir()] == [entry.name]


def test_a_changed_model_of_the_same_size_makes_the_entry_stale(tmp_path, model, caplog):
    runtime = FakeRuntime()
    cache_session(tmp_path / "cache", model, runtime)
    model.write_bytes(b"INT8 weights" * 100)
    with caplog.at_level(logging.WARNING, "ragbus.embedder"):
        assert cache_session(tmp_path / "cache", model, runtime) == "built"
    assert "stale (the model" in caplog.text and len(runtime.builds) == 2


def test_another_runtime_version_or_cpu_gets_its_own_entry_and_old_ones_are_pruned(tmp_path, model):
    runtime = FakeRuntime()
    for version in ("1.0", "1.1", "1.2", "1.3"):
        cache_session(tmp_path / "cache", model, runtime, onnxruntime=version)
    cache_session(tmp_path / "cache", model, runtime, cpu="neon")
    assert len(runtime.builds) == 5
    assert len(list((tmp_path / "cache").iterdir())) == graph_cache.KEEP
    assert cache_session(tmp_path / "cache", model, runtime, cpu="neon") == "loaded:wwwwwwww"


def test_a_cache_that_cannot_be_written_still_gives_a_session(tmp_path, model, caplog):
    (tmp_path / "cache").write_text("a file, not a folder")
    runtime = FakeRuntime()
    with caplog.at_level(logging.WARNING, "ragbus.embedder"):
        assert cache_session(tmp_path / "cache", model, runtime) == "built"
    assert runtime.builds == [None] and "cannot be written" in caplog.text


def test_a_disk_without_room_for_the_entry_and_the_reserve_is_left_alone(tmp_path, model, caplog):
    runtime = FakeRuntime()
    free = shutil.disk_usage(tmp_path).free
    cache = GraphCache(tmp_path / "cache", model, KEY, reserve_bytes=free)  # the entry would eat the reserve
    with caplog.at_level(logging.WARNING, "ragbus.embedder"):
        assert cache.session(runtime.load, runtime.build) == "built"
    assert runtime.builds == [None] and "MB free" in caplog.text and list((tmp_path / "cache").iterdir()) == []


def test_a_build_that_cannot_save_is_optimised_in_memory(tmp_path, model, caplog):
    runtime = FakeRuntime()

    def build(graph: Path | None) -> str:
        if graph is not None:
            raise RuntimeError("ONNX Runtime: No space left on device")
        return runtime.build(None)

    with caplog.at_level(logging.WARNING, "ragbus.embedder"):
        assert GraphCache(tmp_path / "cache", model, KEY).session(runtime.load, build) == "built"
    assert "No space left" in caplog.text and list((tmp_path / "cache").iterdir()) == []


def test_concurrent_starts_leave_one_valid_entry(tmp_path, model):
    runtime = FakeRuntime()
    together = threading.Barrier(4)

    def build(graph: Path | None) -> str:
        together.wait(timeout=10)  # every start is building before any installs
        return runtime.build(graph)

    results: list[str] = []
    starts = [threading.Thread(target=lambda: results.append(
        GraphCache(tmp_path / "cache", model, KEY).session(runtime.load, build))) for _ in range(4)]
    for start in starts:
        start.start()
    for start in starts:
        start.join(timeout=30)
    assert results == ["built"] * 4
    (entry,) = (tmp_path / "cache").iterdir()
    assert cache_session(tmp_path / "cache", model, runtime) == "loaded:wwwwwwww" and len(runtime.builds) == 4


def test_an_entry_another_start_installed_meanwhile_is_kept(tmp_path, model):
    first, second = FakeRuntime(b"a" * 5000), FakeRuntime(b"b" * 5000)
    cache = GraphCache(tmp_path / "cache", model, KEY)

    def build(graph: Path | None) -> str:
        cache_session(tmp_path / "cache", model, first)  # another start finishes while this one builds
        return second.build(graph)

    assert cache.session(second.load, build) == "built"
    assert cache_session(tmp_path / "cache", model, FakeRuntime()) == "loaded:aaaaaaaa"


def test_the_cache_is_in_the_data_home_unless_moved_or_off_and_the_local_runtime_uses_it(tmp_path):
    from shared.contract.config import load_settings
    from shared.runtime.bootstrap import build_local

    home = tmp_path / "home"
    assert load_settings({"RAGBUS_HOME": str(home)}).model_cache_dir == home / "cache"
    moved = load_settings({"RAGBUS_HOME": str(home), "RAGBUS_MODEL_CACHE": str(tmp_path / "elsewhere")})
    assert moved.model_cache_dir == tmp_path / "elsewhere"
    for off in ("off", "OFF", "0", "false", "no"):
        assert load_settings({"RAGBUS_HOME": str(home), "RAGBUS_MODEL_CACHE": off}).model_cache_dir is None
    embedder = build_local(moved, index=object()).deps.embedder  # built, not loaded: no model read
    assert embedder.inner.cache_dir == tmp_path / "elsewhere"


def test_a_cache_set_to_a_folder_of_other_things_deletes_none_of_them(tmp_path, model):
    """RAGBUS_MODEL_CACHE=~ (or /tmp, or a project folder) by mistake: pruning removes only the
    cache's own entries and leftovers, never the user's folders, old dot-folders among them."""
    import os

    root = tmp_path / "home"
    mine = [root / name for name in ("projects", "photos", "notes", ".ssh", ".config", "0123456789abcdef" * 2,
                                     ".building-mine")]
    for folder in mine:
        folder.mkdir(parents=True)
        (folder / "keep.txt").write_text("the user's")
        os.utime(folder, (1, 1))  # old: what a crashed start's leftover would look like
    runtime = FakeRuntime()
    for version in ("1.0", "1.1", "1.2", "1.3"):
        cache_session(root, model, runtime, onnxruntime=version)
    assert all((folder / "keep.txt").read_text() == "the user's" for folder in mine[:-1])
    assert not mine[-1].exists()  # a crashed start's leftover is still cleared
    entries = [p for p in root.iterdir() if p not in mine]
    assert len(entries) == graph_cache.KEEP and all((p / MANIFEST).is_file() for p in entries)


@pytest.mark.parametrize("value, says", [
    ("on", "is not a folder"), ("1", "is not a folder"), ("TRUE", "is not a folder"), ("yes", "is not a folder"),
    ("{file}", "is a file"), ("{dangling}", "links to nothing"),
])
def test_a_model_cache_value_that_names_no_usable_folder_is_an_error_naming_the_variable(tmp_path, value, says):
    """RAGBUS_MODEL_CACHE=on (or 1, true, yes) would otherwise be a folder named 'on' in whatever folder a
    command starts in; a file or a dangling link would be a warning at every start, the cache never kept."""
    from shared.contract.config import load_settings
    from shared.contract.errors import ConfigError

    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    value = value.format(file=tmp_path / "file", dangling=tmp_path / "dangling")
    with pytest.raises(ConfigError, match="RAGBUS_MODEL_CACHE=") as raised:
        load_settings({"RAGBUS_HOME": str(tmp_path / "home"), "RAGBUS_MODEL_CACHE": value})
    assert says in str(raised.value)


@pytest.mark.parametrize("name, target", [("model.data", "/dev/zero"), ("../../zero", None)])
def test_a_manifest_naming_an_endless_or_outside_file_is_rebuilt_not_read_forever(tmp_path, model, name, target,
                                                                                  caplog):
    runtime = FakeRuntime()
    cache_session(tmp_path / "cache", model, runtime)
    (entry,) = (tmp_path / "cache").iterdir()
    manifest = json.loads((entry / MANIFEST).read_text())
    if target:  # the weights a link to a device that never ends, its size 0 as the manifest says
        (entry / name).unlink()
        (entry / name).symlink_to(target)
    else:  # a name that leaves the entry
        (tmp_path / "zero").symlink_to("/dev/zero")
    manifest["files"][name] = {"bytes": 0, "crc32": 0}
    (entry / MANIFEST).write_text(json.dumps(manifest))
    with caplog.at_level(logging.WARNING, "ragbus.embedder"):
        assert cache_session(tmp_path / "cache", model, runtime) == "built"
    assert len(runtime.builds) == 2 and "rebuilding it" in caplog.text


def test_a_cache_folder_that_is_a_file_is_said_so_not_called_a_bad_manifest(tmp_path, model, caplog):
    (tmp_path / "cache").write_text("a file")
    with caplog.at_level(logging.WARNING, "ragbus.embedder"):
        assert cache_session(tmp_path / "cache", model, FakeRuntime()) == "built"
    assert "manifest" not in caplog.text and "not a folder" in caplog.text


@pytest.mark.parametrize("loosen", [lambda entry: entry, lambda entry: entry / WEIGHTS, lambda entry: entry / GRAPH])
def test_an_entry_other_users_can_write_is_not_trusted_and_rebuilt(tmp_path, model, loosen, caplog):
    """RAGBUS_MODEL_CACHE in a folder others write (/tmp): an entry they could have made, its manifest
    matching their own files, would change every vector; it is rebuilt, and the rebuilt one is this
    user's alone."""
    runtime = FakeRuntime()
    cache_session(tmp_path / "cache", model, runtime)
    (entry,) = (tmp_path / "cache").iterdir()
    loose = loosen(entry)
    loose.chmod(loose.stat().st_mode | 0o022)
    with caplog.at_level(logging.WARNING, "ragbus.embedder"):
        assert cache_session(tmp_path / "cache", model, runtime) == "built"
    assert "writable by other users" in caplog.text and len(runtime.builds) == 2
    assert cache_session(tmp_path / "cache", model, runtime) == "loaded:wwwwwwww"


def test_an_entry_built_under_a_group_writable_umask_is_still_loaded(tmp_path, model):
    runtime = FakeRuntime()

    def build(graph: Path | None) -> str:
        built = runtime.build(graph)
        for path in graph.parent.iterdir():  # as ONNX Runtime writes them under umask 002
            path.chmod(0o664)
        return built

    assert GraphCache(tmp_path / "cache", model, KEY).session(runtime.load, build) == "built"
    assert cache_session(tmp_path / "cache", model, runtime) == "loaded:wwwwwwww"
