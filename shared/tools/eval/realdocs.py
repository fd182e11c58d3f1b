"""The real-text development set (``realdocs``): documentation nobody on this project wrote.

The documents are files shipped in Debian packages under permissive licences (see
``datasets/realdocs/README.md`` and ``manifest.json``: package, path, version and licence
of each); ``questions.jsonl`` holds one question a line:

- an answerable question names the ``file`` that holds the answer and its ``keys``: short,
  exact strings that must all appear in a correct answer (case and runs of whitespace
  ignored; a key may be a list of alternatives where the text states the fact two ways);
- a near miss (``kind`` ``near_miss``) names the ``file`` that mentions its subject, and
  ``absent``: strings an answer stating the asked fact would need, which no document of
  the set contains (the right behaviour is to refuse).

Each question carries the ``kind`` of place its answer sits in (:data:`KINDS`), so the
figures can be read per kind: a reader that cannot quote a table row or a sentence that
opens with ``It ...`` shows up there and not only in the total.

Scoring follows the issue's targets: an answerable question is right when every key is in
the answer *and* a citation points at the right file; a question is refused when its
outcome is ``not_answerable``; citation precision is the share of the files an answer
cites that are the right one (micro over the answerable questions). Beside them, whether
every key was in the passages the answer was written from (the kept iteration's contexts)
splits a miss into one of reading (the fact was there) and one of retrieval.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.contract.errors import ConfigError

NAME = "realdocs"
ROOT = Path(__file__).resolve().parent / "datasets" / NAME

NEAR_MISS = "near_miss"
#: where an answer sits in its document; ``near_miss``: nowhere (the asked fact is absent)
KINDS = {
    "prose": "a sentence of running text",
    "list_item": "a bullet (often without a full stop)",
    "table_row": "a row of a table",
    "definition": "a definition-list entry (term, then its description)",
    "identifier_sentence": "a sentence that starts with a lowercase identifier (`foo_bar returns ...`)",
    "pronoun_sentence": "a sentence opening with a reference (It, This, ...) whose subject is in the one before",
    "paraphrase": "a question worded unlike the text",
    "multi_part": "a question asking two or more things",
    NEAR_MISS: "the documents name the subject but not the asked fact: the answer is a refusal",
}

#: issue 20's targets on the real-text set: (figure, what, op, bound)
TARGETS: tuple[tuple[str, str, str, float], ...] = (
    ("key_facts_and_citation", "key facts + right citation (answerable)", ">=", 0.8),
    ("near_misses_refused", "near misses refused", ">=", 0.8),
    ("answerable_refused", "answerable questions refused", "<=", 0.05),
)

Key = str | tuple[str, ...]  # one string, or alternatives of which one must appear


@dataclass(frozen=True)
class Document:
    file: str  # name under documents/
    format: str
    package: str
    version: str
    source: str  # the path the package installs it at
    licence: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    kind: str
    file: str  # the document that holds the answer (near miss: that names the subject)
    keys: tuple[Key, ...] = ()
    absent: tuple[str, ...] = ()  # near miss: strings no document holds
    note: str = ""

    @property
    def near_miss(self) -> bool:
        return self.kind == NEAR_MISS


@dataclass(frozen=True)
class RealDocs:
    root: Path
    documents: tuple[Document, ...]
    questions: tuple[Question, ...]

    @property
    def documents_dir(self) -> Path:
        return self.root / "documents"

    def path_of(self, document: Document | str) -> Path:
        return self.documents_dir / (document if isinstance(document, str) else document.file)

    @property
    def answerable(self) -> list[Question]:
        return [q for q in self.questions if not q.near_miss]

    @property
    def near_misses(self) -> list[Question]:
        return [q for q in self.questions if q.near_miss]


def key_from_json(value: Any, where: str) -> Key:
    """A key as questions.jsonl writes it: a string, or a list of alternatives; else a ConfigError."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: a key is a non-empty string or a list of non-empty alternatives, not {value!r}")


def jsonl_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """Each non-blank line of a set's JSON-lines file, parsed, with where it stands ("name line N")
    for the caller's errors. The file is read now, so an unreadable one fails before anything
    else is checked; a line that is not JSON is a :class:`ConfigError` when it is reached."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc})") from None
    return _parsed(path.name, lines)


def _parsed(name: str, lines: list[str]) -> Iterator[tuple[str, Any]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name} line {number}"
        try:
            yield where, json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{where}: not JSON ({exc})") from None


def load(root: Path = ROOT) -> RealDocs:
    """Read the manifest and the questions; a malformed line or a reference to an unknown file
    is a :class:`ConfigError` naming the line."""
    try:
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{root / 'manifest.json'}: cannot be read ({exc})") from None
    documents = []
    for number, entry in enumerate(manifest.get("documents") or [], 1):
        missing = [k for k in Document.__dataclass_fields__ if not isinstance(entry.get(k), str) or not entry[k]]
        if missing:
            raise ConfigError(f"{root / 'manifest.json'}: document {number} lacks {', '.join(missing)}")
        documents.append(Document(**{k: entry[k] for k in Document.__dataclass_fields__}))
    if not documents:
        raise ConfigError(f"{root / 'manifest.json'}: no documents listed")
    files = {d.file for d in documents}
    questions: list[Question] = []
    seen: set[str] = set()
    for where, raw in jsonl_lines(root / "questions.jsonl"):
        kind = raw.get("kind")
        if kind not in KINDS:
            raise ConfigError(f"{where}: unknown kind {kind!r}; one of {', '.join(KINDS)}")
        if raw.get("file") not in files:
            raise ConfigError(f"{where}: file {raw.get('file')!r} is not in manifest.json")
        qid = raw.get("id") or ""
        if not qid or qid in seen:
            raise ConfigError(f"{where}: id {qid!r} is missing or repeated")
        seen.add(qid)
        keys = tuple(key_from_json(k, where) for k in raw.get("keys", []))
        absent = tuple(raw.get("absent", []))
        if kind == NEAR_MISS and (keys or not absent):
            raise ConfigError(f"{where}: a near miss has no keys and at least one absent string")
        if kind != NEAR_MISS and not keys:
            raise ConfigError(f"{where}: an answerable question needs at least one key")
        questions.append(Question(qid, raw["question"], kind, raw["file"], keys, absent, raw.get("note", "")))
    return RealDocs(root, tuple(documents), tuple(questions))


_SPACE = re.compile(r"\s+")


def normalised(text: str) -> str:
    """Case folded, every run of whitespace one space: a key split over a line break still matches."""
    return _SPACE.sub(" ", text).strip().casefold()


def key_in(key: Key, text: str) -> bool:
    return keys_in((key,), text)


def keys_in(keys: Sequence[Key], text: str) -> bool:
    """Every key (or one of a key's alternatives) is in ``text``."""
    haystack = normalised(text)
    return all(any(normalised(a) in haystack for a in ((k,) if isinstance(k, str) else k)) for k in keys)


def key_label(key: Key) -> str:
    return key if isinstance(key, str) else " | ".join(key)


@dataclass
class Scored:
    """One question's result as scored."""

    id: str
    kind: str
    question: str
    file: str
    status: str
    outcome: str | None
    answer: str
    cited_files: list[str]  # distinct, in citation order; "?" for a citation of no document of the set
    keys_missing: list[str] = field(default_factory=list)
    keys_in_contexts: bool | None = None  # answerable: every key in the passages the answer was written from
    refused: bool = False
    cited_right: bool = False
    correct: bool = False  # answerable: every key and a citation of the right file; near miss: refused

    @property
    def failed(self) -> bool:
        return not self.correct


def score(question: Question, *, status: str, outcome: str | None, answer: str, cited_files: Sequence[str],
          contexts: Sequence[str] | None = None) -> Scored:
    """Score one answer (``cited_files``: the set's file of each citation, in order; ``contexts``:
    the texts of the passages it was written from, None when unknown)."""
    cited = list(dict.fromkeys(cited_files))
    refused = outcome == "not_answerable"
    out = Scored(question.id, question.kind, question.question, question.file, status, outcome, answer, cited,
                 refused=refused)
    if question.near_miss:
        out.correct = refused
        return out
    out.keys_missing = [key_label(k) for k in question.keys if not key_in(k, answer)]
    if contexts is not None:
        retrieved = "\n".join(contexts)
        out.keys_in_contexts = keys_in(question.keys, retrieved)
    out.cited_right = question.file in cited
    out.correct = status == "answered" and not refused and not out.keys_missing and out.cited_right
    return out


def _ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 4)


def figures(scored: Sequence[Scored]) -> dict[str, Any]:
    """The three target figures, citation precision and the counts behind them."""
    from shared.tools.eval.metrics import wilson_interval

    answerable = [s for s in scored if s.kind != NEAR_MISS]
    near = [s for s in scored if s.kind == NEAR_MISS]
    right = sum(s.correct for s in answerable)
    refused = sum(s.refused for s in answerable)
    near_refused = sum(s.refused for s in near)
    cited = sum(len(s.cited_files) for s in answerable)
    cited_right = sum(s.cited_right for s in answerable)
    answered = [s for s in scored if s.outcome == "answered"]
    answered_right = sum(s.correct for s in answered if s.kind != NEAR_MISS)  # a near miss answered is wrong

    def ci(k: int, n: int) -> list[float] | None:
        return None if n == 0 else [round(x, 4) for x in wilson_interval(k, n)]

    return {
        "answerable": len(answerable), "near_misses": len(near),
        "key_facts_and_citation": _ratio(right, len(answerable)),
        "key_facts_and_citation_ci95": ci(right, len(answerable)),
        "keys_found": _ratio(sum(not s.keys_missing for s in answerable), len(answerable)),
        "keys_in_contexts": _ratio(sum(s.keys_in_contexts is True for s in answerable),
                                   sum(s.keys_in_contexts is not None for s in answerable)),
        "right_file_cited": _ratio(cited_right, len(answerable)),
        "near_misses_refused": _ratio(near_refused, len(near)),
        "near_misses_refused_ci95": ci(near_refused, len(near)),
        "answerable_refused": _ratio(refused, len(answerable)),
        "answerable_refused_ci95": ci(refused, len(answerable)),
        "citation_precision": _ratio(cited_right, cited),
        "cited_files": cited,
        "answered": len(answered), "answered_right": answered_right,
        "answered_precision": _ratio(answered_right, len(answered)),
        "answered_precision_ci95": ci(answered_right, len(answered)),
        "outcomes_answerable": dict(Counter(str(s.outcome or s.status) for s in answerable)),
        "outcomes_near_misses": dict(Counter(str(s.outcome or s.status) for s in near)),
    }


def by_kind(scored: Sequence[Scored]) -> dict[str, dict[str, Any]]:
    """Per kind: how many, how many right, refused, citation precision."""
    out: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        rows = [s for s in scored if s.kind == kind]
        if not rows:
            continue
        cited = sum(len(s.cited_files) for s in rows)
        out[kind] = {"questions": len(rows), "right": sum(s.correct for s in rows),
                     "share_right": _ratio(sum(s.correct for s in rows), len(rows)),
                     "refused": sum(s.refused for s in rows),
                     "keys_in_contexts": sum(s.keys_in_contexts is True for s in rows),
                     "citation_precision": None if kind == NEAR_MISS else _ratio(sum(s.cited_right for s in rows),
                                                                                  cited)}
    return out


def verdicts(figs: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for figure, what, op, bound in TARGETS:
        value = figs.get(figure)
        met = None if value is None else (value >= bound if op == ">=" else value <= bound)
        rows.append({"figure": figure, "what": what, "goal": f"{op} {bound:g}", "value": value,
                     "ci95": figs.get(f"{figure}_ci95"), "met": met})
    return rows


def missed(results: Mapping[str, Any]) -> list[str]:
    """``"what value (goal)"`` for every target not met (a figure not measured is not met)."""
    out = []
    for row in results["verdicts"]:
        if row["met"] is not True:
            value = "not measured" if row["value"] is None else f"{row['value']:.3f}"
            out.append(f"{row['what']} {value} (goal {row['goal']})")
    return out


def _f(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def markdown(results: Mapping[str, Any], *, show_failures: bool = False) -> str:
    """The run as Markdown: the set, the targets and verdicts, the figures per kind, and (asked)
    every failed question with its answer and what was expected."""
    ds, figs, m = results["dataset"], results["figures"], results["machine"]
    out = [
        f"Dataset: {ds['name']}: {ds['documents']} real documents ({ds['formats']}), "
        f"{figs['answerable']} answerable questions + {figs['near_misses']} near misses asked "
        f"({ds['questions']} in the set{'; ' + ds['selection'] if ds.get('selection') else ''}); "
        f"documents {ds.get('ingested', 'freshly ingested')}. "
        f"Model: {results['model']}. Measured {m['date']} on {m['cpus']} CPUs, commit {m['git_commit']}, "
        f"ingest {results['timings_s']['ingest_s']} s, questions {results['timings_s']['questions_s']} s.",
        "",
        "### Targets (issue 20), real-text development set",
        "",
        "| figure | goal | value | 95% interval | met |",
        "|---|---|---:|---|---|",
    ]
    for row in results["verdicts"]:
        ci = "–" if not row["ci95"] else f"{row['ci95'][0]:.3f}–{row['ci95'][1]:.3f}"
        met = {True: "yes", False: "**no**", None: "not measured"}[row["met"]]
        out.append(f"| {row['what']} | {row['goal']} | {_f(row['value'])} | {ci} | {met} |")
    out += ["", f"Precision of `answered` (answerable and near misses together): "
            f"{_f(figs.get('answered_precision'))} ({figs.get('answered_right')} right of {figs.get('answered')}"
            + (f"; 95% interval {figs['answered_precision_ci95'][0]:.3f}–{figs['answered_precision_ci95'][1]:.3f}"
               if figs.get("answered_precision_ci95") else "") + ").",
            "", f"Citation precision (cited files that are the right file): {_f(figs['citation_precision'])} "
            f"of {figs['cited_files']} cited; every key in the answer: {_f(figs['keys_found'])}; right file cited: "
            f"{_f(figs['right_file_cited'])}; every key in the passages the answer was written from (what a "
            f"reader could quote): {_f(figs.get('keys_in_contexts'))}.",
            f"Outcomes, answerable: {figs['outcomes_answerable']}; near misses: {figs['outcomes_near_misses']}.",
            "", "### Per kind", "",
            "| kind | questions | right | share right | refused | keys in contexts | citation precision |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for kind, row in results["by_kind"].items():
        in_contexts = "–" if kind == NEAR_MISS else row.get("keys_in_contexts", "–")
        out.append(f"| {kind} | {row['questions']} | {row['right']} | {_f(row['share_right'])} | {row['refused']} | "
                   f"{in_contexts} | {_f(row['citation_precision'])} |")
    out += ["", "(right: every key in the answer and the right file cited; for near misses, refused.)"]
    if show_failures:
        out += ["", markdown_failures(results["questions"])]
    return "\n".join(out)


def markdown_failures(questions: Sequence[Mapping[str, Any]]) -> str:
    """Every failed question of a run's ``questions`` with its answer and what was expected."""
    out: list[str] = []
    failed = [q for q in questions if not q["correct"]]
    out += ["", f"### Failures ({len(failed)})"]
    for q in failed:
        expected = ("a refusal (not_answerable)" if q["kind"] == NEAR_MISS
                    else f"keys {q['keys']} citing {q['file']}")
        why = []
        if q["kind"] != NEAR_MISS:
            if q["keys_missing"]:
                why.append(f"missing keys {q['keys_missing']}")
            if not q["cited_right"]:
                why.append(f"cited {q['cited_files'] or 'nothing'}")
            if q["refused"]:
                why.append("refused")
            if q.get("keys_in_contexts") is not None:
                why.append("the keys were in its contexts" if q["keys_in_contexts"]
                           else "the keys were not all in its contexts")
        out += ["", f"- **{q['id']}** ({q['kind']}): {q['question']}",
                f"  expected {expected}; got {q['status']}/{q['outcome']}"
                + (f": {'; '.join(why)}" if why else ""),
                "  answer: " + " ".join((q["answer"] or "(none)").split())]
    return "\n".join(out).lstrip("\n")


def manifest_documents(where: Path, fields: Sequence[str]) -> list[tuple[int, dict[str, Any]]]:
    """The document entries of a dataset's ``manifest.json``, numbered from 1, each an object holding
    every one of ``fields`` as a non-empty string; :class:`ConfigError` naming the file and the entry
    otherwise (the real-text and format sets read theirs through it)."""
    try:
        manifest = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: cannot be read ({exc})") from None
    entries = manifest.get("documents") if isinstance(manifest, dict) else None
    out = []
    for number, entry in enumerate(entries or [], 1):
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: document {number} is not an object")
        missing = [k for k in fields if not isinstance(entry.get(k), str) or not entry[k]]
        if missing:
            raise ConfigError(f"{where}: document {number} lacks {', '.join(missing)}")
        out.append((number, entry))
    if not out:
        raise ConfigError(f"{where}: no documents listed")
    return out
