"""`ragbus eval` as a user runs it, on a small fixed slice of fitz-gov (real embedder, real
index, the embedded runtime): it prints issue 11's targets with a verdict per provider,
lists providers that are not configured, writes the JSON, and `--check` exits 1 exactly
when a target is missed. Misconfiguration fails before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("fitz_gov", reason="fitz-gov is not installed: pip install fitz-gov==4.1.0")

from shared.tools.eval.runner import targets_missed  # noqa: E402
from shared.tools.eval.targets import TARGETS  # noqa: E402
from tests.support import REPO  # noqa: E402

PROVIDER_VARIABLES = ("RAGBUS_OPENAI_", "RAGBUS_GEMINI_", "GOOGLE_", "GEMINI_", "RAGBUS_LLM")


def _eval(tmp_path, *args: str, timeout: float = 600, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_VARIABLES)}
    env.update({"RAGBUS_HOME": str(tmp_path / "home"), "COLUMNS": "250", **extra})
    return subprocess.run([sys.executable, "-m", "shared.tools.cli", "eval", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_eval_on_a_slice_prints_the_targets_and_check_exits_on_a_miss(tmp_path):
    out = tmp_path / "results.json"
    proc = _eval(tmp_path, "--slice", "40", "--sample", "12", "--abstain-sample", "6", "--no-ablations",
                 "--check", "--cache", str(tmp_path / "cache"), "--out", str(out))
    assert "Traceback" not in proc.stdout + proc.stderr
    results = json.loads(out.read_text())
    missed = targets_missed(results)
    assert proc.returncode == (1 if missed else 0), proc.stderr
    if missed:
        assert "targets not met: " + missed[0] in " ".join(proc.stderr.split())

    targets = results["targets"]
    assert targets["reported_on"] == "heldout" and results["pipeline"]["sample"]["split"] == "heldout"
    local = targets["providers"]["local"]
    assert local["status"] == "ran" and (local["answerable"], local["abstain"]) == (12, 6)
    assert [row["figure"] for row in local["verdicts"]] == [t.figure for t in TARGETS]
    assert targets["providers"]["openai"]["status"] == "not configured (RAGBUS_OPENAI_BASE_URL is not set)"
    assert targets["providers"]["gemini"]["status"].startswith("not configured")
    assert set(results["split"]) >= {"rule", "calibration", "heldout", "pipeline_reported_on"}

    printed = proc.stdout
    assert "### Targets (issue 11), on the heldout split" in printed
    for target in TARGETS:
        assert f"| {target.what} | {target.goal} | " in printed
    assert "- openai: not configured" in printed
    # The existing keys keep their shape (docs/eval_results.json readers).
    assert {"dataset", "embedder", "machine", "retrieval", "pipeline", "calibration", "timings_s"} <= set(results)
    model = results["calibration"]["local_grade_model"]  # which fitted grader the figures are of
    assert model["file"] == "grade_model.json" and model["split"] == "calibration" and 0 < model["answerable_from"] < 1
    assert f"The local grader's score is the probability of `grade_model.json` (feature version {model['feature_version']}" \
        in printed


def test_a_sampled_run_leaves_the_committed_figures_alone(tmp_path):
    committed = (REPO / "docs" / "eval_results.json").read_bytes()
    proc = _eval(tmp_path, "--slice", "20", "--sample", "4", "--abstain-sample", "2", "--no-ablations",
                 "--cache", str(tmp_path / "cache"))
    assert proc.returncode == 0, proc.stderr
    assert (REPO / "docs" / "eval_results.json").read_bytes() == committed
    written = tmp_path / "cache" / "eval_results.json"
    assert json.loads(written.read_text())["pipeline"]["sample"]["split"] == "heldout"
    assert "wrote " + str(written) in " ".join(proc.stderr.split())


def test_a_provider_asked_for_but_not_configured_fails_before_any_work(tmp_path):
    proc = _eval(tmp_path, "--providers", "local,openai", "--cache", str(tmp_path / "cache"),
                 "--out", str(tmp_path / "r.json"), timeout=120)
    assert proc.returncode == 2
    assert "provider openai was asked for but cannot run: RAGBUS_OPENAI_BASE_URL is not set" in proc.stderr
    assert not (tmp_path / "cache").exists() and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(("args", "message"), [
    (("--split", "test"), "unknown split 'test'"),
    (("--providers", "ollama"), "unknown provider 'ollama'"),
    (("--provider-sample", "openai"), "PROVIDER=ANSWERABLE[/ABSTAIN]"),
])
def test_bad_options_are_clear_errors(tmp_path, args, message):
    proc = _eval(tmp_path, *args, "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "r.json"),
                 timeout=120)
    assert proc.returncode == 2 and message in " ".join(proc.stderr.split())
