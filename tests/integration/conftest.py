"""Fixtures shared by the integration tests."""

from tests.emulator_fixtures import (  # noqa: F401  (pytest finds fixtures by name)
    emulator_log_dir,
    firestore_client,
    firestore_emulator,
    gcs_emulator,
    gcs_project,
    pubsub_emulator,
    pubsub_project,
)
