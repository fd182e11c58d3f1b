"""Files of the registered kinds through `ragbus ingest` on the embedded runtime, as a user runs it:
a real PDF is indexed with every chunk's page, a search and an answer cite the page, a legacy
Office file is refused by name with the reason, and the neighbours are ingested."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import cli_json, run_cli

pytestmark = pytest.mark.integration

PDF = Path(__file__).resolve().parents[1] / "data" / "formats" / "fontconfig-user.pdf"


def test_a_pdf_is_ingested_cited_to_its_page_and_a_legacy_file_is_refused_by_name(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(PDF, folder / "fontconfig-user.pdf")
    (folder / "minutes.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 504)  # an OLE header
    home = tmp_path / "home"

    done = run_cli(home, "ingest", str(folder), timeout=600)
    assert "1 document(s) submitted, 1 skipped" in done.stdout, done.stdout
    assert "skipped 1 .doc file(s): a legacy binary Office file (OLE)" in done.stdout
    assert "save it as .docx" in done.stdout

    hits = cli_json(home, "search", "where is the per-user font configuration file", "--k", "3")
    assert hits and all(h["position"].startswith(("p. ", "pp. ")) for h in hits), hits
    assert hits[0]["url"].endswith("fontconfig-user.pdf")

    record = cli_json(home, "ask", "What is the conventional location for per-user font configuration?")
    cited = [c for c in record["citations"] if c["url"].split("#")[0].endswith("fontconfig-user.pdf")]
    assert cited, record
    citation = cited[0]
    page = citation["position"].split()[1].split(",")[0].split("–")[0]
    assert citation["position"].startswith(("p. ", "pp. ")) and citation["url"].endswith(f"#page={page}")
    shown = run_cli(home, "ask", "What is the conventional location for per-user font configuration?")
    assert f"({citation['position']})" in shown.stdout, shown.stdout
