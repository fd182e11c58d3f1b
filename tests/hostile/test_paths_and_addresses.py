"""Hostile file trees, deletes that sweep too wide, and addresses the guard must refuse."""

from __future__ import annotations

import socket

import pytest

from shared.adapters.http_fetch import SafeFetcher
from shared.contract.errors import FetchRefused
from shared.ingest.url_guard import check_url
from tests.hostile.crash import census
from tests.support import run_cli, topic_paragraphs


def _resolver_to(address: str):
    def resolve(host, port, *args, **kwargs):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (address, port))]
    return resolve


@pytest.mark.parametrize("address", ["fec0::1", "fec0::", "fed0:1234::5", "feff:ffff::1"])
def test_site_local_ipv6_is_refused_as_a_literal_and_by_name(address):
    with pytest.raises(FetchRefused, match="site-local"):
        check_url(f"http://[{address}]/feed.xml", allow_loopback=True)
    with pytest.raises(FetchRefused, match="site-local"):
        check_url("http://innocent.example/feed.xml", allow_loopback=True, resolver=_resolver_to(address))
    with pytest.raises(FetchRefused, match="site-local"):
        SafeFetcher(resolver=_resolver_to(address)).fetch("http://innocent.example/", accept=["text/html"])


@pytest.mark.parametrize("address", ["10.1.2.3", "169.254.169.254", "fd00::1", "fe80::1", "::ffff:10.0.0.1",
                                     "100.64.0.1", "0.0.0.0", "224.0.0.1", "2002:a00:1::"])
def test_other_private_forms_stay_refused(address):
    with pytest.raises(FetchRefused):
        check_url("http://innocent.example/", allow_loopback=True, resolver=_resolver_to(address))


def test_symlinks_to_files_that_cannot_be_ingested_are_skipped_and_the_folder_goes_on(tmp_path):
    docs, outside, home = tmp_path / "docs", tmp_path / "outside", tmp_path / "home"
    docs.mkdir()
    outside.mkdir()
    (docs / "good.md").write_text("\n\n".join(topic_paragraphs("quartz", 3)))
    (outside / "README").write_text("no suffix at all")
    (outside / "picture.png").write_bytes(b"\x89PNG\r\n")  # a kind ragbus does not read (a PDF it now does)
    (docs / "no-suffix.md").symlink_to(outside / "README")
    (docs / "png.txt").symlink_to(outside / "picture.png")
    (docs / "dangling.md").symlink_to(outside / "missing.md")
    (docs / "loop-a.md").symlink_to(docs / "loop-b.md")
    (docs / "loop-b.md").symlink_to(docs / "loop-a.md")
    proc = run_cli(home, "ingest", str(docs), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "KeyError" not in proc.stderr and "Traceback" not in proc.stderr
    # links leaving the folder are skipped by name before their targets are looked at (the user named the folder)
    assert f"no-suffix.md: it is a symlink to {outside.resolve() / 'README'}, outside" in proc.stderr
    assert "skipped 3 .md file(s): a broken symlink" in proc.stdout, proc.stdout  # dangling, both loops
    assert "skipped 1 .txt file(s): a symlink to a file outside the folder" in proc.stdout, proc.stdout
    named = run_cli(home, "ingest", str(docs / "png.txt"), check=False)
    assert named.returncode == 2 and "the target of the symlink" in named.stderr
    assert "unsupported suffix" in named.stderr
    assert census(home)["documents"] == 1


def test_delete_of_the_root_asks_for_yes_and_deletes_nothing_without_it(tmp_path):
    docs, home = tmp_path / "docs", tmp_path / "home"
    docs.mkdir()
    for n in range(2):
        (docs / f"d{n}.md").write_text("\n\n".join(topic_paragraphs(f"ember{n}", 3, seed=n)))
    run_cli(home, "ingest", str(docs))
    refused = run_cli(home, "ingest", "--delete", "/", check=False)
    assert refused.returncode == 2
    assert "root of the file system" in refused.stderr and "--yes" in refused.stderr
    assert census(home)["documents"] == 2
    run_cli(home, "ingest", "--delete", "/", "--yes")
    assert census(home)["documents"] == 0


def test_delete_of_a_folder_wider_than_what_was_ingested_asks_for_yes(tmp_path):
    home = tmp_path / "home"
    a, b = tmp_path / "projects" / "a", tmp_path / "projects" / "b"
    for folder in (a, b):
        folder.mkdir(parents=True)
        (folder / "doc.md").write_text("\n\n".join(topic_paragraphs(folder.name * 3, 3)))
        run_cli(home, "ingest", str(folder))
    wide = run_cli(home, "ingest", "--delete", str(tmp_path / "projects"), check=False)
    assert wide.returncode == 2 and "not inside any path given to `ragbus ingest`" in wide.stderr
    assert census(home)["documents"] == 2
    run_cli(home, "ingest", "--delete", str(a))  # the ingested folder itself: no question
    assert census(home)["documents"] == 1
    run_cli(home, "ingest", "--delete", str(b / "doc.md"))  # one file: no question
    assert census(home)["documents"] == 0
