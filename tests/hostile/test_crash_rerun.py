"""kill -9 of `ragbus ingest` at different moments; the rerun ends with every file indexed once."""

from __future__ import annotations

import pytest

from tests.hostile.crash import census, kill_when, start, write_corpus
from tests.support import run_cli

N = 24


@pytest.mark.parametrize("moment", [
    {"after_s": 0.0},  # before the runtime even started
    {"after_s": 1.2},  # while files are being announced or the models load
    {"documents": 4},  # mid-indexing: most of the work is still queued
])
def test_ingest_rerun_after_kill_9_indexes_every_file_exactly_once(tmp_path, moment):
    docs, home = tmp_path / "docs", tmp_path / "home"
    write_corpus(docs, N)
    kill_when(start(home, "ingest", str(docs)), home, **moment)
    rerun = run_cli(home, "ingest", str(docs), "--timeout", "120", check=False)
    assert rerun.returncode == 0, rerun.stderr
    counted = census(home)
    assert counted["documents"] == N and counted["index_documents"] == N
    assert counted["duplicates"] == 0
    again = run_cli(home, "ingest", str(docs))  # nothing left: a third run changes nothing
    assert "0 document(s) submitted" in again.stdout and census(home) == counted


def test_a_rerun_that_gives_up_waiting_says_what_is_pending_and_exits_non_zero(tmp_path):
    docs, home = tmp_path / "docs", tmp_path / "home"
    write_corpus(docs, N)
    kill_when(start(home, "ingest", str(docs)), home, documents=1)
    rerun = run_cli(home, "ingest", str(docs), "--timeout", "0", check=False)
    assert rerun.returncode == 1
    assert "announced by an earlier run are not indexed yet" in rerun.stderr
    assert "still pending" in rerun.stderr and "ragbus stats" in rerun.stderr
    assert run_cli(home, "ingest", str(docs), check=False).returncode == 0
    assert census(home)["documents"] == N
