"""RAGBUS_RUNTIME=gcp: clear start-up errors, and the right adapters behind each port."""

import pytest

from shared.contract.config import load_settings, require_gcp
from shared.contract.errors import ConfigError
from shared.runtime.bootstrap import build_deps


def test_missing_settings_are_named():
    with pytest.raises(ConfigError) as err:
        require_gcp(load_settings({"RAGBUS_RUNTIME": "gcp"}))
    assert "GOOGLE_CLOUD_PROJECT" in str(err.value) and "RAGBUS_BUCKET" in str(err.value)
    with pytest.raises(ConfigError, match="RAGBUS_VERTEX_INDEX"):
        require_gcp(load_settings({"RAGBUS_RUNTIME": "gcp", "GOOGLE_CLOUD_PROJECT": "p", "RAGBUS_BUCKET": "b",
                                   "RAGBUS_INDEX": "vertex", "GOOGLE_CLOUD_LOCATION": "europe-west4"}))
    with pytest.raises(ConfigError, match="RAGBUS_INDEX='pinecone'"):
        load_settings({"RAGBUS_INDEX": "pinecone"})


def test_gcp_runtime_builds_cloud_adapters(monkeypatch, tmp_path):
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")  # no credentials needed with emulators
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:9")
    deps = build_deps(load_settings({"RAGBUS_RUNTIME": "gcp", "GOOGLE_CLOUD_PROJECT": "p", "RAGBUS_BUCKET": "b",
                                     "RAGBUS_HOME": str(tmp_path)}))
    from shared.adapters.gcp.firestore_state import FirestoreStateStore
    from shared.adapters.gcp.gcs_blobs import GcsBlobStore
    from shared.observability.tracing import TracingPublisher

    assert isinstance(deps.state, FirestoreStateStore)
    assert isinstance(deps.blobs, GcsBlobStore)
    assert isinstance(deps.publisher, TracingPublisher)
    assert type(deps.publisher.inner).__name__ == "PubSubPublisher"
