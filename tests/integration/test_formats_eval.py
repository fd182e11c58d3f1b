"""`ragbus eval --dataset formats` end to end on two files of the format set (issue 31): a PDF with a
table (a separate reader process, pages on the citations) and a CSV, each ingested through the real
cleaner and indexer into a scratch home, their plain texts into another, every question asked twice
through the embedded pipeline (offline reader); the report names the targets and the figures by
format and by where the answer lies, and the JSON goes where --out says (the committed
docs/eval_formats.json is untouched). The whole set runs by hand (docs/benchmarks.md)."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from shared.tools import cli
from shared.tools.eval import formats
from tests.support import REPO

pytestmark = pytest.mark.integration

FILES = ("bzip2-manual-memory.pdf", "debian.csv")
PER_FILE = 2


def _subset(root):
    """The set cut to FILES and their first PER_FILE questions, laid out as the set is."""
    for folder in ("documents", "plain"):
        (root / folder).mkdir(parents=True)
    manifest = json.loads((formats.ROOT / "manifest.json").read_text())
    manifest["documents"] = [d for d in manifest["documents"] if d["file"] in FILES]
    (root / "manifest.json").write_text(json.dumps(manifest))
    for name in FILES:
        shutil.copy(formats.ROOT / "documents" / name, root / "documents" / name)
        shutil.copy(formats.ROOT / "plain" / f"{name}.txt", root / "plain" / f"{name}.txt")
    rows = [json.loads(line) for line in (formats.ROOT / "questions.jsonl").read_text().splitlines() if line.strip()]
    kept = [r for name in FILES for r in [r for r in rows if r["file"] == name][:PER_FILE]]
    (root / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in kept) + "\n")
    return kept


def test_a_two_file_format_run_reports_pages_and_the_plain_text_ceiling(tmp_path, monkeypatch):
    kept = _subset(tmp_path / "set")
    monkeypatch.setattr(formats, "ROOT", tmp_path / "set")
    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))
    committed = REPO / "docs" / "eval_formats.json"
    before = committed.read_bytes() if committed.exists() else None
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli.app, ["eval", "--dataset", "formats", "--show-failures", "--cache",
                                          str(tmp_path / "cache"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["dataset"]["documents"] == 2 and results["dataset"]["chunks"] > 0
    assert results["dataset"]["plain_chunks"] > 0
    assert [q["id"] for q in results["questions"]] == [r["id"] for r in kept]
    for q in results["questions"]:
        assert q["answer"]["status"] == "answered" and q["plain_right"] is not None, q
        if q["right"]:  # a right answer cites its file at the named place
            assert any(formats.place_in_label(q["place"], label) for label in q["cited_places"]), q
    assert set(results["figures"]["by_format"]) == {"pdf", "csv"}
    assert [v["figure"] for v in results["figures"]["verdicts"]] == [t[0] for t in formats.TARGETS]
    printed = result.stdout
    assert "### Targets (issue 31)" in printed and "### By format" in printed and "### By where the answer lies" in printed
    failed = [q for q in results["questions"] if not q["right"]]
    assert f"### Failures ({len(failed)})" in printed
    assert (committed.read_bytes() if committed.exists() else None) == before
    assert not list((tmp_path / "cache").glob("ragbus-eval-*"))  # the scratch homes are removed
    bad = CliRunner().invoke(cli.app, ["eval", "--dataset", "formats", "--kind", "table_row"])
    assert bad.exit_code != 0 and "--kind do not apply to --dataset formats" in " ".join(bad.output.split())
