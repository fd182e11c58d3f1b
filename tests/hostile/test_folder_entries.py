"""What a folder holds besides documents (issue 35, problems 7 and 17): a file whose name is not
UTF-8 fails alone and is named; a named pipe or a link to a device is counted as skipped with a
reason; the rest of the folder is ingested."""

from __future__ import annotations

import os

from tests.hostile.crash import census
from tests.support import run_cli, topic_paragraphs


def _good(folder, n: int = 2) -> None:
    for i in range(n):
        (folder / f"good{i}.md").write_text("\n\n".join(topic_paragraphs(f"basalt{i}", 3, seed=i)))


def test_a_file_whose_name_is_not_utf8_fails_alone_and_is_named(tmp_path):
    docs, home = tmp_path / "docs", tmp_path / "home"
    docs.mkdir()
    _good(docs)
    latin1 = os.path.join(os.fsencode(docs), b"latin1-\xe9t\xe9.txt")
    with open(latin1, "wb") as out:
        out.write(" ".join(topic_paragraphs("granite", 3)).encode())
    proc = run_cli(home, "ingest", str(docs), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "UnicodeEncodeError" not in proc.stderr and "surrogates" not in proc.stderr
    assert census(home)["documents"] == 2
    assert "2 document(s) submitted" in proc.stdout
    assert "skipped 1 .txt file(s): its name is not UTF-8" in proc.stdout
    assert r"latin1-\xe9t\xe9.txt" in proc.stderr  # named, its bytes shown safely


def test_a_file_named_alone_whose_name_is_not_utf8_is_refused_naming_it(tmp_path):
    home = tmp_path / "home"
    latin1 = os.path.join(os.fsencode(tmp_path), b"r\xe9sum\xe9.md")
    with open(latin1, "wb") as out:
        out.write(b"# R\n\n" + " ".join(topic_paragraphs("slate", 3)).encode())
    proc = run_cli(home, "ingest", os.fsdecode(latin1), check=False)
    assert proc.returncode == 2
    assert r"r\xe9sum\xe9.md" in proc.stderr and "not UTF-8" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_named_pipe_and_a_link_to_a_device_are_counted_as_skipped_with_the_reason(tmp_path):
    docs, home = tmp_path / "docs", tmp_path / "home"
    docs.mkdir()
    _good(docs)
    os.mkfifo(docs / "pipe.md")
    (docs / "zero.txt").symlink_to("/dev/zero")
    proc = run_cli(home, "ingest", str(docs), check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert census(home)["documents"] == 2
    assert "2 document(s) submitted, 2 skipped" in proc.stdout
    assert "skipped 1 .md file(s): not a regular file" in proc.stdout
    assert "skipped 1 .txt file(s): not a regular file" in proc.stdout
