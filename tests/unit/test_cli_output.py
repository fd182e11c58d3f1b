"""What the CLI prints for people: progress rows, snippets, rewrites, ids, help, empty feeds."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from shared.contract import state_collections
from shared.contract.errors import InvalidInput
from shared.contract.messages import DocumentDeleted
from shared.contract.text import meaningful_rewrite, snippet, with_header
from shared.ingest import processed_items
from shared.ingest.listings import add_listing, list_listings, remove_listing
from shared.tools.cli import app, short_ids
from shared.tools.console import stage_counts
from tests.fakes import FakeClock, InMemoryStateStore, RecordingPublisher

pytestmark = pytest.mark.unit


def test_progress_has_one_row_per_stage_with_work():
    counts = {
        "feed_poller.feed-poll-requested": {"pending": 0, "acked": 1, "dead": 0},
        "indexer.document-cleaned": {"pending": 2, "acked": 9, "dead": 1},
        "indexer.document-deleted": {"pending": 0, "acked": 3, "dead": 0},
        "transformer.query-submitted": {"pending": 0, "acked": 0, "dead": 0},
        "transformer.query-graded": {"pending": 0, "acked": 0, "dead": 0},
    }
    rows = stage_counts(counts)
    assert rows == {
        "feed_poller": {"done": 1, "dead": 0, "total": 1},
        "indexer": {"done": 13, "dead": 1, "total": 15},
    }


def test_snippet_drops_the_header_and_the_repeated_title_and_cuts_at_a_word():
    text = with_header("Dense Retrieval", "2026-01-01", "https://x.test/a",
                       "Dense Retrieval\nSentence embeddings map text to vectors " + "word " * 80)
    out = snippet(text, 60, title="Dense Retrieval")
    assert not out.startswith(("Title:", "Dense Retrieval"))
    assert "Published:" not in out and "Source:" not in out
    assert out.endswith("…") and len(out) <= 61
    assert out[:-1].split(" ")[-1] in {"word", "vectors", "text", "to", "map", "embeddings"}
    assert snippet("short body") == "short body"


@pytest.mark.parametrize(("original", "rewritten", "shown"), [
    ("What is the boiling point of tungsten?", "What is the boiling point of tungsten? layers returns", None),
    ("When is exact search good enough?", "when is exact search good enough", None),
    ("How does BM25 saturate term frequency?", "How does BM25 (Best Matching 25) saturate term frequency? TF avgdl",
     "How does BM25 (Best Matching 25) saturate term frequency?"),
    ("tell me about HNSW", "HNSW graph parameters efSearch", "HNSW graph parameters efSearch"),
    # a question with no "?" and the terms appended: shown apart as "search terms added", not as a rewrite too
    ("tell me about HNSW", "tell me about HNSW layers efSearch", None),
])
def test_rewrites_are_shown_only_when_they_change_the_question(original, rewritten, shown):
    assert meaningful_rewrite(original, rewritten) == shown


def test_short_ids_are_unique_prefixes_of_at_least_eight():
    ids = ["a62ae7d7551f", "a62ae7d7c000", "ffac89f5aaaa"]
    assert short_ids(ids) == {"a62ae7d7551f": "a62ae7d75", "a62ae7d7c000": "a62ae7d7c", "ffac89f5aaaa": "ffac89f5"}


@pytest.mark.parametrize("command", [["ask", "--help"], ["traces", "--help"], ["feeds", "remove", "--help"]])
def test_help_shows_no_type_beside_flags(command):
    out = CliRunner().invoke(app, command, env={"COLUMNS": "120"}).output
    assert "<bool>" not in out
    assert re.search(r"--json|--failed|--keep-documents", out)


def test_help_text_is_not_eaten_by_markup():
    result = CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "200"})
    out = result.output
    assert "pip install -e '.[dev]'" in out
    # "[/ABSTAIN]" read as a closing markup tag ended the help with an error before the options
    assert result.exit_code == 0 and "PROVIDER=ANSWERABLE[/ABSTAIN]" in out
    assert "RAGBUS_QUERY_TIMEOUT_S" in CliRunner().invoke(app, ["ask", "--help"], env={"COLUMNS": "200"}).output
    assert "RAGBUS_DEMO_PORT" in CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200"}).output
    # "/up or /down [comment] rates" read "/up or /down  rates": rich took [comment] for a style and dropped it
    chat = " ".join(CliRunner().invoke(app, ["chat", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "/up or /down [comment] rates the last answer" in chat, chat
    listing = " ".join(CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output.split())
    assert "/up or /down [comment] rates" in listing, listing


def test_ask_timeout_defaults_to_the_configured_query_timeout(monkeypatch):
    import contextlib
    from types import SimpleNamespace

    import shared.tools.cli.reading as reading

    asked = []
    session = SimpleNamespace(settings=SimpleNamespace(query_timeout_s=7.0), local=None, deps=None,
                              stages=lambda: contextlib.nullcontext())
    monkeypatch.setattr(reading, "open_session", lambda *a, **k: session)
    answered = SimpleNamespace(status="answered", to_doc=lambda: {"status": "answered"})
    monkeypatch.setattr(reading, "_ask", lambda deps, q, **kw: asked.append(kw["timeout"]) or answered)
    runner = CliRunner()
    assert runner.invoke(app, ["ask", "why?", "--json"]).exit_code == 0
    assert runner.invoke(app, ["ask", "why?", "--json", "--timeout", "3"]).exit_code == 0
    assert asked == [None, 3.0]  # None: submit_query takes RAGBUS_QUERY_TIMEOUT_S, as the gateway does


def test_ask_accepts_a_configured_query_timeout_beyond_the_range_of_timeout(monkeypatch):
    # RAGBUS_QUERY_TIMEOUT_S=900 made every `ragbus ask` fail with "'timeout_s' is 900; send a number
    # of seconds from 1 to 600": the CLI passed the configured default as if the user had asked for it
    import contextlib
    import json
    from types import SimpleNamespace

    import shared.tools.cli.reading as reading
    from shared.contract.config import Settings
    from shared.contract.deps import Deps

    deps = Deps(Settings(query_timeout_s=900.0), state=InMemoryStateStore(), publisher=RecordingPublisher(),
                clock=FakeClock(datetime(2026, 1, 1, tzinfo=UTC)))
    session = SimpleNamespace(settings=deps.settings, local=None, deps=deps, stages=lambda: contextlib.nullcontext())
    monkeypatch.setattr(reading, "open_session", lambda *a, **k: session)
    result = CliRunner().invoke(app, ["ask", "why?", "--json"])
    # nothing runs the stages here, and the fake clock waits the 900 s out at once
    assert result.exit_code == 1, result.output
    record = json.loads(result.stdout)
    assert record["status"] == "timed_out"
    took = datetime.fromisoformat(record["deadline"]) - datetime.fromisoformat(record["created_at"])
    assert took.total_seconds() == 900.0
    refused = CliRunner().invoke(app, ["ask", "why?", "--timeout", "0"])
    assert refused.exit_code == 2 and "'--timeout' is 0" in refused.output and "timeout_s" not in refused.output


def _state_with_feed_items():
    state, publisher, clock = InMemoryStateStore(), RecordingPublisher(), FakeClock(datetime(2026, 1, 1, tzinfo=UTC))
    url = add_listing(state, "https://blog.example/feed.xml", allow_loopback=False, now=clock.now(),
                   resolver=lambda *a, **k: [(2, 1, 6, "", ("93.184.216.34", 0))])["url"]
    for n in range(2):
        state.put(state_collections.PROCESSED_ITEMS, f"feed-{n}", {"document_id": f"feed-{n}", "source": "feed",
                                                            "feed_url": url, "guid": str(n)})
    state.put(state_collections.PROCESSED_ITEMS, "other", {"document_id": "other", "source": "feed",
                                                     "feed_url": "https://else.example/f", "guid": "x"})
    return state, publisher, clock, url


def test_removing_a_feed_deletes_its_documents_only():
    state, publisher, clock, url = _state_with_feed_items()
    deleted = remove_listing(state, url, publisher=publisher, clock=clock)
    assert sorted(deleted) == ["feed-0", "feed-1"]
    assert list_listings(state) == []
    sent = [m for m in publisher.messages if isinstance(m, DocumentDeleted)]
    assert sorted(m.document_id for m in sent) == ["feed-0", "feed-1"]
    # a tombstone: no poll that began before the removal, nor a retry, brings it back
    assert processed_items.is_tombstone(state.get(state_collections.PROCESSED_ITEMS, "feed-0"))
    assert not processed_items.is_tombstone(state.get(state_collections.PROCESSED_ITEMS, "other"))


def test_removing_a_feed_can_keep_its_documents():
    state, publisher, clock, url = _state_with_feed_items()
    assert remove_listing(state, url, publisher=publisher, clock=clock, keep_documents=True) == []
    assert list_listings(state) == [] and not publisher.messages
    assert state.get(state_collections.PROCESSED_ITEMS, "feed-0") is not None


def test_removing_an_unknown_feed_is_an_error_that_changes_nothing():
    state, publisher, clock, url = _state_with_feed_items()
    with pytest.raises(InvalidInput, match="feeds list"):
        remove_listing(state, url + "x", publisher=publisher, clock=clock)
    assert len(list_listings(state)) == 1 and not publisher.messages


def test_the_command_reference_names_only_commands_and_flags_that_exist():
    from pathlib import Path

    reference = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    block = reference.split("## Every command", 1)[1].split("```", 2)[1]
    runner = CliRunner()
    checked = 0
    for line in block.splitlines():
        if "ragbus " not in line:
            continue
        words = line.split("#", 1)[0].split("ragbus ", 1)[1].split()
        path = [w for w in words[:2] if re.fullmatch(r"[a-z][a-z-]*", w) and w not in ("down",)][:2]
        if path and path[0] not in ("feeds", "sitemaps", "sources", "dead-letters"):
            path = path[:1]
        flags = set(re.findall(r"--[a-z][a-z-]*", line))
        out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).output
        assert "Usage" in out, (line, out)
        for flag in flags:
            assert flag in out, (line, flag)
        checked += 1
    assert checked >= 12


def test_an_ambiguous_prefix_lists_the_matches_and_an_ellipsis_only_for_more(capsys):
    from types import SimpleNamespace

    import typer

    from shared.tools.cli import resolve_query_id

    deps = SimpleNamespace(state=InMemoryStateStore())
    for query_id in ("0b9613e9fe8141", "0c35a9053c3a41"):
        deps.state.put(state_collections.QUERIES, query_id, {"id": query_id})
    with pytest.raises(typer.Exit):
        resolve_query_id(deps, "0")
    said = " ".join(capsys.readouterr().err.split())
    assert "2 queries start with '0' (0b9613e9fe81, 0c35a9053c3a);" in said  # both shown: no "..."
    for query_id in ("0d000000000000", "0e000000000000"):
        deps.state.put(state_collections.QUERIES, query_id, {"id": query_id})
    with pytest.raises(typer.Exit):
        resolve_query_id(deps, "0")
    assert "4 queries start with '0' (0b9613e9fe81, 0c35a9053c3a, 0d0000000000, ...);" in " ".join(
        capsys.readouterr().err.split())


def test_a_query_id_prefix_resolves_when_unique_and_is_refused_when_ambiguous():
    from types import SimpleNamespace

    import typer

    from shared.tools.cli import resolve_query_id

    state = InMemoryStateStore()
    for query_id in ("a62ae7d7551f00", "a62ae7d7c00000", "ffac89f5aaaaaa"):
        state.put(state_collections.QUERIES, query_id, {"id": query_id})
    deps = SimpleNamespace(state=state)
    assert resolve_query_id(deps, "ffac89f5") == "ffac89f5aaaaaa"
    assert resolve_query_id(deps, "a62ae7d7c") == "a62ae7d7c00000"
    assert resolve_query_id(deps, "a62ae7d7551f00") == "a62ae7d7551f00"
    assert resolve_query_id(deps, "0123") == "0123"  # unknown: left for the trace-id lookup
    with pytest.raises(typer.Exit):
        resolve_query_id(deps, "a62ae7d7")
    # an empty id is the prefix of every id: refused, not taken for the only query there is
    alone = SimpleNamespace(state=InMemoryStateStore())
    alone.state.put(state_collections.QUERIES, "ffac89f5aaaaaa", {"id": "ffac89f5aaaaaa"})
    for empty in ("", "  "):
        with pytest.raises(typer.Exit):
            resolve_query_id(alone, empty)


def test_the_text_answer_lists_what_was_done_without_the_model(monkeypatch):
    # `ragbus ask` with RAGBUS_LLM=openai and no server listening printed an extractive answer that
    # read like the model's: the fallbacks were in the JSON and on the page only
    from rich.console import Console

    import shared.tools.console as console_module
    from shared.query.record import QueryRecord

    record = QueryRecord.new("q1", "how does rrf work?", top_k=5, max_iterations=1, max_model_calls=12,
                             now=datetime(2026, 1, 1, tzinfo=UTC), timeout_s=60)
    record.status, record.outcome, record.answer = "answered", "answered_with_caveat", "RRF merges rankings. [1]"
    record.fallbacks = [{"stage": "grader", "iteration": 0, "reason": "could not reach http://127.0.0.1:9/v1"},
                        {"stage": "synthesizer", "iteration": 1, "reason": "[red]markup[/] stays text"}]
    shown = Console(record=True, width=200)
    monkeypatch.setattr(console_module, "console", shown)
    console_module.print_answer(record)
    out = shown.export_text()
    assert "without the model: grader, iteration 1 (could not reach http://127.0.0.1:9/v1)" in out
    assert "without the model: synthesizer, iteration 2 ([red]markup[/] stays text)" in out


def test_only_the_full_eval_run_writes_the_committed_figures(monkeypatch, tmp_path):
    import shared.tools.eval.report as report
    import shared.tools.eval.runner as runner_module

    monkeypatch.chdir(tmp_path)
    options = []
    monkeypatch.setattr(runner_module, "run_eval", lambda opts, progress=None: options.append(opts) or {"ran": 1})
    monkeypatch.setattr(report, "eval_markdown", lambda results: "figures")
    monkeypatch.setattr(runner_module, "targets_missed", lambda results: [])
    runner = CliRunner()
    assert runner.invoke(app, ["eval"]).exit_code == 0  # every option at its default: make eval's run
    assert (tmp_path / "docs" / "eval_results.json").exists()
    (tmp_path / "docs" / "eval_results.json").unlink()
    for args in (["--sample", "5"], ["--no-ablations"], ["--provider-sample", "openai=4"], ["--split", "all"]):
        assert runner.invoke(app, ["eval", *args, "--cache", "c"]).exit_code == 0, args
        assert not (tmp_path / "docs" / "eval_results.json").exists(), args
        assert (tmp_path / "c" / "eval_results.json").exists(), args
    assert runner.invoke(app, ["eval", "--sample", "5", "--out", "mine.json"]).exit_code == 0
    assert (tmp_path / "mine.json").exists() and len(options) == 6


def test_the_text_answer_shows_the_decision_the_reading_made_and_why(monkeypatch):
    # issue 20: `ragbus ask` printed "outcome: not_answerable" beside "iteration 1: score 0.95, accept"
    from rich.console import Console

    import shared.tools.console as console_module
    from shared.contract.ports import Grade
    from shared.query.record import Iteration, QueryRecord

    record = QueryRecord.new("q1", "which version added it?", top_k=5, max_iterations=1, max_model_calls=12,
                             now=datetime(2026, 1, 1, tzinfo=UTC), timeout_s=60)
    record.status, record.outcome = "answered", "not_answerable"
    grade = Grade(0.95, 0.9, 0.9, True, True, reasoning="answer probability 0.95. The reader: no quoted sentence "
                  "states: which version added it.")
    record.iterations = [Iteration(iteration=0, grade=grade, decision="abstain")]
    shown = Console(record=True, width=200)
    monkeypatch.setattr(console_module, "console", shown)
    console_module.print_answer(record)
    out = shown.export_text()
    assert "iteration 1: score 0.95, abstain" in out and "accept" not in out
    assert "the reader: no quoted sentence states: which version added it" in out


def test_the_text_answer_marks_the_iteration_the_answer_was_kept_from(monkeypatch):
    # issue 36 item 5: "iteration 1: score 0.79 (not grounded), refine" then "iteration 2: score 0.72, accept" above
    # an answer quoting iteration 1's passages; the page marks it "kept", so does the CLI
    from shared.contract.ports import Grade
    from shared.query.record import Iteration

    record = _record("When is exact search good enough?", outcome="answered_with_caveat", best_iteration=0)
    record.iterations = [Iteration(iteration=0, grade=Grade(0.79, 0.74, 0.75, False, True), decision="refine",
                                   failed_thresholds=["not grounded"]),
                         Iteration(iteration=1, grade=Grade(0.72, 0.74, 0.87, True, True), decision="accept")]
    out = _printed(monkeypatch, record)
    assert "iteration 1: score 0.79 (not grounded), refine, kept\n" in out
    assert "iteration 2: score 0.72, accept\n" in out


def test_a_score_below_its_threshold_heads_the_line_as_the_rule_reads(monkeypatch):
    # "score 0.60 (score 0.5999 < 0.6), refine": the score rounded up to its threshold beside the rule it failed
    from shared.contract.ports import Grade
    from shared.query.record import Iteration

    record = _record("When is exact search good enough?", outcome="answered_with_caveat", best_iteration=1)
    record.iterations = [Iteration(iteration=0, grade=Grade(0.5999, 0.74, 0.75, False, True), decision="refine",
                                   failed_thresholds=["score 0.5999 < 0.6", "not grounded"]),
                         Iteration(iteration=1, grade=Grade(0.72, 0.74, 0.87, True, True), decision="accept")]
    out = _printed(monkeypatch, record)
    assert "iteration 1: score 0.5999 < 0.6 (not grounded), refine\n" in out and "0.60" not in out


def _record(question: str, **fields):
    """A query record that ended answered, with ``fields`` set."""
    from shared.query.record import QueryRecord

    record = QueryRecord.new("q1", question, top_k=5, max_iterations=2, max_model_calls=12,
                             now=datetime(2026, 1, 1, tzinfo=UTC), timeout_s=60)
    record.status = "answered"
    for name, value in fields.items():
        setattr(record, name, value)
    return record


def _printed(monkeypatch, record) -> str:
    """What `ragbus ask` prints for ``record``."""
    from rich.console import Console

    import shared.tools.console as console_module

    shown = Console(record=True, width=200)
    monkeypatch.setattr(console_module, "console", shown)
    console_module.print_answer(record)
    return shown.export_text()


def _every_parameter():
    import typer.main

    root = typer.main.get_command(app)  # typer's own (vendored) click: duck-typed here

    def walk(command, path, ctx):
        for param in command.params:
            yield " ".join(path), param
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                yield from walk(sub, [*path, name], sub.context_class(sub, parent=ctx, info_name=name))

    return list(walk(root, ["ragbus"], root.context_class(root, info_name="ragbus")))


def test_every_argument_and_option_says_what_it_is_and_its_default():
    params = _every_parameter()
    assert len(params) > 40
    missing = [f"{path} {param.opts[-1]}" for path, param in params if not getattr(param, "help", None)]
    assert not missing, f"no help text: {missing}"
    # an option whose default is None says what it falls back to; typer shows the others' defaults
    unsaid = [f"{path} {param.opts[-1]}" for path, param in params
              if param.param_type_name == "option" and not param.is_flag and param.default is None
              and not param.required and "default" not in param.help.lower()]
    assert not unsaid, f"no default stated: {unsaid}"


def test_ask_help_describes_top_k_and_max_iterations_with_their_defaults():
    out = CliRunner().invoke(app, ["ask", "--help"], env={"COLUMNS": "200"}).output
    assert "How many chunks to retrieve" in out and "default: RAGBUS_TOP_K, else 10" in out
    assert "Refinements after the first" in out and "default: RAGBUS_MAX_ITERATIONS, else 2" in out


def test_version_names_the_installed_ragbus():
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"ragbus {version('ragbus')}"


def test_trace_times_carry_their_year_and_zone(monkeypatch):
    import time

    from shared.tools.cli import datetime_local

    monkeypatch.setenv("TZ", "Europe/Paris")
    time.tzset()
    try:
        assert datetime_local("2026-11-26T04:55:38.330010+00:00") == "2026-11-26 05:55:38+01:00"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_piped_output_is_not_wrapped(tmp_path):
    import subprocess
    import sys

    from tests.support import REPO, ragbus_env

    url = "http://127.0.0.1:8766/" + "/".join(["a-long-path-segment"] * 8) + "/feed.xml"
    env = ragbus_env(tmp_path / "home")
    env.pop("COLUMNS", None)
    run = [sys.executable, "-m", "shared.tools.cli"]
    subprocess.run([*run, "feeds", "add", url, "--allow-loopback"], cwd=REPO, env=env, check=True,
                   capture_output=True)
    listed = subprocess.run([*run, "feeds", "list"], cwd=REPO, env=env, check=True, capture_output=True,
                            text=True).stdout
    assert len(url) > 150 and url in listed  # whole, on one line, for grep and a pager


def test_the_text_answer_shows_the_time_read_from_the_question_and_its_widening(monkeypatch):
    from rich.console import Console

    import shared.tools.console as console_module
    from shared.query.record import QueryRecord

    record = QueryRecord.new("q1", "What is the latest NVSHMEM release?", top_k=5, max_iterations=1,
                             max_model_calls=12, now=datetime(2026, 11, 26, tzinfo=UTC), timeout_s=60)
    record.status, record.outcome = "answered", "answered"
    record.filters = {"since": "2025-12-01T00:00:00+00:00"}
    record.time_filter = {"phrase": "latest", "since": "2026-08-28T00:00:00+00:00", "until": None, "newest": True,
                          "window_days": 90, "widened": ["since 2026-05-30", "since 2025-12-01"]}
    shown = Console(record=True, width=200)
    monkeypatch.setattr(console_module, "console", shown)
    console_module.print_answer(record)
    out = shown.export_text()
    assert "filters: since 2025-12-01" in out
    assert "time: “latest” read as published since 2026-08-28; widened: since 2026-05-30 -> since 2025-12-01" in out


@pytest.mark.parametrize("outcome, iterations, heading", [
    ("answered", 1, "answered from the first search"),
    ("answered_with_caveat", 1, "answered with a caveat from the first search"),
    ("answered_with_caveat", 2, "answered with a caveat after 1 refinement"),
    ("answered", 3, "answered after 2 refinements"),
    ("not_answerable", 1, "not answerable from the corpus"),
    ("not_answerable", 2, "not answerable from the corpus (after 1 refinement)"),
])
def test_the_demo_heads_each_question_by_what_happened_to_it(outcome, iterations, heading):
    # issue 36 item 5: the demo headed "answered at once" an answer that ended answered_with_caveat
    from shared.query.record import Iteration
    from shared.tools.demo import what_happened

    record = _record("How does BM25 saturate term frequency?", outcome=outcome,
                     iterations=[Iteration(iteration=n) for n in range(iterations)])
    assert what_happened(record) == heading


def test_a_failed_file_s_name_shows_its_control_characters_as_escapes_not_dropped():
    """A file named 'bell<BEL><ESC>]0;title<BEL>.md' that failed was reported as "failed .../bell.md": the
    terminal-safe text dropped what a terminal would obey, naming a file that does not exist. Escaped, the name is
    both safe and findable."""
    from types import SimpleNamespace

    from shared.tools.cli import ingestion
    from shared.tools.console import err

    state = InMemoryStateStore()
    state.put(state_collections.DEAD_LETTERS, "l1", {"idempotency_key": "file-1/document-fetched", "at": "1",
                                                    "error": "InvalidInput: the file looks like binary data"})
    state.put(state_collections.PROCESSED_ITEMS, "file-1", {"path": "/docs/bell\x07\x1b]0;title\x07.md"})
    with err.capture() as captured:
        ingestion._name_outcomes(SimpleNamespace(state=state), {"file-1"})
    shown = captured.get()
    assert "failed /docs/bell\\x07\\x1b]0;title\\x07.md: " in shown, shown
    assert "\x07" not in shown and "\x1b" not in shown
