"""Filters on every front door: the HTTP API (POST /v1/queries ``filters``, GET /v1/search
``source``/``since``/``until``/``where``), the CLI flags, the MCP tools' arguments, the query
record, and the retriever searching the real local index with them."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from services.gateway import create_app
from services.retriever.handler import search_all
from shared.adapters.local.index import HybridIndex
from shared.adapters.local.state import SqliteStateStore
from shared.contract import state_collections
from shared.contract.config import Settings
from shared.contract.deps import Deps
from shared.contract.errors import InvalidInput
from shared.contract.filters import Filters
from shared.contract.ports import Chunk
from shared.query.api import search_documents, submit_query
from shared.query.record import QueryRecord
from tests.fakes import FakeClock, RecordingPublisher
from tests.unit.loop_fakes import HashingEmbedder

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def _index(tmp_path) -> tuple[HybridIndex, HashingEmbedder]:
    embedder = HashingEmbedder()
    index = HybridIndex(tmp_path / "index", embedder.dimension)
    posts = [
        ("nv-2025", "https://nv.example/rss", "2025-03-04", "CUDA graphs cut launch overhead for small kernels."),
        ("nv-2026", "https://nv.example/rss", "2026-11-20", "CUDA graphs now capture conditional nodes."),
        ("amd-2026", "https://amd.example/feed", "2026-11-22", "HIP graphs cut launch overhead as CUDA graphs do."),
    ]
    for doc, origin, published, text in posts:
        chunk = Chunk(chunk_id=f"{doc}:0", document_id=doc, ordinal=0, text=text, title=doc,
                      url=origin.replace("/rss", "").replace("/feed", "") + f"/{doc}", published=published,
                      source="feed", origin=origin, metadata={"vendor": doc.split("-")[0]})
        index.upsert(doc, [chunk], embedder.embed([text]))
    return index, embedder


@pytest.fixture
def deps(tmp_path):
    index, embedder = _index(tmp_path)
    clock = FakeClock(NOW)
    return Deps(Settings(home=tmp_path), publisher=RecordingPublisher(), state=SqliteStateStore(tmp_path / "s.db"),
                clock=clock, embedder=embedder, index=index)


def test_search_documents_filters_before_ranking(deps):
    every = [r["document_id"] for r in search_documents(deps, "CUDA graphs launch overhead", 3)]
    assert set(every) == {"nv-2025", "nv-2026", "amd-2026"}
    only = search_documents(deps, "CUDA graphs launch overhead", 3,
                            filters={"source": "https://nv.example/rss", "since": "30d"})
    assert [r["document_id"] for r in only] == ["nv-2026"]
    assert [r["document_id"] for r in search_documents(
        deps, "graphs", 3, filters={"where": {"vendor": "amd"}})] == ["amd-2026"]
    with pytest.raises(InvalidInput, match="filters: since 'last tuesday'"):
        search_documents(deps, "graphs", 3, filters={"since": "last tuesday"})


def test_the_query_record_keeps_the_filters_resolved_against_the_clock(deps):
    record = submit_query(deps, "What changed in CUDA graphs?", filters={"since": "7d", "source": "https://nv.example/rss"})
    stored = deps.state.get(state_collections.QUERIES, record.id)
    assert stored["filters"] == {"source": "https://nv.example/rss", "since": "2026-11-19T12:00:00+00:00"}
    assert QueryRecord.from_doc(stored).search_filters() == Filters.parse(
        now=NOW, since="7d", source="https://nv.example/rss")
    # A record without filters (every older record) writes none and reads as unfiltered.
    plain = submit_query(deps, "What changed in CUDA graphs?")
    stored = deps.state.get(state_collections.QUERIES, plain.id)
    assert "filters" not in stored and QueryRecord.from_doc(stored).search_filters() is None
    with pytest.raises(InvalidInput, match="filters: unknown key"):
        submit_query(deps, "q?", filters={"from": "2025"})


def test_the_retriever_searches_with_the_filters(deps):
    f = Filters.parse(now=NOW, until="2025-12-31")
    [hits] = search_all([("question", "CUDA graphs launch overhead")], embedder=deps.embedder, index=deps.index,
                        k=3, filters=f)
    assert [h.chunk.document_id for h in hits.hits] == ["nv-2025"]
    both = search_all([("question", "CUDA graphs"), ("sub_query_1", "launch overhead")], embedder=deps.embedder,
                      index=deps.index, k=3, filters=f)
    assert {h.chunk.document_id for r in both for h in r.hits} == {"nv-2025"}


def test_http_search_and_queries_take_filters_with_clear_400s(deps):
    with TestClient(create_app(deps), base_url="http://127.0.0.1") as client:
        body = client.get("/v1/search", params={"q": "CUDA graphs", "source": "https://amd.example/feed"}).json()
        assert [r["document_id"] for r in body["results"]] == ["amd-2026"]
        body = client.get("/v1/search", params=[("q", "graphs"), ("since", "2026-01-01"), ("where", "vendor=nv")]).json()
        assert [r["document_id"] for r in body["results"]] == ["nv-2026"]
        for params, expected in [({"since": "soon"}, "since 'soon'"), ({"until": "2025-13-01"}, "until '2025-13-01'"),
                                 ({"source": "ftp://x/"}, "source 'ftp://x/'"),
                                 ({"since": "2026-01-01", "until": "2025-01-01"}, "is not before until"),
                                 ({"source": "\x00"}, "control character")]:
            response = client.get("/v1/search", params={"q": "graphs", **params})
            assert response.status_code == 400 and expected in response.json()["error"], params
        # a single-valued parameter given twice: which one was meant is not guessed
        response = client.get("/v1/search", params=[("q", "graphs"), ("since", "7d"), ("since", "8d")])
        assert response.status_code == 400 and "'since' is given 2 times" in response.json()["error"]
        response = client.post("/v1/queries", json={"question": "What changed?", "filters": {"since": "7d"}})
        assert response.status_code == 202
        stored = deps.state.get(state_collections.QUERIES, response.json()["id"])
        assert stored["filters"] == {"since": "2026-11-19T12:00:00+00:00"}
        response = client.post("/v1/queries", json={"question": "What changed?", "filters": {"since": 7}})
        assert response.status_code == 400 and "filters.since must be a string" in response.json()["error"]
        response = client.post("/v1/queries", json={"question": "What changed?", "filters": "7d"})
        assert response.status_code == 400 and "filters must be an object" in response.json()["error"]
        # the field named once: it was "filters: filters.since must be a string", "filters: filters: unknown key(s)"
        for sent, said in [({"since": 7}, "filters.since must be a string"), ("7d", "filters must be an object with "),
                           ({"sourse": "x"}, "filters: unknown key(s) 'sourse'; use source, since, until, kind, where"),
                           ({"kind": "rss"}, "filters: kind 'rss': use one of feed, sitemap, file, gcs")]:
            error = client.post("/v1/queries", json={"question": "What changed?", "filters": sent}).json()["error"]
            assert error.startswith(said) and error.count("filters") == 1, error


def _stored(tmp_path, *docs: dict) -> SqliteStateStore:
    state = SqliteStateStore(tmp_path / "state.db")
    for n, doc in enumerate(docs):
        state.put(state_collections.DOCUMENTS, f"d{n}", doc)
    return state


def test_cli_flags_become_filters_and_bad_ones_a_one_line_error(monkeypatch, tmp_path):
    import shared.tools.cli as cli
    import shared.tools.cli.reading as reading  # where `ask` and `search` look their session up

    asked = []
    state = _stored(tmp_path, {"url": "https://nv.example/posts/1", "origin": "https://nv.example/rss"})
    session = SimpleNamespace(settings=SimpleNamespace(query_timeout_s=7.0), local=None,
                              deps=SimpleNamespace(clock=FakeClock(NOW), state=state),
                              stages=lambda: contextlib.nullcontext())
    monkeypatch.setattr(reading, "open_session", lambda *a, **k: session)
    answered = SimpleNamespace(status="answered", to_doc=lambda: {"status": "answered"})
    monkeypatch.setattr(reading, "_ask", lambda deps, q, **kw: asked.append(kw["filters"]) or answered)
    runner = CliRunner()
    result = runner.invoke(cli.app, ["ask", "why?", "--json", "--source", "https://nv.example/rss", "--since", "2w",
                                     "--where", "vendor=nv", "--where", "team=gpu"])
    assert result.exit_code == 0, result.output
    assert asked == [Filters.parse(now=NOW, source="https://nv.example/rss", since="2w",
                                   where=["vendor=nv", "team=gpu"])]
    result = runner.invoke(cli.app, ["ask", "why?", "--since", "whenever"])
    assert result.exit_code == 2 and "since 'whenever'" in result.output
    result = runner.invoke(cli.app, ["search", "graphs", "--where", "vendor"])
    assert result.exit_code == 2 and "write key=value" in result.output


@pytest.mark.parametrize("command", [["ask", "why?"], ["search", "graphs"], ["chat"]])
def test_a_source_no_stored_document_comes_from_is_refused_before_asking(monkeypatch, tmp_path, command):
    # `ragbus ask --source /nonexistent` asked, answered "nothing matches the filters" and exited 0: --source
    # filters stored documents by where they came from, so one naming none of them is an error that says so
    import shared.tools.cli as cli
    import shared.tools.cli.chat as chat
    import shared.tools.cli.reading as reading

    state = _stored(tmp_path, {"url": "file:///docs/notes/a.md", "origin": "/docs/notes"},
                    {"url": "https://nv.example/posts/1", "origin": "https://nv.example/rss"})
    session = SimpleNamespace(settings=SimpleNamespace(query_timeout_s=7.0), local=None,
                              deps=SimpleNamespace(clock=FakeClock(NOW), state=state),
                              stages=lambda: contextlib.nullcontext())
    for module in (reading, chat):
        monkeypatch.setattr(module, "open_session", lambda *a, **k: session)
    asked = []
    answered = SimpleNamespace(status="answered", to_doc=lambda: {"status": "answered"})
    monkeypatch.setattr(reading, "_ask", lambda deps, q, **kw: asked.append(kw["filters"]) or answered)
    monkeypatch.setattr("shared.query.api.search_documents", lambda *a, **k: asked.append(k["filters"]) or [])
    monkeypatch.setattr(chat, "_converse", lambda deps, **kw: asked.append(kw["filters"]) or (0, 0))
    runner = CliRunner()
    for source, said in [("/nonexistent", "no such file or folder exists either"),
                         ("/docs/notes-old", "stored sources: /docs/notes, https://nv.example/rss"),
                         ("https://amd.example/feed", "stored sources: /docs/notes, https://nv.example/rss")]:
        result = runner.invoke(cli.app, [*command, "--source", source])
        text = " ".join(result.output.split())
        assert result.exit_code == 2, text
        assert f"--source {source}: no indexed document comes from this source" in text and said in text, text
    assert asked == []
    json = [] if command == ["chat"] else ["--json"]
    for source in ("/docs/notes", "file:///docs/notes/a.md", "https://nv.example/rss"):  # a folder, a file, a feed
        result = runner.invoke(cli.app, [*command, "--source", source, *json])
        assert result.exit_code == 0, result.output
    assert len(asked) == 3
    empty = _stored(tmp_path / "empty")
    session.deps.state = empty
    result = runner.invoke(cli.app, [*command, "--source", "/docs/notes"])
    assert result.exit_code == 2 and "no document is indexed yet" in " ".join(result.output.split())


def test_mcp_tools_take_typed_filter_arguments(deps):
    import anyio

    from services.gateway.mcp_server import build_mcp_server

    server = build_mcp_server(deps)

    async def schemas():
        return {tool.name: getattr(tool, "input_schema", None) or tool.inputSchema for tool in await server.list_tools()}

    found = anyio.run(schemas)
    for name in ("search_documents", "ask"):
        properties = found[name]["properties"]
        assert {"source", "since", "until", "kind", "where"} <= set(properties), name
        assert properties["where"]["anyOf"][0]["type"] == "object"


# ------------------------------------------------------------- time in the question


def _record(question: str, filters: dict | None = None, created: datetime = NOW) -> QueryRecord:
    record = QueryRecord.new("q1", question, top_k=3, max_iterations=1, max_model_calls=5, now=created,
                             timeout_s=60)
    record.filters = filters
    return record


def test_the_question_s_time_words_become_its_date_filter_and_the_caller_s_range_wins():
    from services.transformer.handler import question_time_filter, without_month_year

    filters, reading = question_time_filter(_record("What did the blog announce last week about CUDA?",
                                                    {"source": "https://nv.example/rss"}), NOW)
    assert filters == {"source": "https://nv.example/rss", "since": "2026-11-19T00:00:00+00:00"}
    assert (reading["phrase"], reading["window_days"], reading["newest"]) == ("last week", 7, False)
    assert question_time_filter(_record("What is BM25?"), NOW) is None
    assert question_time_filter(_record("What is the latest?", {"since": "2020-01-01T00:00:00+00:00"}), NOW) is None
    # The month and year a provider adds are dropped once the date is a filter, unless the user wrote them.
    assert without_month_year("latest CUDA graphs November 2026", "What is the latest on CUDA graphs?", NOW) == \
        "latest CUDA graphs"
    assert without_month_year("CUDA November 2026", "What shipped in November 2026?", NOW) == "CUDA November 2026"


def test_a_time_range_that_leaves_nothing_is_widened_and_the_record_says_so(deps):
    from services.retriever.handler import widen_time_filter
    from services.transformer.handler import question_time_filter

    record = _record("What is the latest about CUDA graphs launch overhead?", {"where": {"vendor": "nv"}},
                     created=datetime(2027, 6, 1, tzinfo=UTC))
    record.filters, record.time_filter = question_time_filter(record, datetime(2027, 6, 1, tzinfo=UTC))
    queries = [("question", "CUDA graphs launch overhead")]
    first = search_all(queries, embedder=deps.embedder, index=deps.index, k=3, filters=record.search_filters())
    assert not first[0].hits  # nothing since March 2027
    filters, results, steps = widen_time_filter(record, queries, ["CUDA graphs launch overhead"],
                                                embedder=deps.embedder, index=deps.index, k=3,
                                                filters=record.search_filters(), results=first, leading=1)
    assert steps == ["since 2026-12-03", "since 2026-06-06"]
    assert [h.chunk.document_id for h in results[0].hits] == ["nv-2026"]
    assert filters == Filters.parse(now=NOW, since="2026-06-06T00:00:00+00:00", where=["vendor=nv"])
    # A named period is not widened into another: only the caller's own filters remain.
    record = _record("What did the blog say about CUDA graphs in 2024?")
    record.filters, record.time_filter = question_time_filter(record, NOW)
    first = search_all(queries, embedder=deps.embedder, index=deps.index, k=3, filters=record.search_filters())
    filters, results, steps = widen_time_filter(record, queries, ["CUDA graphs launch overhead"],
                                                embedder=deps.embedder, index=deps.index, k=3,
                                                filters=record.search_filters(), results=first, leading=1)
    assert (filters, steps) == (None, ["any date"]) and results[0].hits


def test_the_retriever_applies_the_time_filter_widens_it_and_leads_with_the_newest(deps):
    from services.retriever.handler import handle
    from services.transformer.handler import question_time_filter
    from tests.unit.loop_fakes import transformed_hop

    record = _record("What is the latest about CUDA graphs launch overhead?", created=NOW)
    record.filters, record.time_filter = question_time_filter(record, NOW)
    deps.state.put(state_collections.QUERIES, record.id, record.to_doc())
    handle(transformed_hop(deps, record.id, 0, "CUDA graphs launch overhead"), deps)
    stored = QueryRecord.from_doc(deps.state.get(state_collections.QUERIES, record.id))
    contexts = stored.entry(0).contexts
    # Within 90 days: the two 2026 posts, not the 2025 one; the newest (amd-2026, 22 Nov) leads.
    assert [c["document_id"] for c in contexts][:2] == ["amd-2026", "nv-2026"]
    assert "nv-2025" not in {c["document_id"] for c in contexts}
    assert "filters: since 2026-08-28" in stored.events[-1]["detail"]

    old = _record("What is the latest about CUDA graphs launch overhead?", created=datetime(2028, 6, 1, tzinfo=UTC))
    old.id = "q2"
    old.filters, old.time_filter = question_time_filter(old, datetime(2028, 6, 1, tzinfo=UTC))
    deps.state.put(state_collections.QUERIES, old.id, old.to_doc())
    handle(transformed_hop(deps, old.id, 0, "CUDA graphs launch overhead"), deps)
    stored = QueryRecord.from_doc(deps.state.get(state_collections.QUERIES, old.id))
    assert stored.time_filter["widened"] == ["since 2027-12-04", "since 2027-06-07", "since 2026-06-12"]
    assert stored.filters == {"since": "2026-06-12T00:00:00+00:00"}
    assert "widened" in stored.events[-1]["detail"]


def test_a_model_provider_s_rewrite_returns_the_date_range_in_its_json():
    from services.transformer.handler import question_time_filter
    from shared.contract.ports import Transformation
    from shared.query.grading import parse_transformation
    from shared.query.prompts import TRANSFORM_SCHEMA, transform_prompt

    assert {"published_since", "published_until"} <= set(TRANSFORM_SCHEMA["properties"])
    assert "published_since" in transform_prompt("What shipped lately?", today=NOW.date(), max_sub_queries=3)
    parsed = parse_transformation('{"rewritten": "CUDA releases", "sub_queries": [], '
                                  '"published_since": "2026-09-01", "published_until": "2026-13-40"}')
    assert (parsed.published_since, parsed.published_until) == ("2026-09-01", None)
    # Words the rules do not read ("during the autumn") take the model's range; the rules win otherwise.
    filters, reading = question_time_filter(_record("What shipped during the autumn?"), NOW, parsed)
    assert filters == {"since": "2026-09-01T00:00:00+00:00"} and reading["phrase"] == "the model's reading"
    filters, _ = question_time_filter(_record("What shipped last week?"), NOW, parsed)
    assert filters == {"since": "2026-11-19T00:00:00+00:00"}
    inverted = Transformation("q", published_since="2026-10-01", published_until="2026-01-01")
    assert question_time_filter(_record("What shipped during the autumn?"), NOW, inverted) is None


def test_a_recent_window_holding_only_other_topics_is_widened_to_the_question_s_topic(tmp_path):
    """"The latest" over a corpus of many topics: the last 90 days hold posts, none about the product
    asked for, whose last post is from April. Searching the window alone answered with another
    product's post; the window is widened until it holds the topic, and the record says why."""
    from services.retriever.handler import handle
    from services.transformer.handler import question_time_filter
    from tests.unit.loop_fakes import transformed_hop

    embedder = HashingEmbedder()
    index = HybridIndex(tmp_path / "index", embedder.dimension)
    posts = [("nvshmem-2026-04", "2026-04-12", "NVSHMEM 3.5 adds multi-node NVLink support for device puts."),
             ("nvshmem-2025-10", "2025-10-12", "NVSHMEM 3.3 adds team collectives for device puts."),
             ("graphs-2026-11", "2026-11-20", "CUDA graphs now capture conditional nodes in the latest toolkit."),
             ("nccl-2026-11", "2026-11-18", "NCCL 2.29 is the latest release and adds copy-engine collectives.")]
    for doc, published, text in posts:
        chunk = Chunk(chunk_id=f"{doc}:0", document_id=doc, ordinal=0, text=text, title=doc,
                      url=f"https://blog.example/{doc}", published=published, source="feed",
                      origin="https://blog.example/feed")
        index.upsert(doc, [chunk], embedder.embed([text]))
    deps = Deps(Settings(home=tmp_path), publisher=RecordingPublisher(), state=SqliteStateStore(tmp_path / "s.db"),
                clock=FakeClock(NOW), embedder=embedder, index=index)
    record = _record("What is the latest NVSHMEM release for device puts?")
    record.filters, record.time_filter = question_time_filter(record, NOW)
    deps.state.put(state_collections.QUERIES, record.id, record.to_doc())
    handle(transformed_hop(deps, record.id, 0, record.original_query), deps)
    stored = QueryRecord.from_doc(deps.state.get(state_collections.QUERIES, record.id))
    assert stored.time_filter["widened"] == ["since 2026-05-30", "since 2025-12-01"]
    assert stored.entry(0).contexts[0]["document_id"] == "nvshmem-2026-04"
    assert "found nothing on its topic, widened: since 2026-05-30 -> since 2025-12-01" in stored.events[-1]["detail"]
    index.close()


def test_a_feed_item_s_author_and_categories_are_what_where_matches(tmp_path):
    """From the feed on 127.0.0.1 through fetch, clean, chunk and index: `where category=...` and
    `where author=...` keep the items that carry them (a key with several values matches any)."""
    import uuid

    from shared.contract.config import load_settings
    from shared.contract.messages import FeedPollRequested
    from shared.ingest.listings import add_listing
    from shared.runtime.bootstrap import build_local
    from shared.runtime.local import LocalRuntime
    from tests.support import Site, article_html, serve_site, topic_paragraphs

    posts = [("volcano", "Ada", ["CUDA", "Graphs"]), ("glacier", "Grace", ["CUDA"]), ("harbor", "Ada", [])]
    with serve_site(Site()) as site:
        items = ""
        for n, (topic, author, categories) in enumerate(posts):
            site.put(f"/{topic}.html", article_html(f"{topic.title()} notes", topic_paragraphs(topic, seed=n)))
            items += (f"<item><title>{topic.title()} notes</title><link>{site.base}/{topic}.html</link>"
                      f"<guid>{topic}</guid><dc:creator>{author}</dc:creator>"
                      + "".join(f"<category>{c}</category>" for c in categories)
                      + "<pubDate>Sun, 01 Nov 2026 10:00:00 GMT</pubDate></item>")
        site.put("/feed.xml", "<?xml version='1.0'?><rss version='2.0' xmlns:dc='http://purl.org/dc/elements/1.1/'>"
                 f"<channel><title>t</title><link>{site.base}/</link><description>d</description>{items}"
                 "</channel></rss>", "application/rss+xml")
        settings = load_settings({"RAGBUS_HOME": str(tmp_path / "home"), "RAGBUS_TRACING": "0"})
        local = build_local(settings.with_(allow_loopback=True))
        feed = f"{site.base}/feed.xml"
        with LocalRuntime(local.deps, local.bus) as runtime:
            add_listing(local.deps.state, feed, allow_loopback=True, now=local.deps.clock.now())
            local.deps.publisher.publish(FeedPollRequested(request_id=uuid.uuid4().hex, feed_urls=[feed],
                                                           requested_at=local.deps.clock.now()))
            assert runtime.wait_idle(120)

            def found(where):
                hits = search_documents(local.deps, "notes", 10, filters={"where": where})
                return sorted({h["url"].rsplit("/", 1)[1] for h in hits})

            assert found({"category": "CUDA"}) == ["glacier.html", "volcano.html"]
            assert found({"category": "Graphs"}) == ["volcano.html"]
            assert found({"author": "Ada"}) == ["harbor.html", "volcano.html"]
            assert found({"author": "Ada", "category": "CUDA"}) == ["volcano.html"]
            assert found({"category": "HIP"}) == []
        local.deps.index.close()


def test_in_a_corpus_without_dates_the_month_and_year_are_searched_as_words(tmp_path):
    """'The latest' over documents none of which is dated: the date filter finds nothing at any width,
    so the month and year (the old proxy the transformer drops for the filter) are searched as words."""
    from services.retriever.handler import widen_time_filter
    from services.transformer.handler import question_time_filter

    embedder = HashingEmbedder()
    index = HybridIndex(tmp_path / "index", embedder.dimension)
    notes = [("old", "The harbor crane schedule was revised in March 2024 for the winter season."),
             ("new", "The harbor crane schedule for November 2026 adds a night shift on weekdays.")]
    for doc, text in notes:
        chunk = Chunk(chunk_id=f"{doc}:0", document_id=doc, ordinal=0, text=text, title=doc, url=f"file:///n/{doc}.md",
                      published=None, source="file", origin="/n")
        index.upsert(doc, [chunk], embedder.embed([text]))
    record = _record("What is the latest harbor crane schedule?")
    record.filters, record.time_filter = question_time_filter(record, NOW)
    queries = [("rewritten", "latest harbor crane schedule")]
    first = search_all(queries, embedder=embedder, index=index, k=2, filters=record.search_filters())
    assert not first[0].hits
    filters, results, steps = widen_time_filter(record, queries, ["What is the latest harbor crane schedule?"],
                                                embedder=embedder, index=index, k=2,
                                                filters=record.search_filters(), results=first, leading=1)
    assert filters is None
    assert steps[-2:] == ["any date", "no dated document: searched with “November 2026”"]
    assert results[0].query == "latest harbor crane schedule November 2026"
    # as before the date filter: the words reach the lexical side (the dense side reads the question)
    lexical = {h.chunk.document_id: h.bm25_score for h in results[0].hits}
    assert lexical["new"] > lexical["old"]
    index.close()


def test_cli_search_defaults_to_rag_top_k_and_refuses_a_k_the_api_refuses(monkeypatch, deps):
    # `--k` defaulted to a fixed 10 (RAGBUS_TOP_K unread, where REST, MCP and `ask` read it) and offered up to
    # 100, then failed past 50 with "'k' is 60" from the API
    import json

    import shared.tools.cli as cli
    import shared.tools.cli.reading as reading

    configured = Deps(deps.settings.with_(top_k=2), publisher=deps.publisher, state=deps.state, clock=deps.clock,
                      embedder=deps.embedder, index=deps.index)
    monkeypatch.setattr(reading, "open_session", lambda *a, **k: SimpleNamespace(deps=configured,
                                                                                 settings=configured.settings))
    runner = CliRunner()
    result = runner.invoke(cli.app, ["search", "CUDA graphs", "--json"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)) == 2
    result = runner.invoke(cli.app, ["search", "CUDA graphs", "--k", "60"])
    assert result.exit_code == 2 and "--k" in result.output and "50" in result.output, result.output


def test_a_refused_source_lists_the_stored_sources_without_their_credentials(monkeypatch, tmp_path):
    # the listing a refused --source prints names each stored feed; a private feed's URL carries its token
    import shared.tools.cli as cli
    import shared.tools.cli.reading as reading

    state = _stored(tmp_path, {"url": "https://pv.example/posts/9", "origin": "https://pv.example/rss?feed_token=q7Zk2mWn5Rt"})
    session = SimpleNamespace(settings=SimpleNamespace(query_timeout_s=7.0), local=None,
                              deps=SimpleNamespace(clock=FakeClock(NOW), state=state),
                              stages=lambda: contextlib.nullcontext())
    monkeypatch.setattr(reading, "open_session", lambda *a, **k: session)
    result = CliRunner().invoke(cli.app, ["ask", "why?", "--source", "https://pv.example/other?feed_token=Hx4vL9pQ2sD"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, text
    assert "stored sources: https://pv.example/rss?feed_token=[redacted]" in text, text
    assert "q7Zk2mWn5Rt" not in text and "Hx4vL9pQ2sD" not in text, text


def test_a_stored_source_is_found_by_asking_for_one_match(monkeypatch, tmp_path):
    # the --source check read every stored document (in Firestore one read each, on every ask) to find one match
    import shared.tools.cli as cli
    import shared.tools.cli.reading as reading

    state = _stored(tmp_path, {"url": "file:///docs/notes/a%20b.md", "origin": "/docs/notes"},
                    {"url": "https://nv.example/posts/1", "origin": "https://nv.example/rss"})
    listed = []
    whole_list = state.list
    monkeypatch.setattr(state, "list", lambda collection, where=None, limit=None: listed.append(limit) or whole_list(
        collection, where, limit))
    session = SimpleNamespace(settings=SimpleNamespace(query_timeout_s=7.0), local=None,
                              deps=SimpleNamespace(clock=FakeClock(NOW), state=state),
                              stages=lambda: contextlib.nullcontext())
    monkeypatch.setattr(reading, "open_session", lambda *a, **k: session)
    monkeypatch.setattr("shared.query.api.search_documents", lambda *a, **k: [])
    for source in ("/docs/notes", "/docs/notes/a b.md", "file:///docs/notes/a%20b.md", "https://nv.example/rss",
                   "https://nv.example/posts/1"):
        listed.clear()
        result = CliRunner().invoke(cli.app, ["search", "graphs", "--json", "--source", source])
        assert result.exit_code == 0 and listed and set(listed) == {1}, (source, listed, result.output)
    for source in ("/docs", "https://nv.example/posts/"):  # a prefix of what is stored: still found
        result = CliRunner().invoke(cli.app, ["search", "graphs", "--json", "--source", source])
        assert result.exit_code == 0, (source, result.output)
