"""`ragbus eval --dataset realdocs` as a user runs it, on a small sample: the real documents go
through the cleaner and indexer into a scratch home, the questions through the embedded pipeline,
and it prints issue 20's targets, the figures per kind and the failures, and writes the JSON
without touching the committed docs/eval_realdocs.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from shared.tools.eval import realdocs
from tests.support import REPO


def test_a_sampled_realdocs_run_reports_the_targets_and_the_failures(tmp_path):
    committed = REPO / "docs" / "eval_realdocs.json"
    before = committed.read_bytes() if committed.exists() else None
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGBUS_")}
    env.update({"RAGBUS_HOME": str(tmp_path / "home"), "COLUMNS": "250"})
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "shared.tools.cli", "eval", "--dataset", "realdocs", "--sample", "5",
                           "--show-failures", "--check", "--cache", str(tmp_path / "cache"), "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr
    results = json.loads(out.read_text())
    missed = realdocs.missed(results)
    assert proc.returncode == (1 if missed else 0), proc.stderr
    assert len(results["questions"]) == 5 and results["dataset"]["documents"] >= 15
    assert results["dataset"]["chunks"] > 100  # every document was cleaned and indexed
    for q in results["questions"]:
        assert q["status"] == "answered" and q["outcome"], q  # each question ran the whole loop
    printed = proc.stdout
    assert "### Targets (issue 20), real-text development set" in printed
    for _figure, what, op, bound in realdocs.TARGETS:
        assert f"| {what} | {op} {bound:g} | " in printed
    assert "### Per kind" in printed
    failed = [q for q in results["questions"] if not q["correct"]]
    assert f"### Failures ({len(failed)})" in printed
    for q in failed:
        assert f"**{q['id']}**" in printed
    assert (committed.read_bytes() if committed.exists() else None) == before
    assert not list((tmp_path / "cache").glob("ragbus-eval-*"))  # the scratch home is removed
