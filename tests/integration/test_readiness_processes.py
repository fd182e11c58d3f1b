"""Real processes with a stale grade_model.json: `ragbus serve` keeps serving and its /readyz answers 503
with the loader's one-line message; a functions-framework grader refuses to start with it; the gateway
function and an ingestion function (which do not grade) start and stay ready.

There is no setting for the model file's path (it is package data), so each child process is started
through a two-line launcher that points ``grade_model.MODEL_FILE`` at the test's stale copy and then runs
the real entry point (``python -m shared.tools.cli`` / ``python -m functions_framework``) unchanged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import shared.adapters.local.grade_model as grade_model
from shared.contract.errors import ConfigError
from shared.tools.emulators import free_port
from tests.support import REPO, interrupt, ragbus_env

LAUNCH = (
    "import runpy, sys\n"
    "from pathlib import Path\n"
    "import shared.adapters.local.grade_model as grade_model\n"
    "grade_model.MODEL_FILE = Path(sys.argv[1])  # the test's copy instead of the shipped file\n"
    "sys.argv = [sys.argv[2], *sys.argv[3:]]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


@pytest.fixture
def stale_model(tmp_path, monkeypatch) -> tuple[Path, str]:
    """A grade_model.json fit on the feature version before this one, and the message its loader gives."""
    data = grade_model.shipped_model().to_json()
    data["feature_version"] -= 1
    path = tmp_path / "stale" / "grade_model.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    monkeypatch.setattr(grade_model, "MODEL_FILE", path)
    grade_model.shipped_model.cache_clear()
    try:
        with pytest.raises(ConfigError) as raised:
            grade_model.shipped_model()
    finally:
        monkeypatch.undo()
        grade_model.shipped_model.cache_clear()
    return path, str(raised.value)


@contextmanager
def _process(model: Path, module: str, *args: str, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, str(model), module, *args], cwd=REPO, env=env, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            interrupt(proc)


def _answer(proc: subprocess.Popen[str], url: str, timeout_s: float = 90.0) -> httpx.Response:
    """The first HTTP answer of ``url`` (any status), while ``proc`` is alive."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before answering:\n{proc.stdout.read()}")
        try:
            return httpx.get(url, timeout=10)
        except httpx.TransportError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {timeout_s:.0f}s")


def _functions_framework(stage: str, port: int) -> list[str]:
    argv = [f"--target={stage}", f"--source={REPO / 'main.py'}", f"--port={port}", "--host=127.0.0.1"]
    return argv if stage == "gateway" else [*argv, "--signature-type=cloudevent"]


def test_serve_reports_the_stale_grade_model_on_readyz_and_keeps_serving(stale_model, tmp_path):
    path, message = stale_model
    port = free_port()
    env = ragbus_env(tmp_path / "home", RAGBUS_TRACING="0")
    with _process(path, "shared.tools.cli", "serve", "--port", str(port), env=env) as proc:
        base = f"http://127.0.0.1:{port}"
        ready = _answer(proc, f"{base}/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"status": "unready", "model": {"model": None, "usable": True},
                                "stages": {"grader": message}}
        health = httpx.get(f"{base}/healthz", timeout=10)
        assert health.status_code == 200 and health.json()["stages"] == {"grader": message}  # live
        os.killpg(proc.pid, signal.SIGINT)
        output = proc.communicate(timeout=30)[0]
    assert "not ready: grader: " + " ".join(message.split()) in " ".join(output.split())


def test_a_grader_function_refuses_to_start_with_the_message(stale_model, tmp_path):
    path, message = stale_model
    env = ragbus_env(tmp_path / "home", RAGBUS_TRACING="0")
    with _process(path, "functions_framework", *_functions_framework("grader", free_port()), env=env) as proc:
        output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 1
    assert output.strip().splitlines()[-1] == f"ragbus grader function is not ready: {message}"
    assert "Traceback" not in output


def test_functions_that_do_not_grade_start_and_stay_ready(stale_model, tmp_path):
    path, _ = stale_model
    env = ragbus_env(tmp_path / "home", RAGBUS_TRACING="0")
    port = free_port()
    with _process(path, "functions_framework", *_functions_framework("gateway", port), env=env) as proc:
        ready = _answer(proc, f"http://127.0.0.1:{port}/readyz")  # its stages run in other functions
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "model": {"model": None, "usable": True}})
    port = free_port()
    with _process(path, "functions_framework", *_functions_framework("indexer", port), env=env) as proc:
        answer = _answer(proc, f"http://127.0.0.1:{port}/")  # a bare GET: an error status, but up
        assert answer.status_code >= 400 and proc.poll() is None
