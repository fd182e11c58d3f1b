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
