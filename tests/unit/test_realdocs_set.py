"""The real-text development set (issue 20): its loader, its scoring, and the hand-check of every
question made permanent (keys in the cleaned document, a near miss's fact in none)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cleaner.handler import clean_content
from shared.contract.errors import ConfigError
from shared.ingest.files import document_type
from shared.tools.eval import realdocs
from shared.tools.eval.realdocs_run import RealDocsOptions, select

pytestmark = pytest.mark.unit

SET = realdocs.load()


def _cleaned(document: realdocs.Document) -> str:
    path = SET.path_of(document)
    return clean_content(path.read_bytes(), document_type(path)[0], "file://" + str(path)).body


CLEANED = {d.file: _cleaned(d) for d in SET.documents}


# ---------------------------------------------------------------- the set itself


def test_the_set_has_the_size_and_mix_the_issue_asks_for():
    assert len(SET.answerable) >= 80 and len(SET.near_misses) >= 25
    assert len(SET.documents) >= 15
    assert {d.format for d in SET.documents} == {"html", "markdown", "text"}
    kinds = Counter(q.kind for q in SET.questions)
    assert set(kinds) == set(realdocs.KINDS), kinds  # every kind is represented
    asked_of = {q.file for q in SET.answerable}
    assert asked_of == {d.file for d in SET.documents}, "a document no answerable question is about"


def test_every_document_is_in_the_manifest_with_its_provenance():
    on_disk = {p.name for p in SET.documents_dir.iterdir()}
    assert on_disk == {d.file for d in SET.documents}
    for d in SET.documents:
        assert d.package and d.version and d.source.startswith("/usr/share/doc/") and d.licence, d
        assert "GPL" not in d.licence.replace("or GPL-2; used under BSD", ""), d  # permissive licences only
        assert CLEANED[d.file].strip(), f"{d.file} cleans to nothing"


@pytest.mark.parametrize("question", SET.answerable, ids=lambda q: q.id)
def test_every_key_is_in_its_cleaned_document(question):
    # the cleaner's output, not the raw file: a key the cleaner drops could never be quoted
    missing = [realdocs.key_label(k) for k in question.keys if not realdocs.key_in(k, CLEANED[question.file])]
    assert not missing, f"{question.id}: {missing} not in the cleaned {question.file}"


@pytest.mark.parametrize("question", SET.near_misses, ids=lambda q: q.id)
def test_a_near_miss_names_a_subject_the_set_has_but_its_fact_is_in_no_document(question):
    assert question.file in CLEANED
    for absent in question.absent:
        # the raw files too: a fact the cleaner drops is still in the document, so not a near miss
        holders = [d.file for d in SET.documents if realdocs.key_in(absent, CLEANED[d.file])
                   or realdocs.key_in(absent, SET.path_of(d).read_text(encoding="utf-8", errors="replace"))]
        assert not holders, f"{question.id}: {absent!r} is in {holders}"


def test_the_questions_file_is_one_json_object_a_line_with_unique_ids():
    lines = [json.loads(line) for line in (SET.root / "questions.jsonl").read_text().splitlines() if line.strip()]
    assert len(lines) == len(SET.questions) == len({q.id for q in SET.questions})


# ---------------------------------------------------------------- the loader


def _tiny_set(tmp_path: Path, *lines: dict) -> Path:
    (tmp_path / "documents").mkdir()
    (tmp_path / "documents" / "a.md").write_text("Alpha has 384 dimensions.\n")
    (tmp_path / "manifest.json").write_text(json.dumps({"documents": [
        {"file": "a.md", "format": "markdown", "package": "p", "version": "1", "source": "/usr/share/doc/p/a.md",
         "licence": "MIT"}]}))
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return tmp_path


GOOD = {"id": "q1", "kind": "prose", "file": "a.md", "question": "How many?", "keys": ["384", ["dims", "dimensions"]]}


def test_the_loader_reads_keys_and_alternatives(tmp_path):
    loaded = realdocs.load(_tiny_set(tmp_path, GOOD, {"id": "n1", "kind": "near_miss", "file": "a.md",
                                                      "question": "When?", "absent": ["released in"]}))
    assert loaded.questions[0].keys == ("384", ("dims", "dimensions"))
    assert [q.id for q in loaded.near_misses] == ["n1"]


@pytest.mark.parametrize(("line", "message"), [
    ({**GOOD, "kind": "poem"}, "unknown kind 'poem'"),
    ({**GOOD, "file": "b.md"}, "file 'b.md' is not in manifest.json"),
    ({**GOOD, "keys": []}, "needs at least one key"),
    ({**GOOD, "keys": [""]}, "a key is a non-empty string"),
    ({**GOOD, "kind": "near_miss"}, "a near miss has no keys and at least one absent string"),
])
def test_a_bad_question_line_is_an_error_naming_the_line(tmp_path, line, message):
    with pytest.raises(ConfigError, match="questions.jsonl line 1: .*" + message.replace("(", r"\(")):
        realdocs.load(_tiny_set(tmp_path, line))


def test_a_manifest_entry_without_its_provenance_is_an_error(tmp_path):
    root = _tiny_set(tmp_path, GOOD)
    manifest = json.loads((root / "manifest.json").read_text())
    del manifest["documents"][0]["licence"]
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="manifest.json: document 1 lacks licence"):
        realdocs.load(root)


def test_a_repeated_id_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="line 2: id 'q1' is missing or repeated"):
        realdocs.load(_tiny_set(tmp_path, GOOD, GOOD))


# ---------------------------------------------------------------- scoring

Q = realdocs.Question("q", "How many dimensions?", "pronoun_sentence", "a.md", keys=("384", ("dims", "dimensions")))
NEAR = realdocs.Question("n", "Which version added it?", "near_miss", "a.md", absent=("added in",))


def test_an_answer_with_every_key_and_the_right_citation_is_right():
    s = realdocs.score(Q, status="answered", outcome="answered", answer="It produces 384-dimensional\nvectors "
                       "(DIMENSIONS). [1]", cited_files=["a.md", "a.md"])
    assert s.correct and s.cited_right and not s.keys_missing and s.cited_files == ["a.md"]


def test_a_missing_key_fails():
    s = realdocs.score(Q, status="answered", outcome="answered", answer="It produces 384 of them. [1]",
                       cited_files=["a.md"])
    assert not s.correct and s.keys_missing == ["dims | dimensions"]


def test_the_right_keys_with_a_wrong_citation_fail():
    s = realdocs.score(Q, status="answered", outcome="answered", answer="384 dimensions [1]", cited_files=["b.md"])
    assert not s.correct and not s.cited_right


def test_a_refused_answerable_question_is_wrong_and_counted_as_refused():
    s = realdocs.score(Q, status="answered", outcome="not_answerable", answer="The documents do not say. 384 dims",
                       cited_files=["a.md"])
    assert s.refused and not s.correct


def test_a_near_miss_is_right_only_when_refused():
    refused = realdocs.score(NEAR, status="answered", outcome="not_answerable", answer="", cited_files=[])
    caveat = realdocs.score(NEAR, status="answered", outcome="answered_with_caveat", answer="x [1]",
                            cited_files=["a.md"])
    assert refused.correct and refused.refused
    assert not caveat.correct and not caveat.refused


def test_figures_targets_and_per_kind():
    scored = [
        realdocs.score(Q, status="answered", outcome="answered", answer="384 dims", cited_files=["a.md"]),
        realdocs.score(Q, status="answered", outcome="answered", answer="384 dims", cited_files=["b.md", "a.md"]),
        realdocs.score(Q, status="answered", outcome="not_answerable", answer="", cited_files=[]),
        realdocs.score(NEAR, status="answered", outcome="not_answerable", answer="", cited_files=[]),
        realdocs.score(NEAR, status="answered", outcome="answered", answer="x", cited_files=["a.md"]),
    ]
    figs = realdocs.figures(scored)
    assert figs["key_facts_and_citation"] == round(2 / 3, 4)
    assert figs["answerable_refused"] == round(1 / 3, 4)
    assert figs["near_misses_refused"] == 0.5
    assert figs["citation_precision"] == round(2 / 3, 4)  # a.md, b.md + a.md: 2 of 3 cited files right
    rows = {r["figure"]: r for r in realdocs.verdicts(figs)}
    assert rows["answerable_refused"]["met"] is False and rows["answerable_refused"]["goal"] == "<= 0.05"
    assert realdocs.missed({"verdicts": list(rows.values())})[0].startswith("key facts + right citation")
    kinds = realdocs.by_kind(scored)
    assert kinds["pronoun_sentence"]["right"] == 2 and kinds["near_miss"]["refused"] == 1


def test_keys_in_the_contexts_tell_a_reading_miss_from_a_retrieval_miss():
    read = realdocs.score(Q, status="answered", outcome="answered", answer="It is small. [1]", cited_files=["a.md"],
                          contexts=["Other text.", "It produces 384-dimensional\nvectors (dims)."])
    fetched = realdocs.score(Q, status="answered", outcome="answered", answer="It is small. [1]", cited_files=["a.md"],
                             contexts=["It produces 384 of them."])
    assert read.keys_in_contexts is True and fetched.keys_in_contexts is False
    assert realdocs.score(NEAR, status="answered", outcome="answered", answer="", cited_files=[],
                          contexts=["x"]).keys_in_contexts is None
    figs = realdocs.figures([read, fetched])
    assert figs["keys_in_contexts"] == 0.5 and figs["key_facts_and_citation"] == 0.0
    assert realdocs.by_kind([read, fetched])["pronoun_sentence"]["keys_in_contexts"] == 1


def test_a_figure_with_no_question_behind_it_is_not_met():
    figs = realdocs.figures([realdocs.score(Q, status="answered", outcome="answered", answer="384 dims",
                                            cited_files=["a.md"])])
    rows = {r["figure"]: r for r in realdocs.verdicts(figs)}
    assert rows["near_misses_refused"]["value"] is None and rows["near_misses_refused"]["met"] is None
    assert "near misses refused not measured (goal >= 0.8)" in realdocs.missed({"verdicts": list(rows.values())})


def test_failures_are_printed_with_the_answer_and_the_expected_keys():
    scored = realdocs.score(Q, status="answered", outcome="answered", answer="It is small. [1]", cited_files=["b.md"],
                            contexts=["Alpha has 384 dims."])
    results = {"dataset": {"name": "realdocs", "documents": 1, "formats": "markdown", "questions": 1,
                           "selection": ""},
               "figures": realdocs.figures([scored]), "machine": {"date": "d", "cpus": 2, "git_commit": "c"},
               "model": "local/x", "timings_s": {"ingest_s": 1, "questions_s": 1},
               "by_kind": realdocs.by_kind([scored]),
               "questions": [{**scored.__dict__, "keys": ["384", "dims | dimensions"]}]}
    results["verdicts"] = realdocs.verdicts(results["figures"])
    text = realdocs.markdown(results, show_failures=True)
    assert "| pronoun_sentence | 1 | 0 | 0.000 | 0 | 1 | 0.000 |" in text
    assert "expected keys ['384', 'dims | dimensions'] citing a.md" in text
    assert "missing keys ['384', 'dims | dimensions']; cited ['b.md']; the keys were in its contexts" in text
    assert "answer: It is small. [1]" in text
    assert "### Failures" not in realdocs.markdown(results)


# ---------------------------------------------------------------- selection and the command


def test_select_by_kind_and_a_seeded_sample():
    tables, how = select(SET.questions, RealDocsOptions(kinds=("table_row",)))
    assert tables and {q.kind for q in tables} == {"table_row"} and how == "kind table_row"
    five, _ = select(SET.questions, RealDocsOptions(sample=5))
    assert len(five) == 5 and five == select(SET.questions, RealDocsOptions(sample=5))[0]
    with pytest.raises(ConfigError, match="--kind tables: unknown"):
        select(SET.questions, RealDocsOptions(kinds=("tables",)))
    with pytest.raises(ConfigError, match="--sample 0"):
        select(SET.questions, RealDocsOptions(sample=0))


@pytest.mark.parametrize("n", [5, 9, 10, 30, 100])
def test_a_sample_is_drawn_in_proportion_to_each_kind(n):
    # a plain random 5 (seed 7) held no near miss, so that target read "not measured"
    picked, how = select(SET.questions, RealDocsOptions(sample=n))
    kinds = {q.kind for q in SET.questions}
    assert len(picked) == n and "in proportion to each kind" in how
    counts = {k: sum(q.kind == k for q in picked) for k in kinds}
    assert counts["near_miss"] >= 1
    if n >= len(kinds):
        assert all(counts.values()), counts
    for kind, count in counts.items():  # never far from its share of the set
        share = n * sum(q.kind == kind for q in SET.questions) / len(SET.questions)
        assert abs(count - share) <= 1.5, (kind, count, share)


def test_only_the_full_realdocs_run_writes_its_committed_figures(monkeypatch, tmp_path):
    import shared.tools.eval.realdocs_run as run_module
    from shared.tools.cli import app

    monkeypatch.chdir(tmp_path)
    ran = []
    fake = {"verdicts": [], "ok": 1}
    monkeypatch.setattr(run_module, "run_realdocs", lambda opts, progress=None: ran.append(opts) or fake)
    monkeypatch.setattr(realdocs, "markdown", lambda results, show_failures=False: "figures")
    runner = CliRunner()
    assert runner.invoke(app, ["eval", "--dataset", "realdocs"]).exit_code == 0
    assert (tmp_path / "docs" / "eval_realdocs.json").exists() and not (tmp_path / "docs" / "eval_results.json").exists()
    assert ran[0].sample is None and ran[0].kinds == ()
    (tmp_path / "docs" / "eval_realdocs.json").unlink()
    for args in (["--sample", "5"], ["--kind", "near_miss", "--kind", "table_row"]):
        assert runner.invoke(app, ["eval", "--dataset", "realdocs", *args, "--cache", "c"]).exit_code == 0, args
        assert not (tmp_path / "docs" / "eval_realdocs.json").exists(), args
        assert (tmp_path / "c" / "eval_realdocs.json").exists(), args
    assert ran[1].sample == 5 and ran[2].kinds == ("near_miss", "table_row")


@pytest.mark.parametrize(("args", "message"), [
    (["--dataset", "realdocs", "--split", "all"], "--split applies to fitz-gov only"),
    (["--dataset", "realdocs", "--no-ablations"], "--ablations applies to fitz-gov only"),
    (["--dataset", "realdocs", "--providers", "openai"], "--providers openai applies to fitz-gov only"),
    (["--dataset", "realdocs", "--slice", "3"], "--slice applies to fitz-gov only"),
    (["--dataset", "squad"], "--dataset 'squad': choose fitz-gov, realdocs, conversations, realtext, formats or a folder"),
    (["--dataset", "realdocs", "--part", "dev"], "--part applies to --dataset realtext only"),
    (["--dataset", "realtext"], "--dataset realtext needs --part dev or --part test"),
    (["--kind", "table_row"], "--kind, --show-failures and --reuse-ingest apply to --dataset realdocs only"),
])
def test_options_of_the_other_dataset_are_refused_before_any_work(monkeypatch, tmp_path, args, message):
    import shared.tools.eval.realdocs_run as run_module
    import shared.tools.eval.runner as runner_module
    from shared.tools.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_module, "run_realdocs", lambda *a, **k: pytest.fail("ran"))
    monkeypatch.setattr(runner_module, "run_eval", lambda *a, **k: pytest.fail("ran"))
    result = CliRunner().invoke(app, ["eval", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_check_exits_1_when_a_realdocs_target_is_missed(monkeypatch, tmp_path):
    import shared.tools.eval.realdocs_run as run_module
    from shared.tools.cli import app

    monkeypatch.chdir(tmp_path)
    verdicts = realdocs.verdicts({"key_facts_and_citation": 0.5, "near_misses_refused": 0.9,
                                  "answerable_refused": 0.0})
    monkeypatch.setattr(run_module, "run_realdocs", lambda opts, progress=None: {"verdicts": verdicts})
    monkeypatch.setattr(realdocs, "markdown", lambda results, show_failures=False: "figures")
    runner = CliRunner()
    assert runner.invoke(app, ["eval", "--dataset", "realdocs", "--sample", "3", "--cache", "c"]).exit_code == 0
    result = runner.invoke(app, ["eval", "--dataset", "realdocs", "--sample", "3", "--cache", "c", "--check"])
    assert result.exit_code == 1
    assert "targets not met: key facts + right citation (answerable) 0.500 (goal >= 0.8)" in " ".join(result.output.split())


def test_the_sets_readme_states_its_current_size():
    readme = " ".join((SET.root / "README.md").read_text().split())
    assert f"{len(SET.answerable)} answerable and {len(SET.near_misses)} near misses" in readme
    for d in SET.documents:
        assert f"`{d.file}`" in readme and d.licence in readme


def test_a_reused_ingest_keeps_its_home_and_a_fresh_one_leaves_nothing(tmp_path):
    from shared.tools.eval.realdocs_run import KEPT_HOME
    from shared.tools.eval.runner import kept_or_scratch_home

    with kept_or_scratch_home(tmp_path, KEPT_HOME, reuse_ingest=False) as scratch:
        (scratch / "x").write_text("x")
    assert not scratch.exists() and scratch.parent == tmp_path
    with kept_or_scratch_home(tmp_path, KEPT_HOME, reuse_ingest=True) as kept:
        (kept / "x").write_text("x")
    assert kept == tmp_path / KEPT_HOME and (kept / "x").exists()


def test_reuse_ingest_is_passed_on_and_never_writes_the_committed_figures(monkeypatch, tmp_path):
    import shared.tools.eval.realdocs_run as run_module
    from shared.tools.cli import app

    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr(run_module, "run_realdocs", lambda opts, progress=None: ran.append(opts) or {"verdicts": []})
    monkeypatch.setattr(realdocs, "markdown", lambda results, show_failures=False: "figures")
    result = CliRunner().invoke(app, ["eval", "--dataset", "realdocs", "--reuse-ingest", "--cache", "c"])
    assert result.exit_code == 0 and ran[0].reuse_ingest and ran[0].sample is None
    assert not (tmp_path / "docs").exists() and (tmp_path / "c" / "eval_realdocs.json").exists()


def test_an_installed_ragbus_ships_the_set():
    # a wheel built from pyproject.toml held all 20 files of the set (checked with `pip wheel .`);
    # this keeps the package-data glob that puts them there
    import tomllib

    from tests.support import REPO

    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["shared"]
    shared = REPO / "shared"
    shipped = {p for g in globs for p in shared.glob(g) if p.is_file()}
    assert {p for p in SET.root.rglob("*") if p.is_file()} <= shipped


def test_a_kept_home_holding_another_checkouts_documents_is_refused(tmp_path):
    # a --cache copied from another worktree kept that worktree's documents (keyed by path) and
    # ingested the set again beside them: 164 documents for 82, and half the citations "wrong"
    from datetime import UTC, datetime

    from shared.contract.errors import ConfigError
    from shared.ingest.processed_items import claim
    from shared.tools.eval.realdocs_run import refuse_foreign_documents
    from tests.fakes import InMemoryStateStore

    state = InMemoryStateStore()
    here, there = tmp_path / "here" / "documents", tmp_path / "there" / "documents"
    for root in (here, there):
        path = root / "a.md"
        claim(state, f"file-{root.parent.name}", "h", now=datetime.now(UTC),
              fields={"source": "file", "path": str(path), "origin": str(root), "root": str(root)})
    with pytest.raises(ConfigError, match="other folders") as refused:
        refuse_foreign_documents(state, [here], tmp_path / "home")
    assert str(there) in str(refused.value) and str(here) not in str(refused.value)
    refuse_foreign_documents(state, [here, there], tmp_path / "home")  # both are this set's folders: fine
    # a symlink in a set folder is stored at its target's path, with the set folder as its root: the set's own
    claim(state, "file-linked", "h", now=datetime.now(UTC),
          fields={"source": "file", "path": str(tmp_path / "elsewhere" / "b.md"), "origin": str(here), "root": str(here)})
    claim(state, "file-linked-below", "h", now=datetime.now(UTC),  # ingested from a folder inside a set folder
          fields={"source": "file", "path": str(tmp_path / "elsewhere" / "c.md"), "root": str(here / "sub")})
    refuse_foreign_documents(state, [here, there], tmp_path / "home")
