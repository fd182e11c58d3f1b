"""Rated answers as evaluation cases (shared/tools/eval/feedback.py) with a fake asker: the export's
shape, reading a file or folder back (bad lines named), what counts as a change, the report, and the
CLI refusing options that do not apply."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from shared.contract.errors import ConfigError, InvalidInput
from shared.query.record import QueryRecord
from shared.tools.cli import app
from shared.tools.eval import feedback


def record(query_id: str, answer: str, outcome: str = "answered", ratings=(), **more) -> QueryRecord:
    found = QueryRecord.from_doc({"id": query_id, "status": "answered" if outcome.startswith("answered") else outcome,
                                  "outcome": outcome, "original_query": f"question {query_id}?", "created_at": "",
                                  "deadline": "", "answer": answer, **more})
    found.feedback = [{"client": f"c{n}", "rating": r, "comment": f"comment {n}", "wrong_citations": [],
                       "expected": None, "at": f"2026-11-0{n + 1}T00:00:00+00:00"} for n, r in enumerate(ratings)]
    return found


def test_the_export_holds_every_rated_query_with_its_latest_rating():
    rated = record("q1", "BM25 ranks [1].", ratings=("up", "down"),
                   citations=[{"id": 1, "title": "BM25", "url": "https://x/", "document_id": "d", "chunk_id": "c"}],
                   filters={"source": "https://x/feed"}, standalone_question="What is BM25?")
    cases = feedback.export_cases([rated.to_doc(), record("q2", "no ratings").to_doc()])
    assert cases == [{
        "id": "q1", "question": "What is BM25?", "asked": "question q1?", "answer": "BM25 ranks [1].",
        "outcome": "answered", "citations": [{"id": 1, "title": "BM25", "url": "https://x/", "document_id": "d"}],
        "filters": {"source": "https://x/feed"}, "rating": "down", "comment": "comment 1", "wrong_citations": [],
        "expected": None, "ratings": {"up": 1, "down": 1}, "rated_at": "2026-11-02T00:00:00+00:00"}]
    assert set(cases[0]) == set(feedback.FIELDS)


def test_a_file_and_a_folder_read_back_and_bad_lines_are_named(tmp_path):
    cases = feedback.export_cases([record("q1", "a", ratings=("up",)).to_doc()])
    out = tmp_path / "export" / "feedback.jsonl"
    feedback.write_cases(cases, out)
    (out.parent / "feedback-older.jsonl").write_text(out.read_text().replace('"q1"', '"q0"'))
    (out.parent / "notes.jsonl").write_text("not read\n")
    assert feedback.is_feedback_dataset(out) and feedback.is_feedback_dataset(out.parent)
    assert not feedback.is_feedback_dataset(tmp_path)  # a folder without feedback.jsonl (a realtext part)
    assert feedback.load_cases(out) == cases
    assert [c["id"] for c in feedback.load_cases(out.parent)] == ["q0", "q1"]  # files in name order
    for text, said in (("{", "bad.jsonl:1: not a JSON line"), ('{"id": "x"}\n', "this one lacks question, answer"),
                       (json.dumps({**cases[0], "rating": "meh"}), "'rating' must be up or down"),
                       ("\n\n", "no rated cases")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=said):
            feedback.load_cases(bad)


def test_changes_are_counted_per_rating_and_up_rated_changes_are_regressions():
    cases = [
        {"id": "d1", "question": "q?", "answer": "wrong", "outcome": "answered", "rating": "down", "expected": "Right"},
        {"id": "d2", "question": "q?", "answer": "same", "outcome": "answered", "rating": "down"},
        {"id": "u1", "question": "q?", "answer": "kept  as\nit was", "outcome": "answered", "rating": "up"},
        {"id": "u2", "question": "q?", "answer": "good", "outcome": "answered", "rating": "up"},
        {"id": "u3", "question": "q?", "answer": "good", "outcome": "answered", "rating": "up"},
    ]
    now = {"d1": record("n1", "now the right answer"), "d2": record("n2", "same"),
           "u1": record("n3", "kept as it was"), "u2": record("n4", "good", outcome="answered_with_caveat")}

    def ask(case):
        if case["id"] == "u3":
            raise InvalidInput("filters: bad")
        return now[case["id"]]

    results = feedback.run_cases(cases, ask)
    assert results["summary"] == {"down_rated": 2, "down_changed": 1, "up_rated": 3, "up_same": 1,
                                  "with_expected": 1, "expected_found": 1, "failed_now": 1}
    assert feedback.regressions(results) == ["u2", "u3"]
    text = feedback.markdown(results)
    assert "| down-rated answers that now change | 1 of 2 |" in text
    assert "| up-rated answers that stay the same | 1 of 3 |" in text
    assert "good | answered_with_caveat: good | yes |" in text  # a regression is listed
    assert "good | failed: filters: bad | yes |" in text  # one that could not be asked says why
    assert "now the right answer" not in text and "now the right answer" in feedback.markdown(results,
                                                                                                show_failures=True)


@pytest.mark.parametrize(("args", "said"), [
    (["--from-feedback", "--sample", "3"], "--sample do not apply to --from-feedback"),
    (["--from-feedback", "--dataset", "realdocs"], "--dataset do not apply to --from-feedback"),
    (["--from-feedback", "--check"], "--check do not apply to --from-feedback"),
    (["--from-feedback", "--providers", "openai"], "--providers openai do not apply to --from-feedback"),
])
def test_options_that_do_not_apply_to_feedback_are_refused(tmp_path, monkeypatch, args, said):
    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(app, ["eval", *args])
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output


def test_a_dataset_file_refuses_options_of_the_other_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGBUS_HOME", str(tmp_path / "home"))
    out = tmp_path / "cases.jsonl"
    feedback.write_cases(feedback.export_cases([record("q1", "a", ratings=("up",)).to_doc()]), out)
    result = CliRunner().invoke(app, ["eval", "--dataset", str(out), "--kind", "value"])
    assert result.exit_code == 2 and "--kind do not apply to a feedback dataset" in " ".join(result.output.split())
