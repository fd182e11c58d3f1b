"""Kill -9 a ragbus command at some moment and count what the index holds (crash tests and
bench/crash_rounds.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support import REPO, ragbus_env, topic_paragraphs


def write_corpus(folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(n):
        path = folder / f"doc{i:04d}.md"
        path.write_text(f"# Document {i}\n\n" + "\n\n".join(topic_paragraphs(f"subject{i}", 4, seed=i)))
        files.append(path)
    return files


def census(home: Path) -> dict[str, Any]:
    """Documents indexed and duplicates: a document recorded twice for one source, or an
    index holding more chunks than the documents' records account for."""
    from shared.contract import state_collections
    from shared.contract.config import load_settings
    from shared.runtime.bootstrap import build_local

    deps = build_local(load_settings({"RAGBUS_HOME": str(home)})).deps
    docs = deps.state.list(state_collections.DOCUMENTS)
    recorded_chunks = sum(int(d.get("chunk_count") or len(d.get("chunk_ids") or [])) for d in docs)
    chunks = deps.index.count_chunks()
    return {
        "documents": len(docs),
        "chunks": chunks,
        "duplicates": (len(docs) - len({d.get("url") for d in docs})) + max(0, chunks - recorded_chunks),
        "index_documents": deps.index.count_documents(),
    }


#: what census() finds once every document is deleted
NOTHING = {"documents": 0, "chunks": 0, "duplicates": 0, "index_documents": 0}


def start(home: Path, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "shared.tools.cli", *args], cwd=REPO, env=ragbus_env(home, **env),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def kill9(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def kill_when(proc: subprocess.Popen, home: Path, *, after_s: float | None = None,
              documents: int | None = None, limit_s: float = 120) -> float:
    """Kill -9 after ``after_s`` seconds or once ``documents`` are indexed; return when."""
    started = time.monotonic()
    while proc.poll() is None and time.monotonic() - started < limit_s:
        if after_s is not None and time.monotonic() - started >= after_s:
            break
        if documents is not None and (home / "ragbus.db").exists():
            try:
                if census(home)["documents"] >= documents:
                    break
            except Exception:  # noqa: BLE001 - the database may be mid-creation
                pass
        time.sleep(0.05)
    kill9(proc)
    return time.monotonic() - started


def start_captured(home: Path, *args: str, **env: str) -> subprocess.Popen:
    """A ragbus command in the background (its own process group), its output kept for the test."""
    return subprocess.Popen(
        [sys.executable, "-m", "shared.tools.cli", *args], cwd=REPO, env=ragbus_env(home, **env),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def wait_for(condition: Any, limit_s: float = 120) -> None:
    """Until ``condition()`` holds (an exception reads as not yet: the database may be mid-creation)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.05)
    raise AssertionError(f"the condition never held within {limit_s} s")
