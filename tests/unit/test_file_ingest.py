"""File ingestion (the local twin of GCS finalize/delete events) with fakes of the ports."""

from __future__ import annotations

import os

import pytest

from shared.contract import state_collections
from shared.contract.errors import InvalidInput
from shared.contract.ids import content_hash, file_document_id
from shared.contract.messages import DocumentDeleted, decode, encode
from shared.ingest import processed_items
from shared.ingest.files import IngestReport, delete_path, ingest_path
from tests.fakes import FakeClock, InMemoryBlobStore, InMemoryStateStore, RecordingPublisher
from tests.support import cpu_ratio


@pytest.fixture
def ports():
    return {
        "state": InMemoryStateStore(),
        "blobs": InMemoryBlobStore(),
        "publisher": RecordingPublisher(),
        "clock": FakeClock(),
    }


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "notes.md").write_text("# Notes\n\nVolcanoes.")
    (root / "plain.TXT").write_text("Saxophones.")
    (root / "sub" / "page.html").write_text("<html><body><p>Glaciers.</p></body></html>")
    (root / "sub" / "old.htm").write_bytes("<p>Caf\xe9</p>".encode("latin-1"))
    (root / "sub" / "readme.markdown").write_text("Satellites.")
    (root / "image.png").write_bytes(b"\x89PNG")
    (root / ".hidden.md").write_text("secret")
    (root / ".git" / "HEAD.txt").write_text("ref")
    return root


def test_a_directory_is_ingested_recursively(ports, docs):
    published = ingest_path(docs, **ports)
    names = sorted(m.guid.rsplit("/", 1)[-1] for m in published)
    assert names == ["notes.md", "old.htm", "page.html", "plain.TXT", "readme.markdown"]
    assert ports["publisher"].messages == published
    by_name = {m.guid.rsplit("/", 1)[-1]: m for m in published}
    page = by_name["page.html"]
    path = (docs / "sub" / "page.html").resolve()
    assert page.document_id == file_document_id(str(path))
    assert (page.source, page.origin, page.guid, page.url, page.fallback_title) == (
        "file",
        str(path.parent),
        str(path),
        "file://" + str(path),
        "page",
    )
    assert page.content_type == "text/html" and page.content_hash == content_hash(path.read_bytes())
    assert ports["blobs"].get(page.raw_ref) == path.read_bytes()
    assert page.raw_ref == f"mem:raw/{page.document_id}/{page.content_hash}"
    assert by_name["notes.md"].content_type == "text/markdown"
    assert by_name["readme.markdown"].content_type == "text/markdown"
    assert by_name["plain.TXT"].content_type == "text/plain"
    # bytes pass through untouched, whatever their encoding
    assert ports["blobs"].get(by_name["old.htm"].raw_ref) == "<p>Caf\xe9</p>".encode("latin-1")
    record = ports["state"].get(state_collections.PROCESSED_ITEMS, page.document_id)
    assert record["status"] == "published" and record["path"] == str(path)


def test_ingesting_twice_publishes_nothing_new(ports, docs):
    ingest_path(docs, **ports)
    assert ingest_path(docs, **ports) == []
    assert len(ports["publisher"].messages) == 5


def test_a_changed_file_is_republished_under_the_same_id(ports, docs):
    first = {m.guid: m for m in ingest_path(docs, **ports)}
    (docs / "notes.md").write_text("# Notes\n\nVolcanoes, revised.")
    (changed,) = ingest_path(docs, **ports)
    before = first[str((docs / "notes.md").resolve())]
    assert changed.document_id == before.document_id and changed.content_hash != before.content_hash


def test_a_single_file(ports, docs):
    (message,) = ingest_path(docs / "notes.md", **ports)
    assert (message.title, message.fallback_title) == ("", "notes")


def test_an_empty_file_is_published_for_the_cleaner_to_judge(ports, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    (message,) = ingest_path(empty, **ports)
    assert ports["blobs"].get(message.raw_ref) == b""


@pytest.mark.parametrize("name", ["slides.key", "image.png", "noext"])
def test_unsupported_files_are_refused_naming_path_and_suffixes(ports, tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x00x")  # binary: a name without a suffix is read when it starts as text
    with pytest.raises(InvalidInput) as caught:
        ingest_path(path, **ports)
    assert str(path) in str(caught.value) and ".html, .htm, .md, .markdown, .txt" in str(
        caught.value
    )


def test_missing_paths_are_refused(ports, tmp_path):
    with pytest.raises(InvalidInput, match=r"missing\.pdf does not exist.*\.html"):
        ingest_path(tmp_path / "missing.pdf", **ports)


def test_a_directory_without_supported_files_is_refused(ports, tmp_path):
    (tmp_path / "a.png").write_bytes(b"\x89PNG")
    with pytest.raises(InvalidInput, match="contains no supported file"):
        ingest_path(tmp_path, **ports)


def test_an_oversized_file_is_refused_alone_and_skipped_in_a_directory(ports, docs):
    (docs / "huge.txt").write_bytes(b"x" * 5000)
    with pytest.raises(InvalidInput, match="5000 bytes, over the 4096-byte cap"):
        ingest_path(docs / "huge.txt", max_bytes=4096, **ports)
    published = ingest_path(docs, max_bytes=4096, **ports)
    assert len(published) == 5 and not any(m.guid.endswith("huge.txt") for m in published)


def test_a_crash_between_claim_and_publish_is_repaired_by_the_next_run(ports, docs):
    class Crash(BaseException):
        pass

    class Crashing(RecordingPublisher):
        def publish(self, message, attributes=None):
            if len(self.messages) == 2:
                raise Crash()
            return super().publish(message, attributes)

    crashing = Crashing()
    with pytest.raises(Crash):
        ingest_path(docs, **{**ports, "publisher": crashing})
    assert len(crashing.messages) == 2
    again = ingest_path(docs, **ports)
    assert len(again) == 3  # the claimed-but-unsent file and the two never reached


def test_delete_a_file_even_when_it_is_gone(ports, docs):
    ingest_path(docs, **ports)
    target = docs / "plain.TXT"
    target.unlink()
    deleted = delete_path(
        target, state=ports["state"], publisher=ports["publisher"], clock=ports["clock"]
    )
    assert deleted == [file_document_id(str(target.resolve()))]
    (message,) = ports["publisher"].of_type(DocumentDeleted)
    assert message.document_id == deleted[0] and message.reason == "file deleted"
    # its record is a tombstone now: deletes win (no earlier ingest or retry brings it back)
    assert processed_items.is_tombstone(ports["state"].get(state_collections.PROCESSED_ITEMS, deleted[0]))
    assert len(processed_items.records(ports["state"], {})) == 4


def test_delete_a_directory_deletes_every_file_ingested_under_it(ports, docs):
    ingest_path(docs, **ports)
    deleted = delete_path(
        docs / "sub", state=ports["state"], publisher=ports["publisher"], clock=ports["clock"]
    )
    assert len(deleted) == 3
    remaining = {r["path"] for r in processed_items.records(ports["state"], {})}
    assert remaining == {str((docs / "notes.md").resolve()), str((docs / "plain.TXT").resolve())}
    # a sibling whose name merely starts the same is untouched
    sibling = docs / "sub2"
    sibling.mkdir()
    (sibling / "x.txt").write_text("x")
    ingest_path(sibling, **ports)
    assert (
        delete_path(
            docs / "sub", state=ports["state"], publisher=ports["publisher"], clock=ports["clock"]
        )
        == []
    )


def test_deleted_then_recreated_file_is_ingested_again(ports, docs):
    ingest_path(docs / "notes.md", **ports)
    delete_path(
        docs / "notes.md", state=ports["state"], publisher=ports["publisher"], clock=ports["clock"]
    )
    assert len(ingest_path(docs / "notes.md", **ports)) == 1


def test_deleting_what_was_never_there_is_refused(ports, tmp_path):
    with pytest.raises(InvalidInput, match="never ingested and does not exist"):
        delete_path(
            tmp_path / "nope.md",
            state=ports["state"],
            publisher=ports["publisher"],
            clock=ports["clock"],
        )


def test_messages_survive_the_wire(ports, docs):
    for message in ingest_path(docs, **ports):
        assert decode(*encode(message)) == message


def test_a_dangling_or_looping_symlink_is_named_as_one_not_as_missing(ports, tmp_path):
    (tmp_path / "dangling.md").symlink_to(tmp_path / "gone.md")
    (tmp_path / "loop-a.md").symlink_to(tmp_path / "loop-b.md")
    (tmp_path / "loop-b.md").symlink_to(tmp_path / "loop-a.md")
    with pytest.raises(InvalidInput, match=r"dangling\.md is a symlink to .*gone\.md, which does not exist"):
        ingest_path(tmp_path / "dangling.md", **ports)
    with pytest.raises(InvalidInput, match=r"loop-a\.md is a symlink to .*loop-b\.md, and the symlinks loop"):
        ingest_path(tmp_path / "loop-a.md", **ports)


def test_a_folder_says_which_symlinks_named_like_documents_lead_nowhere(ports, docs, caplog):
    (docs / "dangling.md").symlink_to(docs / "gone.md")
    (docs / "loop-a.txt").symlink_to(docs / "loop-b.txt")
    (docs / "loop-b.txt").symlink_to(docs / "loop-a.txt")
    (docs / "elsewhere").symlink_to(docs / "nowhere")  # not named like a document: no word about it
    with caplog.at_level("WARNING", logger="ragbus.file_ingest"):
        published = ingest_path(docs, **ports)
    assert len(published) == 5
    warned = [r.getMessage() for r in caplog.records]
    assert any("dangling.md: it is a symlink to" in w and "which does not exist" in w for w in warned)
    assert sum("and the symlinks loop" in w for w in warned) == 2
    assert not any("elsewhere" in w for w in warned)


@pytest.mark.timeout(30)  # before the fix, reading the pipe waited for a writer forever
def test_a_named_pipe_named_like_a_document_is_refused_not_read(ports, tmp_path):
    import os

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match=r"pipe\.txt is not a regular file"):
        ingest_path(fifo, **ports)
    assert ports["publisher"].messages == []


def test_a_folder_report_counts_what_was_taken_skipped_and_unchanged(ports, docs):
    import gzip

    from shared.ingest.files import UNSUPPORTED, IngestReport

    (docs / "guide.rst").write_text("Guide\n=====\n\nGlaciers move.\n")
    (docs / "changelog.md.gz").write_bytes(gzip.compress(b"# Changes\n\nComets."))
    (docs / "conf.py.gz").write_bytes(gzip.compress(b"x = 1"))
    (docs / "broken.txt.gz").write_bytes(b"not gzip at all")
    first = IngestReport()
    published = ingest_path(docs, **ports, report=first)
    by_name = {m.guid.rsplit("/", 1)[-1]: m for m in published}
    assert by_name["guide.rst"].content_type == "text/x-rst"
    compressed = by_name["changelog.md.gz"]
    # the document is what is inside: its bytes, its type, its name without either suffix
    assert compressed.content_type == "text/markdown" and compressed.fallback_title == "changelog"
    assert ports["blobs"].get(compressed.raw_ref) == b"# Changes\n\nComets."
    assert first.published == published and first.unchanged == 0
    assert first.skipped == {(UNSUPPORTED, ".png"): 1, (UNSUPPORTED, ".py.gz"): 1, ("not valid gzip", ".txt.gz"): 1}

    again = IngestReport()
    assert ingest_path(docs, **ports, report=again) == []
    assert again.unchanged == len(published) and again.skipped == first.skipped


def test_a_compressed_document_is_read_no_further_than_the_cap(ports, tmp_path):
    import gzip

    bomb = tmp_path / "bomb.txt.gz"
    bomb.write_bytes(gzip.compress(b"a" * 100_000))
    assert bomb.stat().st_size < 1_000
    with pytest.raises(InvalidInput, match="expands to over the 10000-byte cap"):
        ingest_path(bomb, **ports, max_bytes=10_000)


def test_a_symlink_named_like_a_document_to_another_kind_of_file_is_reported_as_such(ports, tmp_path):
    # `shadow.md -> /etc/shadow` was counted as "skipped 1 .md file(s): not a document type ragbus reads"
    root = tmp_path / "docs"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n\nVolcanoes.")
    # inside the folder, not hidden (a link leaving it, or to a hidden file, is skipped before its target's kind is
    # looked at)
    (root / "store").mkdir()
    (root / "store" / "secrets.dat").write_text("not a document")
    (root / "shadow.md").symlink_to(root / "store" / "secrets.dat")
    report = IngestReport()
    published = ingest_path(root, report=report, **ports)
    assert len(published) == 1
    assert report.skipped == {("a symlink to a file of a type ragbus does not read", ".md"): 1,
                              ("not a document type ragbus reads", ".dat"): 1}


def test_a_symlink_in_a_folder_leading_outside_it_is_skipped_by_name_and_read_when_named(ports, tmp_path, caplog):
    """`ragbus ingest ./docs` read /etc/passwd through `docs/passwd.txt -> /etc/passwd` (newcomer19): a link whose
    target is outside the folder is skipped with a warning naming both; a link to a file inside the folder is read,
    and the target named by its own path (or the link named alone) is read as asked."""
    from shared.ingest.files import LEAVES_FOLDER

    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "accounts.txt").write_text("The vault code is 4411.\n")
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "notes.md").write_text("# Notes\n\nHerons nest in colonies.\n")
    (root / "accounts.txt").symlink_to(outside / "accounts.txt")
    (root / "sub" / "again.md").symlink_to(root / "notes.md")  # inside: the same document, read once
    report = IngestReport()
    with caplog.at_level("WARNING"):
        published = ingest_path(root, report=report, **ports)
    assert [m.guid for m in published] == [str((root / "notes.md").resolve())]
    assert report.skipped == {(LEAVES_FOLDER, ".txt"): 1}, report.skipped
    assert any("accounts.txt: it is a symlink to" in r.getMessage() and str(outside / "accounts.txt")
               in r.getMessage() for r in caplog.records)
    assert [m.guid for m in ingest_path(root / "accounts.txt", **ports)] == [str((outside / "accounts.txt").resolve())]


def test_files_without_a_type_s_suffix_are_plain_text_when_they_start_as_text(ports, tmp_path):
    # as Debian ships /usr/share/doc: README, changelog.Debian.gz, v2.30-ReleaseNotes.gz (issue 31)
    import gzip

    from shared.ingest.files import UNSUPPORTED, IngestReport

    (tmp_path / "README.Debian").write_text("Periodic fstrim for SSD disks\n-----------------------------\n")
    (tmp_path / "changelog.Debian.gz").write_bytes(gzip.compress(b"util-linux (2.38.1-5) unstable; urgency=medium\n"))
    (tmp_path / "v2.30-ReleaseNotes.gz").write_bytes(gzip.compress(b"Release notes for util-linux 2.30\n"))
    (tmp_path / "v2.31-ReleaseNotes.gz").write_bytes(b"\x1f\x8b broken")
    (tmp_path / "v2.32-ReleaseNotes.gz").write_bytes(b"\x1f\x8b broken too")
    (tmp_path / "blob").write_bytes(b"\x00\x01\x02 binary")
    report = IngestReport()
    published = {m.guid.rsplit("/", 1)[-1]: m for m in ingest_path(tmp_path, **ports, report=report)}
    assert set(published) == {"README.Debian", "changelog.Debian.gz", "v2.30-ReleaseNotes.gz"}
    assert {m.content_type for m in published.values()} == {"text/plain"}
    assert published["v2.30-ReleaseNotes.gz"].fallback_title == "v2.30-ReleaseNotes"
    assert published["README.Debian"].fallback_title == "README.Debian"
    # grouped by the real suffix, not ".31-releasenotes.gz" and ".32-releasenotes.gz" apart; gzip's signature then
    # damage is named as damaged gzip
    assert report.skipped == {("not valid gzip", ".gz"): 2, (UNSUPPORTED, "(none)"): 1}


def _private_beside_docs(tmp_path, secret: str):
    """A folder ``private`` holding the file ``secret`` ("The vault code is 4411."), beside the folder ``docs`` to be
    ingested, holding notes.md: where a link inside ``docs`` may lead out. Returns (private, docs)."""
    outside, root = tmp_path / "private", tmp_path / "docs"
    outside.mkdir()
    (outside / secret).write_text("The vault code is 4411.\n")
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n\nHerons nest in colonies.\n")
    return outside, root


def test_a_symlink_to_a_folder_is_counted_and_named_and_a_link_swapped_in_after_the_walk_is_not_read(
        ports, tmp_path, caplog, monkeypatch):
    """A link to a folder was left out without a word (os.walk lists it but does not enter it); and a file the
    walk found inside the folder, swapped for a link leading out before it was read, was read through it."""
    import shared.ingest.files as files
    from shared.ingest.files import FOLDER, FOLDER_LINK, LEAVES_FOLDER

    outside, root = _private_beside_docs(tmp_path, "keys.txt")
    (root / "late.txt").write_text("Kites glide.\n")
    (root / "shared").symlink_to(outside)
    walked = files._supported_files

    def walk_then_swap(directory, report, *rest):
        found = walked(directory, report, *rest)
        (root / "late.txt").unlink()
        (root / "late.txt").symlink_to(outside / "keys.txt")
        return found

    monkeypatch.setattr(files, "_supported_files", walk_then_swap)
    report = IngestReport()
    with caplog.at_level("WARNING"):
        published = ingest_path(root, report=report, **ports)
    assert [m.guid for m in published] == [str((root / "notes.md").resolve())]
    assert report.skipped == {(FOLDER_LINK, FOLDER): 1, (LEAVES_FOLDER, ".txt"): 1}, report.skipped
    assert any(f"shared: it is a symlink to the folder {outside.resolve()}" in r.getMessage() for r in caplog.records)


def test_a_cut_short_gzip_without_a_type_s_suffix_is_named_as_damaged_gzip(ports, tmp_path):
    """A changelog.Debian.gz cut short (a partial copy) whose text up to the cut is shorter than the sniff
    was skipped as "not a document type ragbus reads": the stream ended before 8 KB of it could be read.
    What it starts with is text, so it is named for what is wrong with it."""
    import gzip

    from shared.ingest.files import IngestReport

    whole = gzip.compress("".join(f"util-linux (2.38.1-{n}) unstable; urgency=medium\n  * Fix {n}.\n"
                                  for n in range(150)).encode())
    (tmp_path / "changelog.Debian.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "README").write_text("util-linux for Debian\n")
    report = IngestReport()
    ingest_path(tmp_path, **ports, report=report)
    assert report.skipped == {("not valid gzip", ".gz"): 1}, report.skipped
    with pytest.raises(InvalidInput, match="changelog.Debian.gz is not valid gzip"):
        ingest_path(tmp_path / "changelog.Debian.gz", **ports)


def test_a_gzip_file_cut_short_says_so_in_words_and_fails_alone(ports, tmp_path):
    """A truncated .gz was skipped as "not valid gzip (Compressed file ended before the end-of-stream marker was
    reached)", and one cut inside its first block, without a type's suffix (NEWS.gz), as "not a document type ragbus
    reads": both now say the file is cut short, by name, and the folder's other file is read."""
    import gzip

    from shared.ingest.files import IngestReport

    whole = gzip.compress(" ".join(f"Release {n} fixed the pump's valve." for n in range(400)).encode())
    (tmp_path / "NEWS.gz").write_bytes(whole[:12])
    (tmp_path / "notes.txt.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "other.txt").write_text("The valve opens at 2 bar.\n")
    report = IngestReport()
    assert len(ingest_path(tmp_path, **ports, report=report)) == 1
    assert report.skipped == {("not valid gzip", ".gz"): 1, ("not valid gzip", ".txt.gz"): 1}, report.skipped
    for name in ("NEWS.gz", "notes.txt.gz"):
        with pytest.raises(InvalidInput, match=rf"{name} is not valid gzip \(it is cut short: .*copy it again\)"):
            ingest_path(tmp_path / name, **ports)


def test_a_gzip_file_compressed_twice_is_named_as_such(ports, tmp_path):
    """notes.txt.gz holding gzip again went to the cleaner and came back as "binary data (it contains NUL
    bytes)", which names no cause; now it is skipped as compressed twice, and the folder's other file is read."""
    import gzip

    from shared.ingest.files import IngestReport

    (tmp_path / "notes.txt.gz").write_bytes(gzip.compress(gzip.compress(b"The pump runs at 40 litres a minute.\n")))
    (tmp_path / "other.txt").write_text("The valve opens at 2 bar.\n")
    report = IngestReport()
    ingest_path(tmp_path, **ports, report=report)
    assert report.skipped == {("compressed twice", ".txt.gz"): 1}, report.skipped
    with pytest.raises(InvalidInput, match="notes.txt.gz holds another gzip stream .it was compressed twice."):
        ingest_path(tmp_path / "notes.txt.gz", **ports)


def test_gzip_members_followed_by_bytes_that_are_not_gzip_are_read_as_gzip_d_reads_them(ports, tmp_path):
    """Two members then bytes that start no third (padding, a download's tail): gzip -d writes both members'
    text and says "trailing garbage ignored"; the file was skipped whole as "not valid gzip" (newcomer15).
    Bytes that are not gzip from the start are still refused."""
    import gzip

    from shared.ingest.files import IngestReport

    (tmp_path / "notes.txt.gz").write_bytes(gzip.compress(b"The pump runs at 40 litres a minute.\n")
                                            + gzip.compress(b"The valve opens at 2 bar.\n") + b"tail\x01\x02")
    (tmp_path / "junk.txt.gz").write_bytes(b"tail" * 10)
    report = IngestReport()
    (message,) = ingest_path(tmp_path, **ports, report=report)
    assert report.skipped == {("not valid gzip", ".txt.gz"): 1}, report.skipped
    assert ports["blobs"].get(message.raw_ref) == b"The pump runs at 40 litres a minute.\nThe valve opens at 2 bar.\n"


def test_a_gzip_file_is_read_in_time_in_proportion_to_what_it_holds(tmp_path):
    """Each piece read was appended to bytes, which copied all read so far: a 19.9 MB .gz took 1.1 s of CPU, not
    0.12 s. Sixteen times as many members (read a member's piece at a time) must cost about sixteen times as much,
    not 256 (the least of five tries each, in the thread's CPU time; here 12-16 after, 85-92 before)."""
    import gzip

    from shared.ingest.files import _decompressed

    member = gzip.compress(b"The pump runs at forty litres a minute. " * 200)
    for members in (50, 800):
        (tmp_path / f"{members}.txt.gz").write_bytes(member * members)

    def check(members: int, data: bytes) -> None:
        assert data == gzip.decompress(member) * members and isinstance(data, bytes)

    assert cpu_ratio(lambda members: _decompressed(tmp_path / f"{members}.txt.gz", 50_000_000, ""), 50, 800,
                     tries=5, check=check) < 40


def test_a_file_s_date_is_its_modification_time(ports, tmp_path):
    import os

    note = tmp_path / "note.txt"
    note.write_text("A note.")
    os.utime(note, (1_767_225_600, 1_767_225_600))  # 2026-01-01T00:00:00Z
    (message,) = ingest_path(note, **ports)
    assert message.published == "2026-01-01T00:00:00+00:00"


def test_a_symlink_without_a_suffix_is_never_read_as_text(ports, tmp_path):
    # `notes -> /etc/shadow`: the target is text, but only a file reached directly is sniffed
    root = tmp_path / "docs"
    root.mkdir()
    (root / "README").write_text("Read me first.")
    (tmp_path / "secrets").write_text("root:$6$hash:19000:0:99999:7:::")
    (root / "notes").symlink_to(tmp_path / "secrets")
    published = ingest_path(root, **ports)
    assert [m.guid.rsplit("/", 1)[-1] for m in published] == ["README"]
    with pytest.raises(InvalidInput):
        ingest_path(root / "notes", **ports)


def test_a_man_page_s_roff_source_is_named_as_such_with_how_to_render_it(ports, tmp_path):
    # /usr/share/man/man1/timeout.1.gz was skipped as "not a document type ragbus reads" (newcomer17):
    # the skip now says what the file is and how to make it a document ragbus reads
    import gzip

    from shared.ingest.files import MAN_PAGE, UNSUPPORTED, IngestReport

    page = b'.\\" a comment\n.TH TIMEOUT "1" "September 2022"\n.SH NAME\ntimeout \\- run a command with a time limit\n'
    (tmp_path / "timeout.1.gz").write_bytes(gzip.compress(page))
    (tmp_path / "openssl-ciphers.1ssl").write_bytes(page)
    (tmp_path / "data.1.gz").write_bytes(gzip.compress(b"\x00\x01 not roff"))
    (tmp_path / "notes.md").write_text("# Notes\n\nRivers.\n")
    report = IngestReport()
    assert len(ingest_path(tmp_path, **ports, report=report)) == 1
    assert report.skipped == {(MAN_PAGE, ".1.gz"): 1, (MAN_PAGE, ".1ssl"): 1, (UNSUPPORTED, ".1.gz"): 1}
    with pytest.raises(InvalidInput, match=r"timeout\.1\.gz is a man page's roff source.*man -l FILE"):
        ingest_path(tmp_path / "timeout.1.gz", **ports)


def test_a_named_pipe_or_a_symlink_named_like_a_man_page_is_never_opened(ports, tmp_path):
    # `pipe.1` was opened to look for a roff page's first line: the ingest waited for a writer forever
    import os
    import threading

    from shared.ingest.files import NOT_REGULAR, UNSUPPORTED, IngestReport

    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.txt").write_text("Herons nest in colonies.\n")
    fifo = root / "x.1"
    os.mkfifo(fifo)
    (tmp_path / "page.1").write_text('.TH PAGE "1"\n.SH NAME\npage \\- a page\n')
    (root / "y.1").symlink_to(tmp_path / "page.1")  # a man page's source, but never read through the link
    report, outcome = IngestReport(), {}

    def ingest() -> None:
        outcome["folder"] = ingest_path(root, **ports, report=report)
        with pytest.raises(InvalidInput, match=r"x\.1 has an unsupported suffix '\.1'"):
            ingest_path(fifo, **ports)
        outcome["alone"] = True

    worker = threading.Thread(target=ingest, daemon=True)
    worker.start()
    worker.join(timeout=20)
    # on failure every open waiting on the pipe is let go (the folder's ingest and then x.1's alone), not only the
    # first: the second left a thread blocked on the pipe for the rest of the run
    assert not _release_pipe_readers([fifo], worker), "ingesting a folder holding a named pipe x.1 waited on the pipe"
    assert [m.guid.rsplit("/", 1)[-1] for m in outcome["folder"]] == ["a.txt"]
    assert outcome.get("alone")
    assert report.skipped == {(NOT_REGULAR, ".1"): 1, (UNSUPPORTED, ".1"): 1}  # the pipe as pipe.txt is, the link


def _release_pipe_readers(pipes, worker, seconds: float = 5.0) -> bool:
    """Whether ``worker`` was still running; if so, open the writing end of each of ``pipes`` again and again until it
    ends (at most ``seconds``): every open waiting on a pipe returns, and reads its end at once, so a failing test
    leaves no thread blocked on a pipe."""
    import os
    import time

    if not worker.is_alive():
        return False
    deadline = time.monotonic() + seconds
    while worker.is_alive() and time.monotonic() < deadline:
        for pipe in pipes:
            try:
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # ENXIO: no reader waits on it now
                pass
        worker.join(0.05)
    return True


def test_a_file_swapped_for_a_named_pipe_after_its_check_is_not_waited_on(tmp_path, monkeypatch):
    # a file was checked (is_file) and then opened: one swapped for a named pipe between the two waited for a
    # writer forever. What is opened is now what is checked (opened without waiting, then fstat)
    import os
    import threading
    from pathlib import Path

    from shared.ingest import files

    page, plain = tmp_path / "swapped.1", tmp_path / "README"
    for pipe in (page, plain):
        os.mkfifo(pipe)
    monkeypatch.setattr(Path, "is_file", lambda self: True)  # each was still a regular file when it was checked
    outcome = {}

    def check() -> None:
        outcome["man page?"] = files.unsupported_reason(page)
        outcome["text?"] = files._starts_as_text(plain, False)
        outcome["opened"] = files._open_regular(page)

    worker = threading.Thread(target=check, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not _release_pipe_readers([page, plain], worker), "a named pipe was opened and waited on"
    assert outcome == {"man page?": files.NOT_REGULAR, "text?": False, "opened": None}


def test_a_document_swapped_for_a_named_pipe_after_its_stat_is_not_waited_on(tmp_path, monkeypatch, ports):
    # the document was looked at (stat: a regular file) and then read by its name: one swapped for a named pipe
    # between the two waited for a writer forever. It is now opened once without waiting and that open is checked
    import os
    import stat
    import threading
    from pathlib import Path

    notes = tmp_path / "notes.txt"
    os.mkfifo(notes)
    regular = os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, 5, 0, 0, 0))
    real_stat = Path.stat
    monkeypatch.setattr(Path, "stat", lambda self, **kw: regular if self == notes else real_stat(self, **kw))
    outcome = {}

    def ingest() -> None:
        with pytest.raises(InvalidInput, match=r"notes\.txt is not a regular file") as refused:
            ingest_path(notes, **ports)
        outcome["refused"] = str(refused.value)

    worker = threading.Thread(target=ingest, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not _release_pipe_readers([notes], worker), "a document swapped for a named pipe was read and waited on"
    assert "refused" in outcome and ports["publisher"].messages == []


def test_a_link_leaving_the_folder_is_named_with_its_control_characters_escaped_not_dropped(ports, tmp_path, caplog):
    """The warning for a link leading out of the folder went through the log's terminal-safe text, which dropped
    what a terminal obeys: 'bell<BEL><ESC>]0;title<BEL>.txt -> keys<ESC>[2J.txt' was named 'bell.txt', a link that
    does not exist, to 'keys.txt', and a link to a folder named 'tab<TAB>here' printed its tab raw. Written as
    escapes (as a failed file's name is), the names are the real ones and nothing a terminal obeys is printed."""
    from shared.observability.logs import TextFormatter

    outside, root = _private_beside_docs(tmp_path, "keys\x1b[2J.txt")
    (root / "bell\x07\x1b]0;title\x07.txt").symlink_to(outside / "keys\x1b[2J.txt")
    (root / "tab\there").symlink_to(outside)
    with caplog.at_level("WARNING", logger="ragbus.file_ingest"):
        ingest_path(root, **ports)
    shown = "\n".join(TextFormatter(tracebacks=False).format(r) for r in caplog.records)
    assert "bell\\x07\\x1b]0;title\\x07.txt: it is a symlink to " in shown, shown
    assert "keys\\x1b[2J.txt, outside " in shown, shown
    assert "tab\\x09here: it is a symlink to the folder " in shown, shown
    assert not any(c in shown for c in "\x07\x1b\t"), shown



def test_a_link_to_a_folder_is_advised_to_be_ingested_by_name_only_when_this_ingest_does_not_read_it(
        ports, tmp_path, caplog):
    """Every link to a folder was skipped with "ingest that folder by its own path to read it", a link to a folder
    the same ingest reads (docs/alias -> docs/sub) too: its files were read already, and ingesting it again read
    them twice over. Now that one is counted apart, said to be read there; the advice is kept for a link leading
    out (or to a hidden folder), and following it reads that folder, each document named by its target's path."""
    from shared.ingest.files import FOLDER, FOLDER_LINK, FOLDER_LINK_INSIDE

    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "keys.txt").write_text("Kestrels hover over verges.\n")
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / ".store").mkdir()
    (root / "sub" / "page.md").write_text("# Page\n\nHerons nest in colonies.\n")
    (root / ".store" / "kept.md").write_text("# Kept\n\nOspreys dive feet first.\n")
    (root / "alias").symlink_to(root / "sub")
    (root / "kept").symlink_to(root / ".store")
    (root / "shared").symlink_to(outside)
    report = IngestReport()
    with caplog.at_level("WARNING", logger="ragbus.file_ingest"):
        published = ingest_path(root, report=report, **ports)
    assert [m.guid for m in published] == [str((root / "sub" / "page.md").resolve())]
    assert report.skipped == {(FOLDER_LINK_INSIDE, FOLDER): 1, (FOLDER_LINK, FOLDER): 2}, report.skipped
    warned = {r.getMessage().split(":", 1)[0].rsplit("/", 1)[-1]: r.getMessage() for r in caplog.records}
    assert "which this ingest reads already" in warned["alias"], warned
    assert "ragbus ingest" not in warned["alias"], warned
    assert f"`ragbus ingest {root / 'shared'}` reads it" in warned["shared"], warned
    assert f"`ragbus ingest {root / 'kept'}` reads it" in warned["kept"], warned
    # the advice is true: the link named reads its folder, the documents named by their paths under the target
    assert [m.guid for m in ingest_path(root / "shared", **ports)] == [str((outside / "keys.txt").resolve())]
    assert [m.guid for m in ingest_path(root / "kept", **ports)] == [str((root / ".store" / "kept.md").resolve())]


def test_a_document_an_earlier_version_read_through_a_link_leading_out_stays_until_deleted_by_its_target_s_path(
        ports, tmp_path, caplog):
    """Until 6c35ea4 `ragbus ingest docs` read docs/accounts.txt -> private/accounts.txt, storing it under the
    target's path. Now the link is skipped, but nothing removed what was read: a re-ingest leaves it indexed, and
    `--delete docs` does not reach it (its path is not under docs). The warning said only "ingest that file by its
    own path"; it now says the document stays and which `--delete` removes it. A target ingested by its own name
    gets no such word."""
    outside, root = _private_beside_docs(tmp_path, "accounts.txt")
    (outside / "named.txt").write_text("Kestrels hover over verges.\n")
    (root / "accounts.txt").symlink_to(outside / "accounts.txt")
    (root / "named.txt").symlink_to(outside / "named.txt")
    target = str((outside / "accounts.txt").resolve())
    (earlier,) = ingest_path(outside / "accounts.txt", **ports)
    # as the earlier version's walk of docs recorded it: the target's path, docs the path given to `ragbus ingest`
    ports["state"].update(state_collections.PROCESSED_ITEMS, earlier.document_id,
                          lambda r: {**r, "root": str(root.resolve())})
    ingest_path(outside / "named.txt", **ports)
    with caplog.at_level("WARNING", logger="ragbus.file_ingest"):
        ingest_path(root, **ports)
    warned = {r.getMessage().split(":", 1)[0].rsplit("/", 1)[-1]: r.getMessage() for r in caplog.records}
    assert f"stays in the index (ingesting does not remove it): `ragbus ingest --delete {target}` removes it" \
        in warned["accounts.txt"], warned
    assert "stays in the index" not in warned["named.txt"], warned
    assert processed_items.records(ports["state"], {"path": target}), "a re-ingest removed it"
    assert earlier.document_id not in delete_path(root, **{k: ports[k] for k in ("state", "publisher", "clock")})
    assert delete_path(target, **{k: ports[k] for k in ("state", "publisher", "clock")}) == [earlier.document_id]


def test_a_command_a_warning_advises_names_the_file_when_its_name_holds_a_control_character(ports, tmp_path, caplog):
    """The advice for a link to a folder (`ragbus ingest <link>`) and for a document read through a link
    (`ragbus ingest --delete <target>`) quoted the escaped name as shlex does: 'docs/bell\\x07dir' in single quotes is
    a backslash, an x, a 0 and a 7 to the shell, a file that does not exist. Such a name is written in $'...', which
    the shell reads back as the name; a link whose name is not UTF-8 (which `ragbus ingest` refuses) is advised by
    its target. Each advised word is checked by bash naming the very file."""
    import shutil
    import subprocess

    if shutil.which("bash") is None:
        pytest.skip("no bash to read the advised words")
    outside, root = _private_beside_docs(tmp_path, "bell\x07keys.txt")
    (root / "bell\x07dir").symlink_to(outside)
    os.symlink(os.fsencode(outside), os.fsencode(root) + b"/caf\xe9")
    (root / "accounts.txt").symlink_to(outside / "bell\x07keys.txt")
    (earlier,) = ingest_path(outside / "bell\x07keys.txt", **ports)
    ports["state"].update(state_collections.PROCESSED_ITEMS, earlier.document_id,
                          lambda r: {**r, "root": str(root.resolve())})  # as an earlier version's walk of docs wrote it
    with caplog.at_level("WARNING", logger="ragbus.file_ingest"):
        ingest_path(root, **ports)
    advised = [r.getMessage().split("`ragbus ingest ", 1)[1].split("`", 1)[0].removeprefix("--delete ")
               for r in caplog.records if "`ragbus ingest " in r.getMessage()]
    assert len(advised) == 3, [r.getMessage() for r in caplog.records]
    named = [subprocess.run(["bash", "-c", f'printf %s {word}'], capture_output=True, check=True).stdout
             for word in advised]
    assert sorted(named) == sorted([os.fsencode(root / "bell\x07dir"), os.fsencode(outside.resolve()),
                                    os.fsencode(outside.resolve() / "bell\x07keys.txt")]), (advised, named)
    assert all("\x07" not in word for word in advised), advised


def test_a_gzip_file_s_trailing_bytes_warning_names_it_with_its_control_characters_escaped(ports, tmp_path, caplog):
    """The warning that a .gz file's bytes after its gzip data were ignored named the file raw, so the log's
    terminal-safe text dropped its BEL: 'bell.txt.gz', a file that does not exist, where every other warning for a
    file in a folder writes it as an escape (cc0b8ac)."""
    import gzip

    from shared.observability.logs import TextFormatter

    root = tmp_path / "docs"
    root.mkdir()
    (root / "bell\x07.txt.gz").write_bytes(gzip.compress(b"Kestrels hover over verges.\n") + b"\x00padding")
    with caplog.at_level("WARNING", logger="ragbus.file_ingest"):
        assert len(ingest_path(root, **ports)) == 1
    shown = "\n".join(TextFormatter(tracebacks=False).format(r) for r in caplog.records)
    assert "bell\\x07.txt.gz: bytes after its gzip data are not gzip" in shown, shown


def test_a_delete_to_confirm_names_the_folders_with_their_control_characters_escaped(ports, tmp_path):
    """`ragbus ingest --delete` of a folder above the ingested ones asks for --yes naming it and them; the CLI's error
    text (markup, which drops what a terminal obeys) named 'bell<BEL>docs' as 'belldocs', a folder that does not
    exist. Named as the ingest warnings name files (shown_path), the names are the real ones and inert."""
    from shared.ingest.files import needs_confirmation
    from shared.observability.terminal_text import markup

    top = tmp_path / "top\x07"
    for name in ("bell\x07docs", "notes"):
        (top / name).mkdir(parents=True)
        (top / name / "page.md").write_text("# Page\n\nHerons nest in colonies.\n")
        ingest_path(top / name, **ports)
    why = markup(needs_confirmation(top, ports["state"]))
    assert f"{tmp_path.resolve()}/top\\x07 is not inside any path given to `ragbus ingest`" in why, why
    assert "/top\\x07/bell\\x07docs, " in why and "\x07" not in why, why


def test_a_link_to_a_hidden_file_or_into_a_hidden_folder_is_skipped_by_name_and_read_when_named(
        ports, tmp_path, caplog, monkeypatch):
    """`ragbus ingest docs` read docs/keys.txt -> docs/.private/keys.txt, though the walk never reads a hidden folder
    (and a link to that folder, docs/priv -> docs/.private, is counted as not followed): a link made a hidden file a
    document. Now a file link whose target is hidden, or in a hidden folder, is skipped with a warning naming both
    (escaped, as every name) and counted; named on the command line it is read, as any link is. A link swapped in
    after the walk is checked again where it is read."""
    import shared.ingest.files as files
    from shared.ingest.files import FOLDER, FOLDER_LINK, HIDDEN_TARGET
    from shared.observability.logs import TextFormatter

    root = tmp_path / "docs"
    (root / ".private").mkdir(parents=True)
    (root / ".private" / "keys.txt").write_text("The vault code is 4411.\n")
    (root / ".private" / "bell\x07.txt").write_text("The safe code is 9087.\n")
    (root / ".draft.md").write_text("# Draft\n\nKestrels hover over verges.\n")
    (root / "notes.md").write_text("# Notes\n\nHerons nest in colonies.\n")
    (root / "late.txt").write_text("Kites glide.\n")
    (root / "keys.txt").symlink_to(root / ".private" / "keys.txt")
    (root / "draft.md").symlink_to(root / ".draft.md")
    (root / "tab\tsafe.txt").symlink_to(root / ".private" / "bell\x07.txt")
    (root / "priv").symlink_to(root / ".private")
    walked = files._supported_files

    def walk_then_swap(directory, report, *rest):
        found = walked(directory, report, *rest)
        (root / "late.txt").unlink()
        (root / "late.txt").symlink_to(root / ".private" / "keys.txt")
        return found

    monkeypatch.setattr(files, "_supported_files", walk_then_swap)
    report = IngestReport()
    with caplog.at_level("WARNING", logger="ragbus.file_ingest"):
        published = ingest_path(root, report=report, **ports)
    assert [m.guid for m in published] == [str((root / "notes.md").resolve())]
    assert report.skipped == {(HIDDEN_TARGET, ".txt"): 3, (HIDDEN_TARGET, ".md"): 1, (FOLDER_LINK, FOLDER): 1}, \
        report.skipped
    shown = "\n".join(TextFormatter(tracebacks=False).format(r) for r in caplog.records)
    assert (f"keys.txt: it is a symlink to {(root / '.private' / 'keys.txt').resolve()}, a hidden file or one in a "
            f"hidden folder") in shown, shown
    assert f"`ragbus ingest {root / 'draft.md'}` reads it" in shown, shown
    assert "tab\\x09safe.txt: it is a symlink to " in shown and "bell\\x07.txt, a hidden file" in shown, shown
    assert not any(c in shown for c in "\x07\t"), shown
    monkeypatch.setattr(files, "_supported_files", walked)
    # named on the command line, the link is read: the document named by its target's path
    assert [m.guid for m in ingest_path(root / "keys.txt", **ports)] == [
        str((root / ".private" / "keys.txt").resolve())]


def test_a_document_an_earlier_ingest_read_through_a_link_to_a_hidden_file_stays_and_the_warning_says_how_to_delete(
        ports, tmp_path, caplog):
    """Until the link to a hidden file was skipped, `ragbus ingest docs` read docs/keys.txt -> docs/.private/keys.txt
    and recorded it under the target's path with docs as its root. Skipping the link now removes nothing: its warning
    says the document stays and which `--delete` removes it, as for a link leading out of the folder."""
    root = tmp_path / "docs"
    (root / ".private").mkdir(parents=True)
    (root / ".private" / "keys.txt").write_text("The vault code is 4411.\n")
    (root / "notes.md").write_text("# Notes\n\nHerons nest in colonies.\n")
    (root / "keys.txt").symlink_to(root / ".private" / "keys.txt")
    target = str((root / ".private" / "keys.txt").resolve())
    (earlier,) = ingest_path(root / ".private" / "keys.txt", **ports)
    ports["state"].update(state_collections.PROCESSED_ITEMS, earlier.document_id,
                          lambda r: {**r, "root": str(root.resolve())})  # as the walk of docs recorded it
    with caplog.at_level("WARNING", logger="ragbus.file_ingest"):
        ingest_path(root, **ports)
    (warning,) = [r.getMessage() for r in caplog.records if "keys.txt: it is a symlink" in r.getMessage()]
    assert f"stays in the index (ingesting does not remove it): `ragbus ingest --delete {target}` removes it" \
        in warning, warning
    assert processed_items.records(ports["state"], {"path": target}), "a re-ingest removed it"
