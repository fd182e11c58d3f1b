"""A newcomer's second hour (issue 25): their own documents, their own feeds and a clean slate,
each driven through the CLI in a subprocess on a fresh RAGBUS_HOME."""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.support import REPO, interrupt, ragbus_env, run_cli

DATA = Path(__file__).resolve().parents[1] / "data"
# the same Debian man page the realdocs set holds (one copy in the repo)
XSLTPROC = Path(__file__).resolve().parents[2] / "shared/tools/eval/datasets/realdocs/documents/xsltproc.html"
NEWCOMER = {"RAGBUS_ALLOW_LOOPBACK": "0", "COLUMNS": "200"}


def test_a_folder_ingest_says_what_it_took_skipped_and_found_unchanged(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    (docs / "cli").mkdir(parents=True)
    shutil.copy(DATA / "zlib_how.html", docs)
    shutil.copy(XSLTPROC, docs)
    (docs / "installing.rst").write_text(
        "Installing\n==========\n\nUse :ref:`the resolver <resolver>` to install packages from an index; "
        "``pip install`` reads requirement files as well as single names, and it builds wheels first.\n")
    (docs / "cli" / "pip_download.rst.gz").write_bytes(gzip.compress(
        b"pip download\n============\n\nDownload packages into a directory without installing them, "
        b"so that a machine without network access can install them later from that directory.\n"))
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (docs / "conf.py.gz").write_bytes(gzip.compress(b"project = 'pip'"))

    first = run_cli(home, "ingest", str(docs), **NEWCOMER)
    assert "4 document(s) submitted, 2 skipped; 4 document(s) in the index" in first.stdout, first.stdout
    assert "skipped 1 .png file(s): not a document type ragbus reads" in first.stdout
    assert "skipped 1 .py.gz file(s): not a document type ragbus reads" in first.stdout

    again = run_cli(home, "ingest", str(docs), **NEWCOMER)
    assert "0 document(s) submitted, 4 unchanged, 2 skipped; 4 document(s) in the index" in again.stdout

    hits = json.loads(run_cli(home, "search", "buffer sizes 128K or 256K bytes", "--k", "1", "--json").stdout)
    assert hits[0]["title"] == "zlib Usage Example" and "128K or 256K" in hits[0]["text"]
    hits = json.loads(run_cli(home, "search", "xsltproc command line XSLT processor", "--k", "1",
                              "--json").stdout)
    assert hits[0]["title"] == "xsltproc"
    hits = json.loads(run_cli(home, "search", "download packages without network access", "--k", "1",
                              "--json").stdout)
    assert hits[0]["title"] == "pip download" and hits[0]["url"].endswith("pip_download.rst.gz")


def test_allow_loopback_sticks_to_the_listing_it_was_given_for(tmp_path):
    from tests.support import Site, article_html, rss, serve_site, topic_paragraphs

    home = tmp_path / "home"
    with serve_site(Site()) as site:
        site.put("/feed.xml", rss(site.base, [{"title": "Volcanoes", "path": "/a.html", "guid": "a"}]),
                 "application/rss+xml")
        site.put("/a.html", article_html("Volcanoes", topic_paragraphs("volcano")))
        refused = run_cli(home, "feeds", "add", f"{site.base}/feed.xml", check=False, **NEWCOMER)
        assert refused.returncode == 2 and "--allow-loopback" in refused.stderr
        run_cli(home, "feeds", "add", f"{site.base}/feed.xml", "--allow-loopback", **NEWCOMER)
        poll = run_cli(home, "poll", **NEWCOMER)  # a plain poll, no flag, no RAGBUS_ALLOW_LOOPBACK
        assert "refusing" not in poll.stdout + poll.stderr
        assert json.loads(run_cli(home, "stats", "--json").stdout)["documents"] == 1
        assert site.hits.get("/a.html") == 1


def _long_markdown(folder: Path, name: str, topic: str, seed: int) -> None:
    from tests.support import topic_paragraphs

    (folder / name).write_text(f"# {topic}\n\n" + "\n\n".join(topic_paragraphs(topic, n=40, seed=seed)))


def test_a_dead_letter_is_retried_once_its_cause_is_fixed_or_purged(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    _long_markdown(docs, "volcano.md", "volcano", 0)
    _long_markdown(docs, "glacier.md", "glacier", 1)
    # the cause: a cap too low for these documents (three chunks each)
    capped = run_cli(home, "ingest", str(docs), check=False, RAGBUS_MAX_CHUNKS_PER_DOCUMENT="1", **NEWCOMER)
    assert capped.returncode == 1 and "2 document(s) could not be processed" in capped.stderr

    stats = json.loads(run_cli(home, "stats", "--json").stdout)
    assert sorted(d["id"] for d in stats["recent_dead_letters"]) == sorted(
        d["id"] for d in json.loads(run_cli(home, "dead-letters", "--json").stdout))
    listed = run_cli(home, "dead-letters", **NEWCOMER).stdout.splitlines()
    assert len(listed) == 2 and all("RAGBUS_MAX_CHUNKS_PER_DOCUMENT" in line for line in listed)
    volcano_id = next(line.split()[0] for line in listed if "volcano.md" in line)
    glacier_id = next(line.split()[0] for line in listed if "glacier.md" in line)

    shown = run_cli(home, "stats", **NEWCOMER).stdout  # stats names each dead letter by the id retry takes
    assert f"dead letter {volcano_id} indexer.document-cleaned" in shown
    unknown = run_cli(home, "dead-letters", "retry", "feedface", check=False, **NEWCOMER)
    assert unknown.returncode == 2 and "no dead letter 'feedface'" in unknown.stderr

    # the cap raised back to its default: the retried document is really indexed
    retried = run_cli(home, "dead-letters", "retry", volcano_id, **NEWCOMER)
    assert "retried 1 dead letter(s)" in retried.stdout
    stats = json.loads(run_cli(home, "stats", "--json").stdout)
    assert (stats["documents"], stats["dead_letters"]) == (1, 1)
    hits = json.loads(run_cli(home, "search", "volcano", "--k", "1", "--json").stdout)
    assert hits[0]["url"].endswith("volcano.md")

    purged = run_cli(home, "dead-letters", "purge", glacier_id, **NEWCOMER)
    assert "purged 1 dead letter(s)" in purged.stdout
    assert json.loads(run_cli(home, "stats", "--json").stdout)["dead_letters"] == 0
    assert "no dead letters" in run_cli(home, "dead-letters", **NEWCOMER).stderr
    # the purged document is neither waited for nor reported again while it is unchanged
    again = run_cli(home, "ingest", str(docs), **NEWCOMER)
    assert "0 document(s) submitted, 2 unchanged; 1 document(s) in the index" in again.stdout
    assert "could not be processed" not in again.stderr and "pending" not in again.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(home: Path) -> Iterator[str]:
    """`ragbus serve` on a free port in ``home``, as a user starts it; yields its base URL."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "shared.tools.cli", "serve", "--port", str(port)], cwd=REPO,
                              env=ragbus_env(home, **NEWCOMER), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "ragbus serve did not start"
                time.sleep(0.3)
        yield base
    finally:
        interrupt(server)


def test_the_api_retries_and_purges_dead_letters_behind_the_guard(tmp_path):
    home, docs = tmp_path / "home", tmp_path / "docs"
    docs.mkdir()
    _long_markdown(docs, "volcano.md", "volcano", 0)
    _long_markdown(docs, "glacier.md", "glacier", 1)
    run_cli(home, "ingest", str(docs), check=False, RAGBUS_MAX_CHUNKS_PER_DOCUMENT="1", **NEWCOMER)
    with serving(home) as base:
        with httpx.Client(base_url=base, timeout=10) as http:
            kept = http.get("/v1/dead-letters").json()["dead_letters"]
            assert len(kept) == 2
            volcano = next(d for d in kept if "volcano.md" in d["data"])
            glacier = next(d for d in kept if "glacier.md" in d["data"])
            # guarded like every write: another site's page cannot redrive or purge
            assert http.post(f"/v1/dead-letters/{volcano['message_id']}/retry",
                             headers={"Origin": "https://evil.example"}).status_code == 403
            json_body = {"Content-Type": "application/json"}  # what the guard asks of every write
            assert http.delete("/v1/dead-letters/nope").status_code == 415
            assert http.delete("/v1/dead-letters/nope", headers=json_body).json() == {
                "error": "no dead letter 'nope'; `ragbus dead-letters` lists them with their ids"}

            retried = http.post(f"/v1/dead-letters/{volcano['message_id'][:12]}/retry",
                                headers=json_body)
            assert retried.status_code == 200 and retried.json() == {"retried": [volcano["id"]], "refused": []}
            deadline = time.monotonic() + 120
            while not http.get("/v1/search", params={"q": "volcano", "k": 1}).json()["results"]:
                assert time.monotonic() < deadline, "the retried document was not indexed"
                time.sleep(0.5)

            purged = http.delete(f"/v1/dead-letters/{glacier['id']}", headers=json_body)
            assert purged.json() == {"purged": [glacier["id"]], "refused": []}
            assert http.get("/v1/dead-letters").json() == {"dead_letters": []}


def test_mcp_tools_declare_their_required_arguments_and_answer_bad_ones_as_rest_does(tmp_path):
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    home = tmp_path / "home"
    (tmp_path / "docs").mkdir()
    _long_markdown(tmp_path / "docs", "volcano.md", "volcano", 0)
    run_cli(home, "ingest", str(tmp_path / "docs"), **NEWCOMER)
    with serving(home) as base:
        rest = httpx.post(f"{base}/v1/queries", json={}, timeout=10).json()["error"]

        async def session_run():
            async with (streamable_http_client(f"{base}/mcp") as (read, write),
                        ClientSession(read, write) as session):
                await session.initialize()
                tools = {tool.name: tool for tool in (await session.list_tools()).tools}
                calls = {name: await session.call_tool(*call) for name, call in {
                    "ask_without": ("ask", {}),
                    "search_without": ("search_documents", {"top_k": 3}),
                    "search_by_old_name": ("search_documents", {"query": "volcano eruptions", "top_k": 3}),
                }.items()}
                return tools, calls

        tools, calls = anyio.run(session_run)
    for name in ("ask", "search_documents"):
        schema = tools[name].input_schema
        assert schema["required"] == ["question"] and schema["properties"]["question"]["type"] == "string"
    assert tools["search_documents"].input_schema["properties"]["query"]["deprecated"] is True
    assert rest == 'missing \'question\'; send {"question": "your question"}'
    for name in ("ask_without", "search_without"):
        # the tool's own message alone (the SDK's "Error executing tool NAME: " before it is taken off)
        assert calls[name].is_error and calls[name].content[0].text == rest, calls[name]
    assert not calls["search_by_old_name"].is_error


# The demo on another port not indexing the sample corpus twice: tests/e2e/test_first_hour.py runs it
# in the home its first demo left (one demo fewer).


# The topology naming its own storage and leaving no orphan traces (an earlier topology's spans set aside, `stats`
# and `traces` on the home alone): tests/e2e/test_emulator_e2e.py checks it on its topology (one `up` fewer).
