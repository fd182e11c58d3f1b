"""The real-text harness (issue 36): a part read from its writers' folders, and the figures it
reports (precision of ``answered`` beside the others, by genre and by kind, with intervals)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from shared.contract.errors import ConfigError
from shared.tools.eval import realdocs, realtext

pytestmark = pytest.mark.unit


def _writer(root, name, *, files=("a-one.txt",), questions=(), dialogues=()):
    folder = root / name
    (folder / "documents").mkdir(parents=True)
    for f in files:
        (folder / "documents" / f).write_text("The default port is 8080. Widgets come in red, blue and green.\n")
    manifest = {"about": "test", "documents": [
        {"file": f, "format": "text", "genre": "docs", "language": "en", "package": "p", "version": "1",
         "source": "/usr/share/doc/p/" + f, "licence": "MIT"} for f in files]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    (folder / "dialogues.jsonl").write_text("".join(json.dumps(d) + "\n" for d in dialogues))
    return folder


def _q(qid, kind="value", file="a-one.txt", genre="docs", **more):
    base = {"id": qid, "genre": genre, "kind": kind, "file": file, "question": "What is the default port?"}
    if kind == "near_miss":
        base["absent"] = ["9090"]
    else:
        base["keys"] = ["8080"]
    return {**base, **more}


def test_a_part_is_the_union_of_its_writers_folders(tmp_path):
    _writer(tmp_path / "test", "a", questions=[_q("q1"), _q("nm1", "near_miss")],
            dialogues=[{"id": "d1", "genre": "docs", "kind": "follow_up", "corpus": "realtext", "file": "a-one.txt",
                        "turns": ["What are widgets?", "Which colours do they come in?", "And the port?"],
                        "standalone": "What is the default port?", "keys": ["8080"]}])
    _writer(tmp_path / "test", "b", files=("b-two.txt",), questions=[_q("q2", "list", "b-two.txt", "essay")])
    part = realtext.load_part("test", root=tmp_path)
    assert [q.id for q in part.questions] == ["q1", "nm1", "q2"]
    assert len(part.document_folders) == 2 and part.genres["q2"] == "essay"
    assert [d.id for d in part.dialogues] == ["d1"] and len(part.dialogues[0].turns) == 3
    assert [q.id for q in realtext.load_part(tmp_path / "test").questions] == ["q1", "nm1", "q2"]  # as a folder
    assert part.writers == {"q1": "a", "nm1": "a", "q2": "b"}


def test_the_dev_part_names_each_questions_writer_and_the_report_shows_them(tmp_path):
    _writer(tmp_path / "dev", "a", questions=[_q("q1")])
    part = realtext.load_part("dev", root=tmp_path)
    assert part.writers["q1"] == "a" and {part.writers[q.id] for q in realdocs.load().questions} == {"realdocs"}
    scored = [_scored("q1", "value", "answered", True)]
    groups = realtext.grouped(scored, part.writers)
    results = {"dataset": {"part": "dev", "documents": 1, "genres": "docs 1"}, "model": "m",
               "machine": {"date": "d", "cpus": 2, "load_average": [0], "git_commit": "c"},
               "timings_s": {"ingest_s": 0, "questions_s": 0}, "verdicts": [],
               "figures": {**realdocs.figures(scored), **realtext.group_figures(scored)},
               "by_writer": {**groups, "b": groups["a"]}, "by_genre": groups, "by_kind": groups}
    assert "### By writer" in realtext.markdown(results) and "| b | 1 |" in realtext.markdown(results)


def test_the_dev_part_holds_the_realdocs_set_too(tmp_path):
    _writer(tmp_path / "dev", "a", questions=[_q("q1")])
    part = realtext.load_part("dev", root=tmp_path)
    old = realdocs.load()
    assert len(part.questions) == len(old.questions) + 1
    assert {part.genres[q.id] for q in old.questions} == {"docs"}


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "prose"}, "unknown kind 'prose'"),
    ({"genre": "poetry"}, "unknown genre 'poetry'"),
    ({"file": "nowhere.txt"}, "file 'nowhere.txt' is not in the part's manifests"),
    ({"keys": []}, "an answerable question needs at least one key"),
])
def test_a_bad_question_is_named(tmp_path, change, message):
    _writer(tmp_path / "test", "a", questions=[_q("q1", **change)])
    with pytest.raises(ConfigError, match=message):
        realtext.load_part("test", root=tmp_path)


def test_ids_and_file_names_are_unique_across_writers(tmp_path):
    _writer(tmp_path / "test", "a", questions=[_q("q1")])
    _writer(tmp_path / "test", "b", files=("b-two.txt",), questions=[_q("q1", file="b-two.txt")])
    with pytest.raises(ConfigError, match="id 'q1' is missing or repeated"):
        realtext.load_part("test", root=tmp_path)
    _writer(tmp_path / "other", "a")
    _writer(tmp_path / "other", "b")
    with pytest.raises(ConfigError, match="file names used twice: a-one.txt"):
        realtext.load_part(tmp_path / "other")


def _scored(qid, kind, outcome, correct):
    s = realdocs.Scored(qid, kind, "?", "a-one.txt", "answered", outcome, "", [], refused=outcome == "not_answerable")
    s.correct = correct
    return s


def test_precision_of_answered_counts_a_near_miss_answered_as_wrong():
    scored = [_scored("a", "value", "answered", True), _scored("b", "value", "answered", False),
              _scored("c", "value", "answered_with_caveat", False), _scored("d", "value", "not_answerable", False),
              _scored("n", "near_miss", "answered", False), _scored("m", "near_miss", "not_answerable", True)]
    figs = realtext.group_figures(scored)
    assert figs["answered"] == 3 and figs["answered_right"] == 1 and figs["answered_precision"] == pytest.approx(0.3333)
    lo, hi = figs["answered_precision_ci95"]
    assert lo < 1 / 3 < hi
    assert figs["key_facts_and_citation"] == 0.25 and figs["answerable_refused"] == 0.25
    assert figs["near_misses_refused"] == 0.5
    assert realdocs.figures(scored)["answered_precision"] == figs["answered_precision"]  # realdocs reports it too
    by = realtext.grouped(scored, {"a": "docs", "b": "docs", "n": "essay"})
    assert set(by) == {"docs", "essay", "?"} and by["essay"]["answered_precision"] == 0.0


def test_the_cli_asks_a_part_and_writes_its_own_figures(monkeypatch, tmp_path):
    import shared.tools.eval.realtext_run as run_module
    from shared.tools.cli import app

    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr(run_module, "run_realtext", lambda opts, progress=None: ran.append(opts) or {"verdicts": []})
    monkeypatch.setattr(realtext, "markdown", lambda results, show_failures=False: "figures")
    runner = CliRunner()
    assert runner.invoke(app, ["eval", "--dataset", "realtext", "--part", "dev"]).exit_code == 0
    assert (tmp_path / "docs" / "eval_realtext_dev.json").exists() and ran[0].part == "dev"
    folder = _writer(tmp_path / "mine", "a", questions=[_q("q1")])
    assert runner.invoke(app, ["eval", "--dataset", str(folder), "--reuse-ingest", "--cache", "c"]).exit_code == 0
    assert ran[1].part == str(folder) and (tmp_path / "c" / "eval_realtext_a.json").exists()


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "601"])
@pytest.mark.parametrize("dataset", [["--dataset", "realtext", "--part", "dev"], ["--dataset", "conversations"]])
def test_a_query_timeout_out_of_range_is_refused_before_anything_is_ingested(monkeypatch, tmp_path, dataset, seconds):
    # it was taken: every question then ended `failed` with no reason, after the whole part was ingested
    import shared.tools.eval.conversations_run as conversations_module
    import shared.tools.eval.realtext_run as run_module
    from shared.tools.cli import app

    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr(run_module, "run_realtext", lambda opts, progress=None: ran.append(opts) or {"verdicts": []})
    monkeypatch.setattr(conversations_module, "run_conversations", lambda opts, progress=None: ran.append(opts))
    result = CliRunner().invoke(app, ["eval", *dataset, "--query-timeout", seconds])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "--query-timeout" in said and "from 1 to 600" in said, said
    assert not ran and not (tmp_path / "docs").exists()


class _Ingesting:
    """A fake ingestion: the documents still pending at each look, and a clock that moves 100 s per look."""

    def __init__(self, pending_by_look):
        self.looks, self.pending_by_look, self.now = 0, pending_by_look, 0.0

    def status(self):
        pending = self.pending_by_look[min(self.looks, len(self.pending_by_look) - 1)]
        self.looks += 1
        self.now += 100.0
        return type("Status", (), {"pending": pending})()


def test_a_slow_ingestion_that_keeps_finishing_documents_is_waited_for():
    from shared.tools.eval.realdocs_run import wait_indexed

    # 5 documents, one finishing every 300 s: 1,500 s in all, over a 400 s stall limit, and never stalled that long
    slow = _Ingesting([["a", "b", "c", "d", "e"]] * 3 + [["b", "c", "d", "e"]] * 3 + [["c", "d", "e"]] * 3
                      + [["d", "e"]] * 3 + [["e"]] * 3 + [[]])
    assert wait_indexed(slow.status, 400.0, clock=lambda: slow.now, sleep=lambda s: None).pending == []


def test_an_ingestion_that_finishes_nothing_for_the_limit_is_an_error_naming_it():
    from shared.contract.errors import RagbusError
    from shared.tools.eval.realdocs_run import wait_indexed

    stuck = _Ingesting([["a", "b"], ["b"]] + [["b"]] * 20)
    with pytest.raises(RagbusError, match=r"1 document\(s\) still not indexed, none finished in the last 400 s"):
        wait_indexed(stuck.status, 400.0, clock=lambda: stuck.now, sleep=lambda s: None)
    assert stuck.looks < 10  # stopped once the limit passed, not at the end of the fake
