"""Deletes against every kind of neighbour (issue 35's own campaign): a delete of what was never
ingested, of a path that is gone, of one file or one subfolder beside others, of a folder whose
name prefixes another's, of the newest document kinds; and a delete racing `dead-letters retry
--all` or an ingest of DOCX and PDF files read in their sandbox. Each deletes exactly what it
names, says how many, and leaves the rest indexed once."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from tests.hostile import bad_files
from tests.hostile.crash import NOTHING, census, start_captured, wait_for, write_corpus
from tests.support import run_cli, topic_paragraphs

pytestmark = pytest.mark.hostile


def _deleted(proc: subprocess.CompletedProcess) -> int:
    return int(re.search(r"(\d+) document\(s\) deleted", proc.stdout).group(1))


def _files(folder, topic: str, n: int) -> None:
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"{topic}{i}.md").write_text(f"# {topic} {i}\n\n" + "\n\n".join(topic_paragraphs(f"{topic}{i}", 3, i)))


def _urls(home) -> set[str]:
    from shared.adapters.local.state import SqliteStateStore
    from shared.contract import state_collections
    return {d["url"].rsplit("/", 1)[1] for d in SqliteStateStore(home / "ragbus.db").list(state_collections.DOCUMENTS)}


def _while_running(home, args: tuple[str, ...], action):
    """``action()`` run while ``ragbus ARGS`` runs in the background: its result, and the command's output."""
    proc = start_captured(home, *args)
    try:
        result = action()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return result, out, err


def _found(home, query: str) -> list:
    return json.loads(run_cli(home, "search", query, "--json").stdout)


def test_deleting_a_file_that_was_never_ingested_deletes_nothing_else(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    _files(docs, "gabbro", 3)
    run_cli(home, "ingest", str(docs / "gabbro0.md"))
    run_cli(home, "ingest", str(docs / "gabbro1.md"))
    done = run_cli(home, "ingest", "--delete", str(docs / "gabbro2.md"), check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert _deleted(done) == 0
    assert _urls(home) == {"gabbro0.md", "gabbro1.md"} and census(home)["duplicates"] == 0


def test_deleting_a_path_that_never_existed_is_a_clear_error_and_keeps_the_rest(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    _files(docs, "dolerite", 2)
    run_cli(home, "ingest", str(docs))
    done = run_cli(home, "ingest", "--delete", str(tmp_path / "nowhere" / "x.md"), check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "nowhere/x.md was never ingested and does not exist" in done.stderr
    assert _urls(home) == {"dolerite0.md", "dolerite1.md"}


def test_a_file_ingested_then_removed_from_disk_can_still_be_deleted_by_its_path(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    _files(docs, "andesite", 2)
    run_cli(home, "ingest", str(docs))
    (docs / "andesite0.md").unlink()
    done = run_cli(home, "ingest", "--delete", str(docs / "andesite0.md"), check=False)
    assert done.returncode == 0 and _deleted(done) == 1, (done.stdout, done.stderr)
    assert _urls(home) == {"andesite1.md"}
    assert not any("andesite0" in json.dumps(hit) for hit in _found(home, "andesite0 report"))


def test_a_folder_whose_name_prefixes_anothers_is_deleted_alone(tmp_path):
    home = tmp_path / "home"
    _files(tmp_path / "notes", "tuff", 2)
    _files(tmp_path / "notes-archive", "pumice", 2)
    _files(tmp_path / "notes2", "scoria", 1)
    for folder in ("notes", "notes-archive", "notes2"):
        run_cli(home, "ingest", str(tmp_path / folder))
    done = run_cli(home, "ingest", "--delete", str(tmp_path / "notes"))
    assert _deleted(done) == 2
    assert _urls(home) == {"pumice0.md", "pumice1.md", "scoria0.md"}
    assert _found(home, "pumice0 report") and _found(home, "scoria0 report")


def test_a_subfolder_and_a_single_file_are_deleted_alone_and_come_back_when_ingested_again(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    _files(docs, "chert", 2)
    _files(docs / "sub", "flint", 2)
    run_cli(home, "ingest", str(docs))
    assert _deleted(run_cli(home, "ingest", "--delete", str(docs / "sub") + "/")) == 2
    assert _deleted(run_cli(home, "ingest", "--delete", str(docs / "chert0.md"))) == 1
    assert _urls(home) == {"chert1.md"}
    assert _deleted(run_cli(home, "ingest", "--delete", str(docs / "chert0.md"))) == 0  # twice: nothing more
    run_cli(home, "ingest", str(docs))
    assert _urls(home) == {"chert0.md", "chert1.md", "flint0.md", "flint1.md"}
    assert census(home)["duplicates"] == 0 and _found(home, "flint1 report")


NEW_KINDS = {
    "slate.docx": lambda: bad_files.docx(topic_paragraphs("slate", 3, seed=3)),
    "marble.pdf": lambda: bad_files.pdf([bad_files.text_page(*topic_paragraphs("marble", 1, seed=4)[0].split(". "))]),
    "quartz.csv": lambda: ("kind,note\n" + "".join(f"quartz{i},{p}\n" for i, p in enumerate(
        topic_paragraphs("quartz", 3, seed=5)))).encode(),
}


def test_documents_of_the_new_kinds_deleted_stay_deleted_and_come_back_when_ingested_again(tmp_path):
    # one home for the three kinds (it was one home and two ingests each): each deleted alone, the rest kept
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    for name, data in NEW_KINDS.items():
        (docs / name).write_bytes(data())
    _files(docs / "beside", "shale", 1)
    run_cli(home, "ingest", str(docs))
    kept = {*NEW_KINDS, "shale0.md"}
    assert _urls(home) == kept
    for name in NEW_KINDS:
        assert _deleted(run_cli(home, "ingest", "--delete", str(docs / name))) == 1, name
        kept.discard(name)
        assert _urls(home) == kept and census(home)["duplicates"] == 0, name
        assert not any(name in json.dumps(hit) for hit in _found(home, f"{name.split('.')[0]} report"))
    again = run_cli(home, "ingest", str(docs))
    assert "3 document(s) submitted" in again.stdout, again.stdout
    assert _urls(home) == {*NEW_KINDS, "shale0.md"}
    for name in NEW_KINDS:
        assert any(name in json.dumps(hit) for hit in _found(home, f"{name.split('.')[0]} report")), name


def test_a_delete_racing_a_retry_of_its_dead_letters_wins(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    write_corpus(docs, 12)
    first = run_cli(home, "ingest", str(docs), check=False, RAGBUS_MAX_CHUNKS_PER_DOCUMENT="1")
    assert "12 document(s) could not be processed" in first.stderr

    def delete_soon():
        time.sleep(0.3)
        return run_cli(home, "ingest", "--delete", str(docs), check=False)

    delete, _, err = _while_running(home, ("dead-letters", "retry", "--all"), delete_soon)
    assert delete.returncode == 0 and "Traceback" not in delete.stderr + err, (delete.stderr, err)
    assert census(home) == NOTHING
    # whatever the retry had taken before the delete, nothing it finishes later brings a document back
    again = run_cli(home, "dead-letters", "retry", "--all", check=False)
    assert "Traceback" not in again.stderr
    assert census(home) == NOTHING


def test_a_delete_racing_an_ingest_of_binary_documents_read_in_their_sandbox_wins(tmp_path):
    # DOCX and PDF are read in a separate bounded process: the delete lands while some are mid-read
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"slate{i}.docx").write_bytes(bad_files.docx(topic_paragraphs(f"slate{i}", 3, seed=i)))
        lines = topic_paragraphs(f"marble{i}", 1, seed=i)[0].split(". ")
        (docs / f"marble{i}.pdf").write_bytes(bad_files.pdf([bad_files.text_page(*lines)]))

    def delete_once_two_are_indexed():
        wait_for(lambda: (home / "ragbus.db").exists() and census(home)["documents"] >= 2)
        return run_cli(home, "ingest", "--delete", str(docs), check=False)

    delete, _, err = _while_running(home, ("ingest", str(docs)), delete_once_two_are_indexed)
    assert delete.returncode == 0 and "Traceback" not in delete.stderr + err, (delete.stderr, err)
    assert "still pending" not in delete.stderr + err
    assert census(home) == NOTHING
    again = run_cli(home, "ingest", str(docs))
    assert "24 document(s) submitted" in again.stdout, again.stdout
    assert census(home)["documents"] == 24 and census(home)["duplicates"] == 0

