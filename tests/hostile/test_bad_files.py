"""Bad files fail alone, nothing lost: each class of hostile file in a folder `ragbus ingest` reads
is refused (or cut) at a stated bound, named with its reason in the command's output and as a dead
letter, and the files beside it are indexed."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest

from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from tests.hostile import bad_files
from tests.support import run_cli

pytestmark = pytest.mark.hostile

DATA = Path(__file__).resolve().parents[1] / "data" / "formats"

# Neighbours: real text (the Debian Policy Manual, section 2.5) in two kinds of file
NOTES = ("# Priorities\n\nEach package must have a priority value, which is set in the metadata for the Debian "
         "archive and is also included in the package's control files. This information is used to control "
         "which packages are included in standard or minimal Debian installations.\n")
ROWS = ("priority,meaning\nrequired,Packages which are necessary for the proper functioning of the system.\n"
        "important,Important programs, including those which one would expect to find on any Unix-like system.\n"
        "standard,These packages provide a reasonably small but not too limited character-mode system.\n"
        "optional,This is the default priority for the majority of the archive.\n")


def _ingest_beside(tmp_path: Path, name: str, data: bytes, **env: str):
    folder = tmp_path / "folder"
    folder.mkdir(parents=True)
    (folder / "priorities.md").write_text(NOTES)
    (folder / "priorities.csv").write_text(ROWS)
    (folder / name).write_bytes(data)
    home = tmp_path / "home"
    done = run_cli(home, "ingest", str(folder), check=False, timeout=600, **env)
    state = SqliteStateStore(home / "ragbus.db")
    indexed = {Path(d["url"]).name: d for d in state.list(state_collections.DOCUMENTS)}
    letters = state.list(state_collections.DEAD_LETTERS)
    assert {"priorities.md", "priorities.csv"} <= set(indexed), (done.stdout, done.stderr)
    return done, indexed, letters


def _refused(tmp_path: Path, name: str, data: bytes, reason: str, **env: str) -> None:
    done, indexed, letters = _ingest_beside(tmp_path, name, data, **env)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert name not in indexed
    assert f"failed {tmp_path / 'folder' / name}: " in done.stderr and reason in done.stderr, done.stderr
    assert len(letters) == 1 and reason in letters[0]["error"] and name in letters[0]["error"]


def test_a_password_protected_pdf_is_refused_by_name(tmp_path):
    _refused(tmp_path, "locked.pdf", (DATA / "password-protected.pdf").read_bytes(), "encrypted (password-protected)")


def test_a_malformed_pdf_and_a_malformed_docx_are_refused(tmp_path):
    truncated = (DATA / "fontconfig-user.pdf").read_bytes()[:20_000]
    _refused(tmp_path, "truncated.pdf", truncated, "the PDF cannot be opened")
    _refused(tmp_path / "docx", "garbage.docx", b"PK\x03\x04 not really a zip", "not a valid zip container")


def test_a_pdf_decompression_bomb_is_stopped_at_the_memory_cap(tmp_path):
    # 600 MB of spaces behind 600 KB of Flate, read in a process capped at 256 MB
    _refused(tmp_path, "bomb.pdf", bad_files.decompression_bomb(600), "RAGBUS_PARSE_MEMORY_MB",
             RAGBUS_PARSE_MEMORY_MB="256")


def test_a_pdf_nesting_bomb_fails_alone(tmp_path):
    # PDFium stops at its own nesting limit: the page reads as empty, so the file has no text
    done, indexed, letters = _ingest_beside(tmp_path, "nested.pdf", bad_files.nesting_bomb(200_000))
    if "nested.pdf" in indexed:  # read past the nest: its one line of text is all there is
        return
    assert done.returncode == 1 and "failed" in done.stderr and "nested.pdf" in done.stderr, done.stderr
    assert len(letters) == 1


@pytest.mark.parametrize(("what", "reason", "env"), [
    ("entries", "zip entries, over the cap of 500 (RAGBUS_ZIP_MAX_ENTRIES)", {"RAGBUS_ZIP_MAX_ENTRIES": "500"}),
    ("ratio", "(RAGBUS_ZIP_MAX_RATIO): refused as a zip bomb", {}),
    ("total", "(RAGBUS_ZIP_MAX_MB): refused as a zip bomb", {"RAGBUS_ZIP_MAX_MB": "1"}),
])
def test_an_ooxml_zip_bomb_is_refused_before_any_parser_reads_it(tmp_path, what, reason, env):
    import os

    if what == "entries":
        extra = {f"customXml/item{n}.xml": b"<a/>" for n in range(600)}
    elif what == "ratio":
        extra = {"word/media/padding.bin": b"\0" * (50 * 1024 * 1024)}  # 50 MB of zeros in ~50 KB
    else:
        extra = {f"word/media/noise{n}.bin": os.urandom(600 * 1024) for n in range(2)}  # 1.2 MB, incompressible
    _refused(tmp_path, f"{what}.docx", bad_files.docx(["A harmless first paragraph."], extra_parts=extra), reason,
             **env)


def test_external_references_are_never_fetched_and_macros_never_run(tmp_path):
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"FETCHED-BY-THE-READER")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LOCAL-FILE")
    try:
        document = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<!DOCTYPE w:document [<!ENTITY local SYSTEM "{secret.as_uri()}"><!ENTITY remote SYSTEM "{base}/xxe">]>'
            '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
            "<w:body><w:p><w:r><w:t>Maintainer scripts must be idempotent: a second run after a failure "
            "must not break anything. If the first call failed, or aborted half way through, the second call should "
            "merely do the things that were left undone. &local; &remote;</w:t></w:r></w:p></w:body></w:document>").encode()
        relationships = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId9" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            f'attachedTemplate" Target="{base}/template.dotm" TargetMode="External"/>'
            f'<Relationship Id="rId8" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            f'image" Target="{base}/beacon.png" TargetMode="External"/></Relationships>').encode()
        macro = {"word/vbaProject.bin": b"Attribute VB_Name = \"ThisDocument\"\nSub AutoOpen()\nShell \"touch "
                 + str(tmp_path / "macro-ran").encode() + b"\"\nEnd Sub\n"}
        data = bad_files.docx([], document_xml=document, relationships=relationships, extra_parts=macro)
        done, indexed, letters = _ingest_beside(tmp_path, "linked.docx", data)
    finally:
        server.shutdown()
    assert hits == [], f"the reader fetched {hits}"
    assert not (tmp_path / "macro-ran").exists()
    assert "linked.docx" in indexed and done.returncode == 0, (done.stdout, done.stderr)
    search = run_cli(tmp_path / "home", "search", "maintainer scripts idempotent", "--json")
    assert "idempotent" in search.stdout and "TOP-SECRET" not in search.stdout and "FETCHED" not in search.stdout


def test_a_5000_page_pdf_is_cut_at_the_page_bound_and_says_so(tmp_path):
    done, indexed, letters = _ingest_beside(tmp_path, "register.pdf", bad_files.many_pages(5000),
                                            RAGBUS_MAX_PAGES="40")
    assert done.returncode == 0 and not letters, (done.stdout, done.stderr)
    record = indexed["register.pdf"]
    assert record["unread"] == 4960 and "RAGBUS_MAX_PAGES" in record["unread_reason"]
    assert f"partly read {(tmp_path / 'folder' / 'register.pdf').as_uri()}: 4960 page(s) not read" in done.stderr
    stats = run_cli(tmp_path / "home", "stats", "--json")
    assert '"unread": 4960' in stats.stdout


def test_a_file_slower_than_the_time_bound_is_stopped_and_refused(tmp_path):
    _refused(tmp_path, "slow.pdf", bad_files.many_pages(5000), "RAGBUS_PARSE_SECONDS",
             RAGBUS_PARSE_SECONDS="0.3", RAGBUS_MAX_PAGES="5000")
