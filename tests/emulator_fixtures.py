"""Pytest fixtures that run Google's emulators and fake-gcs-server for integration tests.

Each emulator is started once per session (a few seconds each) and stopped by
its pid at the end. A test is skipped only when the emulator's files are not on
this machine; an emulator that is there but fails to start is an error.

The ``*_EMULATOR_HOST`` variables are set per test (``monkeypatch``), so tests
that do not ask for an emulator never see them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.tools import emulators

PROJECT = "ragbus-test"


def _start(name: str, log_dir: Path) -> emulators.EmulatorProcess:
    missing = emulators.emulators_available()[name]
    if missing:
        pytest.skip(f"{name} emulator not installed: {missing}")
    starter = {
        emulators.PUBSUB: emulators.start_pubsub_emulator,
        emulators.FIRESTORE: emulators.start_firestore_emulator,
        emulators.GCS: emulators.start_gcs_emulator,
    }[name]
    return starter(log_dir)


@pytest.fixture(scope="session")
def emulator_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emulator-logs")


@pytest.fixture(scope="session")
def pubsub_emulator(emulator_log_dir: Path) -> Iterator[emulators.EmulatorProcess]:
    handle = _start(emulators.PUBSUB, emulator_log_dir)
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def firestore_emulator(emulator_log_dir: Path) -> Iterator[emulators.EmulatorProcess]:
    handle = _start(emulators.FIRESTORE, emulator_log_dir)
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def gcs_emulator(emulator_log_dir: Path) -> Iterator[emulators.EmulatorProcess]:
    handle = _start(emulators.GCS, emulator_log_dir)
    yield handle
    handle.stop()


@pytest.fixture
def pubsub_project(
    pubsub_emulator: emulators.EmulatorProcess, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The project id to use with the Pub/Sub emulator, whose address is now in the env."""
    for name, value in pubsub_emulator.env.items():
        monkeypatch.setenv(name, value)
    return PROJECT


@pytest.fixture
def firestore_client(
    firestore_emulator: emulators.EmulatorProcess, monkeypatch: pytest.MonkeyPatch
) -> Iterator[object]:
    """A ``google.cloud.firestore.Client`` on an emptied emulator database."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import firestore

    for name, value in firestore_emulator.env.items():
        monkeypatch.setenv(name, value)
    emulators.reset_firestore(firestore_emulator.host_port, PROJECT)
    client = firestore.Client(project=PROJECT, credentials=AnonymousCredentials())
    yield client
    client.close()


@pytest.fixture
def gcs_project(gcs_emulator: emulators.EmulatorProcess, monkeypatch: pytest.MonkeyPatch) -> str:
    """The project id to use with fake-gcs-server, whose address is now in the env."""
    for name, value in gcs_emulator.env.items():
        monkeypatch.setenv(name, value)
    return PROJECT
