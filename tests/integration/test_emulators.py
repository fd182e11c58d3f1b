"""The emulator harness itself: start, stop by pid, and a clear error when a start fails.

Uses fake-gcs-server (it starts in a fraction of a second); the JVM emulators
share the same launch code and are started by the other integration tests.
"""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

import pytest

from shared.tools import emulators


@pytest.fixture
def gcs_installed() -> None:
    missing = emulators.emulators_available()[emulators.GCS]
    if missing:
        pytest.skip(f"gcs emulator not installed: {missing}")


def test_availability_names_every_emulator() -> None:
    status = emulators.emulators_available()
    assert set(status) == {emulators.PUBSUB, emulators.FIRESTORE, emulators.GCS}
    assert all(v is None or isinstance(v, str) for v in status.values())


def test_start_answers_then_stop_by_pid_ends_the_group(gcs_installed: None, tmp_path: Path) -> None:
    handle = emulators.start_gcs_emulator(tmp_path, data_dir=tmp_path / "data")
    assert handle.env == {"STORAGE_EMULATOR_HOST": handle.url}
    with urllib.request.urlopen(handle.url + "/storage/v1/b", timeout=5) as response:
        assert response.status == 200
    assert handle.alive()
    # As `ragbus down` would: only the pid is known.
    assert emulators.stop_process_group(handle.pid, timeout_s=5) is True
    assert not emulators._group_alive(handle.pid)
    assert emulators.stop_process_group(handle.pid) is False  # nothing left to stop
    handle.stop()  # harmless when already stopped


def test_a_start_that_fails_says_why_with_the_log(gcs_installed: None, tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((emulators.HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(emulators.EmulatorError) as caught:
            emulators.start_gcs_emulator(tmp_path, port=port, timeout_s=10)
    text = str(caught.value)
    assert "gcs emulator exited" in text
    assert str(tmp_path) in text  # where the full log is
    assert "address already in use" in text.lower()  # the log's tail is in the message


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_emulator_variable_nothing_answers_at_is_named() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up = listening.getsockname()[1]
        down = _closed_port()
        found = emulators.unreachable_emulators({
            "PUBSUB_EMULATOR_HOST": f"127.0.0.1:{up}",
            "FIRESTORE_EMULATOR_HOST": f"127.0.0.1:{down}",
            "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{up}",
        })
    assert found == [f"nothing answers at FIRESTORE_EMULATOR_HOST=127.0.0.1:{down} (Connection refused)"]


@pytest.mark.timeout(60)  # before the fix the Firestore client retried the stopped emulator for ~5 minutes
def test_a_gcp_command_pointed_at_a_stopped_emulator_says_so_at_once(tmp_path: Path) -> None:
    from tests.support import run_cli

    port = _closed_port()
    proc = run_cli(tmp_path / "home", "stats", check=False, timeout=50, RAGBUS_RUNTIME="gcp",
                   GOOGLE_CLOUD_PROJECT="ragbus-test", RAGBUS_BUCKET="b", FIRESTORE_EMULATOR_HOST=f"127.0.0.1:{port}")
    assert proc.returncode == 2
    assert f"nothing answers at FIRESTORE_EMULATOR_HOST=127.0.0.1:{port}" in " ".join(proc.stderr.split())
