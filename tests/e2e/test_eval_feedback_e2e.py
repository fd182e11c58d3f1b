"""`ragbus eval --from-feedback` and `ragbus eval --dataset <exported>` as a person runs them (issue 33),
on a home holding the sample articles (real stages, the offline model): two answers rated, one up and
one down with an expected answer, exported, then asked again from the file and from a folder; an
answer that was different when it was rated counts as changed, and `--check` exits 1 exactly when an
up-rated answer changed."""

from __future__ import annotations

import json

import pytest

from shared.corpus import CORPUS
from tests.support import run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def rated(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    run_cli(home, "ingest", str(CORPUS / "site" / "articles"))
    up = json.loads(run_cli(home, "ask", "What is BM25?", "--json").stdout)
    down = json.loads(run_cli(home, "ask", "What is reciprocal rank fusion?", "--json", check=False).stdout)
    run_cli(home, "feedback", up["id"], "up")
    run_cli(home, "feedback", down["id"][:12], "down", "--comment", "misses the k constant",
            "--expected", "rank fusion")
    return home, up, down


def test_the_export_round_trips_through_eval(rated, tmp_path):
    home, up, down = rated
    out = tmp_path / "feedback.jsonl"
    exported = run_cli(home, "eval", "--from-feedback", "--out", str(out))
    assert "wrote 2 rated queries (1 up, 1 down)" in " ".join(exported.stderr.split())
    cases = {case["id"]: case for case in map(json.loads, out.read_text().splitlines())}
    assert cases[up["id"]]["rating"] == "up" and cases[up["id"]]["answer"] == up["answer"]
    assert cases[up["id"]]["citations"] and cases[up["id"]]["outcome"] == up["outcome"]
    assert (cases[down["id"]]["rating"], cases[down["id"]]["comment"], cases[down["id"]]["expected"]) == (
        "down", "misses the k constant", "rank fusion")

    # the down-rated answer was something else when it was rated: asked again, it changes
    cases[down["id"]]["answer"] = "An older, wrong answer."
    out.write_text("".join(json.dumps(case) + "\n" for case in cases.values()))
    results_file = tmp_path / "results.json"
    asked = run_cli(home, "eval", "--dataset", str(out), "--out", str(results_file), "--check")
    report = " ".join(asked.stdout.split())
    assert "| down-rated answers that now change | 1 of 1 |" in report
    assert "| up-rated answers that stay the same | 1 of 1 |" in report
    results = json.loads(results_file.read_text())
    assert results["summary"]["up_same"] == 1 and results["summary"]["down_changed"] == 1
    assert {row["id"] for row in results["rows"]} == {up["id"], down["id"]}

    # a folder holding the export is a dataset too; an up-rated answer that differs is a regression
    folder = tmp_path / "export"
    folder.mkdir()
    cases[up["id"]]["answer"] = "What it said before."
    (folder / "feedback.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases.values()))
    regressed = run_cli(home, "eval", "--dataset", str(folder), "--out", str(tmp_path / "r2.json"), "--check",
                        check=False)
    assert regressed.returncode == 1, regressed.stderr
    assert f"up-rated answers that changed: {up['id']}" in " ".join(regressed.stderr.split())
    assert "| up-rated answers that stay the same | 0 of 1 |" in " ".join(regressed.stdout.split())


def test_an_export_with_nothing_rated_says_how_to_rate(tmp_path):
    home = tmp_path / "empty"
    out = tmp_path / "none.jsonl"
    said = run_cli(home, "eval", "--from-feedback", "--out", str(out))
    assert "wrote 0 rated queries" in said.stderr and "ragbus feedback ID up|down" in " ".join(said.stderr.split())
    assert out.read_text() == ""
    refused = run_cli(home, "eval", "--dataset", str(out), check=False)
    assert refused.returncode == 2 and "no rated cases" in refused.stderr
