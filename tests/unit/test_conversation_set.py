"""The conversation set (issue 24 item 4): its shape, its keys in its documents, its scoring."""

from __future__ import annotations

import html
import json
import re

import pytest

from shared.contract.errors import ConfigError
from shared.contract.ports import ConversationTurn
from shared.query.reading.followup import standalone_question
from shared.tools.eval import conversations, realdocs

DIALOGUES = conversations.load()


def _text(path) -> str:
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".html":
        raw = html.unescape(re.sub(r"<[^>]+>", " ", raw))
    return re.sub(r"[*`]", "", raw)  # Markdown's emphasis and code marks, which cleaning drops


def test_the_set_has_the_dialogues_the_issue_asks_for():
    follow = [d for d in DIALOGUES if d.kind == conversations.FOLLOW_UP]
    change = [d for d in DIALOGUES if d.kind == conversations.TOPIC_CHANGE]
    assert len(follow) >= conversations.MIN_FOLLOW_UPS and len(change) >= conversations.MIN_TOPIC_CHANGES
    assert {d.corpus for d in follow} == set(conversations.CORPORA)
    assert any(len(d.turns) == 3 for d in follow)


@pytest.mark.parametrize("dialogue", DIALOGUES, ids=[d.id for d in DIALOGUES])
def test_every_key_is_in_the_dialogues_document(dialogue):
    text = _text(conversations.document_folders()[dialogue.file])
    for key in dialogue.keys:
        assert realdocs.key_in(key, text), (dialogue.id, key)


def test_the_offline_rule_leaves_every_topic_change_alone():
    for dialogue in DIALOGUES:
        if dialogue.kind != conversations.TOPIC_CHANGE:
            continue
        earlier = [ConversationTurn(t) for t in dialogue.turns[:-1]]
        assert standalone_question(dialogue.last, earlier).question == dialogue.last, dialogue.id


def test_a_malformed_dialogue_is_named(tmp_path):
    good = {"id": "a", "kind": "follow_up", "corpus": "sample", "file": "bm25-ranking-explained.html",
            "turns": ["What is BM25?", "Who made it?"], "standalone": "Who made BM25?", "keys": ["Robertson"]}
    for change, message in [({"kind": "x"}, "kind 'x'"), ({"file": "nope.md"}, "file 'nope.md'"),
                            ({"turns": ["one"]}, "two or three"), ({"keys": []}, "at least one key"),
                            ({"kind": "topic_change"}, "is its last turn")]:
        (tmp_path / "dialogues.jsonl").write_text(json.dumps({**good, **change}) + "\n")
        with pytest.raises(ConfigError, match=message):
            conversations.load(tmp_path)


def _scored(correct: bool, keys_missing=()) -> realdocs.Scored:
    return realdocs.Scored("x", "prose", "q", "f", "answered", "answered", "a", ["f"], list(keys_missing),
                           correct=correct)


def test_the_figures_compare_the_ways_of_asking_and_count_polluted_topic_changes():
    rows = [
        conversations.DialogueResult("f1", "follow_up", "realdocs", ["A?", "it?"], "A it?", "A it?",
                                     _scored(True), _scored(True), _scored(False)),
        conversations.DialogueResult("f2", "follow_up", "sample", ["B?", "its?"], "B its?", "B its?",
                                     _scored(False, ["k"]), _scored(True), _scored(False)),
        conversations.DialogueResult("t1", "topic_change", "realdocs", ["A?", "C?"], "C?", "C?",
                                     _scored(True), _scored(True), None),
        conversations.DialogueResult("t2", "topic_change", "realdocs", ["A?", "D?"], "D?", "D of A?",
                                     _scored(True), _scored(True), None),
    ]
    figs = conversations.figures(rows)
    assert figs["follow_up_right_in_conversation"] == 0.5 and figs["follow_up_right_standalone"] == 1.0
    assert figs["follow_up_right_typed_alone"] == 0.0
    assert figs["follow_up_only_standalone"] == 1 and figs["follow_ups_rewritten"] == 2
    assert figs["topic_changes_polluted"] == 1  # t2's question was changed by the conversation
    verdicts = conversations.verdicts(figs)
    assert [v["met"] for v in verdicts] == [False, False, False]


def test_the_cli_runs_the_set_and_refuses_options_of_the_other_datasets(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import shared.tools.eval.conversations_run as run_module
    from shared.tools.cli import app

    monkeypatch.chdir(tmp_path)
    ran = []
    figs = {"follow_ups": 30, "topic_changes": 10, "follow_up_right_in_conversation": 0.8,
            "follow_up_right_standalone": 0.9, "topic_changes_polluted": 0}

    def fake(options, progress=None):
        ran.append(options)
        return {"verdicts": conversations.verdicts(figs)}

    monkeypatch.setattr(run_module, "run_conversations", fake)
    monkeypatch.setattr(conversations, "markdown", lambda results, show_failures=False: "figures")
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "--dataset", "conversations"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "docs" / "eval_conversations.json").exists()
    assert runner.invoke(app, ["eval", "--dataset", "conversations", "--check"]).exit_code == 1  # 0.8 < 0.9
    for args, message in ([["--sample", "5"], "--sample do not apply"], [["--providers", "openai"], "--providers"]):
        result = runner.invoke(app, ["eval", "--dataset", "conversations", *args])
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert len(ran) == 2


@pytest.mark.parametrize("reuse_ingest", [True, False])
def test_a_failed_ingest_removes_a_kept_home_it_half_filled(monkeypatch, tmp_path, reuse_ingest):
    """conversations ingests through realdocs_run.ingest_into, as realdocs and realtext do: a failure in
    the second folder removes a kept home (it would pass for a filled one next time); a scratch home is
    its caller's to remove."""
    from types import SimpleNamespace

    from shared.tools.eval import realdocs_run
    from shared.tools.eval.conversations_run import ConversationOptions

    home = tmp_path / "conversations-home"
    home.mkdir()
    closed = []
    from tests.fakes import InMemoryStateStore

    system = SimpleNamespace(deps=SimpleNamespace(index=SimpleNamespace(close=lambda: closed.append(True)),
                                                  state=InMemoryStateStore()))
    seen = []

    def ingest(system, settings, folder, timeout_s, failed=None):
        seen.append((folder.name, timeout_s))
        if folder.name == "b":
            raise RuntimeError("disk full")
        return {f"doc-{folder.name}": f"{folder.name}.md"}

    monkeypatch.setattr(realdocs_run, "ingest_documents", ingest)
    options = ConversationOptions(ingest_timeout_s=12.0, reuse_ingest=reuse_ingest)
    assert realdocs_run.ingest_into(system, None, [tmp_path / "a"], options, home) == {"doc-a": "a.md"}
    with pytest.raises(RuntimeError, match="disk full"):
        realdocs_run.ingest_into(system, None, [tmp_path / "a", tmp_path / "b"], options, home)
    assert seen == [("a", 12.0), ("a", 12.0), ("b", 12.0)]
    assert home.exists() is not reuse_ingest and closed == [True] * reuse_ingest


def test_the_last_turn_is_judged_by_the_question_the_loop_read_not_the_one_shown(monkeypatch):
    # no well-formed rewrite: the loop reads "Why?" with the earlier question after it, the record shows "Why?";
    # counted as rewritten (and a topic change so read polluted), with what was shown beside it
    from types import SimpleNamespace

    import shared.query.api as api
    import shared.runtime.local as local
    import shared.tools.eval.pipeline as pipeline
    from shared.tools.eval import conversations_run

    read = "Why (how does frobd rotate its logs)?"

    records = {}

    def record(text, conversation_id=None):
        question = read if conversation_id else text
        records[len(records)] = SimpleNamespace(id=len(records), conversation_id="c1", question=question,
                                                standalone_question=text, best_iteration=None, iterations=[])
        return records[len(records) - 1]

    runtime = SimpleNamespace(start=lambda: runtime, stop=lambda: None)
    monkeypatch.setattr(api, "submit_query", lambda deps, text, **kw: record(text, kw.get("conversation_id")))
    monkeypatch.setattr(api, "wait_for_query", lambda deps, i, timeout: records[i])
    monkeypatch.setattr(local, "LocalRuntime", lambda *a: runtime)
    monkeypatch.setattr(pipeline, "reduce_record", lambda r: SimpleNamespace(status="done", outcome="refused",
                                                                            answer="", cited=[]))
    monkeypatch.setattr(conversations_run.realdocs, "score", lambda *a, **kw: _scored(False))
    dialogue = conversations.Dialogue("t9", conversations.TOPIC_CHANGE, "sample", "f.md",
                                      ("How does frobd rotate its logs?", "Why?"), "Why?", ())
    system = SimpleNamespace(deps=SimpleNamespace(), bus=None)
    (result,), _ = conversations_run.ask_dialogues(system, [dialogue], {}, concurrency=1, query_timeout_s=5,
                                                   say=lambda _m: None)
    assert (result.asked_as, result.shown_as) == (read, "Why?")
    assert result.rewritten and result.polluted
    figs = conversations.figures([result])
    from dataclasses import asdict
    text = conversations.markdown({"figures": figs, "verdicts": conversations.verdicts(figs),
                                   "machine": {"date": "d", "cpus": 2, "git_commit": "c"}, "model": "m",
                                   "dataset": {"documents": 1}, "timings_s": {"questions_s": 1, "queries": 3},
                                   "dialogues": [asdict(result)]}, show_failures=True)
    assert f"asked as: {read!r} (shown as 'Why?')" in text
