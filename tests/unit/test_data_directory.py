"""The data directory holds the text of every document ingested (from files that may be readable by
their owner only), every question, answer and rating: one that ragbus creates is its owner's alone."""

from __future__ import annotations

import stat

import pytest
from typer.testing import CliRunner

from shared.tools.cli import app

pytestmark = pytest.mark.unit


def test_a_data_directory_ragbus_creates_is_readable_by_its_owner_only(tmp_path):
    # it was created 0755: `ragbus ingest ~/private` copied 0600 files' text into world-readable blobs
    home = tmp_path / "home"
    result = CliRunner().invoke(app, ["stats"], env={"RAGBUS_HOME": str(home), "RAGBUS_RUNTIME": "local"})
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_a_data_directory_the_user_made_keeps_its_mode(tmp_path):
    home = tmp_path / "shared-home"
    home.mkdir(mode=0o750)
    home.chmod(0o750)
    result = CliRunner().invoke(app, ["stats"], env={"RAGBUS_HOME": str(home), "RAGBUS_RUNTIME": "local"})
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(home.stat().st_mode) == 0o750
