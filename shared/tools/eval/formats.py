"""The format set (``formats``, issue 31): PDF, DOCX, PPTX, spreadsheets and EPUB nobody on this project wrote.

Layout (``datasets/formats/README.md``): ``manifest.json`` lists each document with its format, its
layout (one-, two- or three-column, table, scanned, ...), package, version, source, licence and how it
was made; ``documents/`` holds the files; ``plain/<file>.txt`` an independent plain-text rendering of
the same content (poppler's ``pdftotext`` for a PDF, the text a rendered file was made from, ...);
``questions.jsonl`` one question a line: ``id``, ``kind`` (what is asked, realtext's kinds), ``where``
the answer lies (``body``, ``table``, ``slide``, ``scan``), ``file``, ``question``, ``keys`` and the
place that answers it: ``page`` (PDF), ``slide`` (PPTX), ``sheet`` and ``row`` (a workbook; a CSV or
TSV has ``row`` only), ``chapter`` (EPUB), nothing for a DOCX (it has no pages to cite).

Scoring: a question is **right** when every key is in the answer (as :func:`realdocs.score`), a
citation points at its file *and* one of those citations' positions covers the named place ("p. 12",
"pp. 11–13", "slide 3", "Levels, rows 2–9", "chapter 4"). The same questions asked over ``plain/``
(another index holding only the plain texts) are the **ceiling**: right there when every key is in
the answer and the plain file of the same document is cited. The issue's ratios divide the first
by the second over the same questions: text PDFs, scanned pages, table rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.contract.errors import ConfigError
from shared.tools.eval import realdocs

NAME = "formats"
ROOT = Path(__file__).resolve().parent / "datasets" / NAME
FORMATS = ("pdf", "docx", "pptx", "xlsx", "csv", "tsv", "epub")
WHERE = ("body", "table", "slide", "scan")
KINDS = ("value", "list", "how_why", "yes_no", "definition", "comparison", "identifier")
DOCUMENT_FIELDS = ("file", "format", "layout", "package", "version", "source", "licence", "made")
#: the least the issue asks of the set: documents per format (csv, tsv and xlsx count as spreadsheets)
MINIMUM_DOCUMENTS = {"pdf": 20, "docx": 5, "pptx": 5, "spreadsheet": 5, "epub": 3}
MINIMUM_SCANNED = 3
MINIMUM_QUESTIONS = 120
SPREADSHEETS = ("xlsx", "csv", "tsv")

#: issue 31's targets: (figure, what, the questions it covers, bound on formats / plain)
TARGETS: tuple[tuple[str, str, str, float], ...] = (
    ("text_pdf", "PDFs with a text layer: key facts + right citation + right page", "PDF questions not on a scanned page", 0.9),
    ("scanned", "scanned pages (offline OCR)", "questions on a scanned page", 0.7),
    ("tables", "questions answered from a table row", "questions whose answer is in a table", 0.8),
)


@dataclass(frozen=True)
class Document(realdocs.Document):
    layout: str  # one-column, two-column, three-column, table, scanned, document, slides, sheet, book
    made: str  # how the file was made from its source (copied, pages kept, rendered, rasterised)


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    kind: str
    where: str
    file: str
    format: str
    place: dict[str, Any]  # {"page": 3} | {"slide": 2} | {"sheet": "Levels", "row": 4} | {"row": 9} | {"chapter": 4}
    # (or {"chapter": [3, 13]}: every place stating the answer) | {} (a DOCX)
    keys: tuple[realdocs.Key, ...]

    def as_realdocs(self, file: str | None = None) -> realdocs.Question:
        """The question as :func:`realdocs.score` takes it (``file``: the file it must cite instead)."""
        return realdocs.Question(self.id, self.question, self.kind, file or self.file, self.keys)


@dataclass(frozen=True)
class FormatSet(realdocs.RealDocs):
    """The set: its root, documents (:class:`Document`) and questions (:class:`Question`)."""

    @property
    def plain_dir(self) -> Path:
        return self.root / "plain"

    def plain_of(self, file: str) -> str:
        return f"{file}.txt"


def load(root: Path = ROOT) -> FormatSet:
    """The manifest and the questions; a malformed line, an unknown kind, place or file is a
    :class:`ConfigError` naming the line."""
    documents = _documents(root)
    formats = {d.file: d.format for d in documents}
    questions: list[Question] = []
    seen: set[str] = set()
    for where, raw in realdocs.jsonl_lines(root / "questions.jsonl"):
        questions.append(_question(raw, where, formats, seen))
    if not questions:
        raise ConfigError(f"{root / 'questions.jsonl'}: no questions")
    return FormatSet(root, tuple(documents), tuple(questions))


def _documents(root: Path) -> list[Document]:
    where = root / "manifest.json"
    out = []
    for number, entry in realdocs.manifest_documents(where, DOCUMENT_FIELDS):
        if entry["format"] not in FORMATS:
            raise ConfigError(f"{where}: document {number}: format {entry['format']!r} is not one of {', '.join(FORMATS)}")
        for folder, name in (("documents", entry["file"]), ("plain", entry["file"] + ".txt")):
            if not (root / folder / name).is_file():
                raise ConfigError(f"{where}: document {number}: {folder}/{name} is missing")
        out.append(Document(*(entry[k] for k in ("file", "format", "package", "version", "source", "licence", "layout",
                                                 "made"))))
    return out


def _question(raw: Any, where: str, formats: dict[str, str], seen: set[str]) -> Question:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: not an object")
    qid, file = raw.get("id"), raw.get("file")
    if not isinstance(qid, str) or not qid or qid in seen:
        raise ConfigError(f"{where}: id {qid!r} is missing or repeated")
    seen.add(qid)
    if file not in formats:
        raise ConfigError(f"{where}: file {file!r} is not in manifest.json")
    for field, allowed in (("kind", KINDS), ("where", WHERE)):
        if raw.get(field) not in allowed:
            raise ConfigError(f"{where}: {field} {raw.get(field)!r} is not one of {', '.join(allowed)}")
    if not isinstance(raw.get("question"), str) or not raw["question"].strip():
        raise ConfigError(f"{where}: 'question' is missing")
    keys = tuple(realdocs.key_from_json(k, where) for k in raw.get("keys") or [])
    if not keys:
        raise ConfigError(f"{where}: a question needs at least one key")
    place = {k: raw[k] for k in ("page", "slide", "sheet", "row", "chapter") if k in raw}
    expected = {"pdf": {"page"}, "pptx": {"slide"}, "xlsx": {"sheet", "row"}, "csv": {"row"}, "tsv": {"row"},
                "epub": {"chapter"}, "docx": set()}[formats[file]]
    if set(place) != expected or any(not _place_value(k, v) for k, v in place.items()):
        raise ConfigError(f"{where}: a {formats[file]} question names its place as "
                          f"{', '.join(sorted(expected)) or 'nothing (a DOCX has no pages)'}, not {place or 'nothing'}")
    return Question(qid, raw["question"], raw["kind"], raw["where"], file, formats[file], place, keys)


# ------------------------------------------------------------ places


def _place_value(unit: str, value: Any) -> bool:
    """A sheet is named; a row is a number; a page, slide or chapter a number, or a list of them where
    the answer is stated in more than one (the same sentence in a chapter and an appendix)."""
    if unit == "sheet":
        return isinstance(value, str)
    if unit != "row" and isinstance(value, list):
        return bool(value) and all(isinstance(v, int) for v in value)
    return isinstance(value, int)


_SPAN = re.compile(r"(\d+)(?:\s*[–-]\s*(\d+))?")


def _numbers(text: str) -> set[int]:
    """"12", "12–14", "2, 5" -> the numbers they cover."""
    out: set[int] = set()
    for first, last in _SPAN.findall(text):
        out.update(range(int(first), int(last or first) + 1))
    return out


def place_in_label(place: dict[str, Any], label: str) -> bool:
    """Whether a citation's position label (:func:`shared.formats.passages.position_label`) covers
    ``place``: "pp. 11–13" covers page 12, "slides 2, 5" slide 5, "Levels, rows 2–9" sheet Levels row 4,
    "rows 5–9" row 7, "chapters 3–4" chapter 4. A place of nothing (a DOCX) is covered by any citation."""
    label = (label or "").strip()
    if not place:
        return True
    for unit, prefix in (("page", "p"), ("slide", "slide"), ("chapter", "chapter")):
        if unit in place:  # one number, or the numbers of every place that states the answer
            wanted = set(place[unit]) if isinstance(place[unit], list) else {place[unit]}
            return label.startswith(prefix) and bool(wanted & _numbers(label.split(" ", 1)[-1]))
    for part in label.split(";"):  # "Sheet, rows 4–9; Other, row 2"
        sheet, _, rows = part.strip().rpartition(", ") if ", row" in part else ("", "", part.strip())
        if sheet.strip() == str(place.get("sheet", "")) and rows.startswith("row") and \
                place["row"] in _numbers(rows.split(" ", 1)[-1]):
            return True
    return False


# ------------------------------------------------------------ scoring


@dataclass
class Scored:
    """One question asked over the documents and over their plain text."""

    id: str
    kind: str
    where: str
    format: str
    file: str
    place: dict[str, Any]
    right: bool  # key facts + right citation + right place
    keys_and_citation: bool  # key facts + right citation (place aside)
    cited_places: list[str]  # the position labels of the citations of the right file
    plain_right: bool | None  # the ceiling: the same question over the plain text (None: not asked)
    answer: dict[str, Any]  # realdocs.Scored of the documents' run, as a dict
    plain_answer: dict[str, Any] | None


def score(question: Question, result: realdocs.Scored, citations: Sequence[tuple[str, str]],
          plain: realdocs.Scored | None) -> Scored:
    """``result``: the question scored over the documents; ``citations``: (file, position label) of
    each citation; ``plain``: scored over the plain text (None when not asked)."""
    from dataclasses import asdict

    places = [label for file, label in citations if file == question.file]
    placed = any(place_in_label(question.place, label) for label in places)
    return Scored(question.id, question.kind, question.where, question.format, question.file, question.place,
                  right=result.correct and placed, keys_and_citation=result.correct, cited_places=places,
                  plain_right=None if plain is None else plain.correct, answer=asdict(result),
                  plain_answer=None if plain is None else asdict(plain))


def _share(k: int, n: int) -> dict[str, Any]:
    from shared.tools.eval.metrics import wilson_interval

    return {"right": k, "of": n, "share": None if n == 0 else round(k / n, 4),
            "ci95": None if n == 0 else [round(x, 4) for x in wilson_interval(k, n)]}


def group(rows: Sequence[Scored]) -> dict[str, Any]:
    """A group's figures: formats (key facts + citation + place), the same without the place, the
    plain-text ceiling, and their ratio with a paired bootstrap interval."""
    from shared.tools.eval.metrics import bootstrap_ratio_ci

    plain = [r for r in rows if r.plain_right is not None]
    out = {"questions": len(rows), "formats": _share(sum(r.right for r in rows), len(rows)),
           "keys_and_citation": _share(sum(r.keys_and_citation for r in rows), len(rows)),
           "plain": _share(sum(bool(r.plain_right) for r in plain), len(plain)), "ratio": None, "ratio_ci95": None}
    right, ceiling = [float(r.right) for r in plain], [float(bool(r.plain_right)) for r in plain]
    if plain and sum(ceiling):
        out["ratio"] = round(sum(right) / sum(ceiling), 4)
        out["ratio_ci95"] = [round(x, 4) for x in bootstrap_ratio_ci(right, ceiling)]
    return out


def target_rows(scored: Sequence[Scored]) -> dict[str, list[Scored]]:
    """The questions each of issue 31's ratios covers."""
    return {"text_pdf": [s for s in scored if s.format == "pdf" and s.where != "scan"],
            "scanned": [s for s in scored if s.where == "scan"],
            "tables": [s for s in scored if s.where == "table"]}


def figures(scored: Sequence[Scored]) -> dict[str, Any]:
    """All questions, by format, by where the answer lies, by kind, and the targets' verdicts."""
    def by(attr: str) -> dict[str, Any]:
        keys = sorted({getattr(s, attr) for s in scored})
        return {k: group([s for s in scored if getattr(s, attr) == k]) for k in keys}

    verdicts = []
    covered = target_rows(scored)
    for figure, what, covers, bound in TARGETS:
        g = group(covered[figure])
        verdicts.append({"figure": figure, "what": what, "covers": covers, "goal": f">= {bound:g} x plain text",
                         "formats": g["formats"], "plain": g["plain"], "ratio": g["ratio"],
                         "ratio_ci95": g["ratio_ci95"], "met": None if g["ratio"] is None else g["ratio"] >= bound})
    return {"all": group(scored), "by_format": by("format"), "by_where": by("where"), "by_kind": by("kind"),
            "verdicts": verdicts}


# ------------------------------------------------------------ the report


def _cell(s: dict[str, Any]) -> str:
    if s["share"] is None:
        return "–"
    return f"{s['share']:.3f} [{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}] ({s['right']}/{s['of']})"


def _ratio(g: dict[str, Any]) -> str:
    if g["ratio"] is None:
        return "–"
    return f"{g['ratio']:.3f}" + (f" [{g['ratio_ci95'][0]:.2f}, {g['ratio_ci95'][1]:.2f}]" if g["ratio_ci95"] else "")


def _table(title: str, groups: dict[str, dict[str, Any]]) -> list[str]:
    out = ["", f"### {title}", "", "| group | questions | key facts + citation + place | key facts + citation | "
           "plain text (ceiling) | formats / plain |", "|---|---:|---|---|---|---|"]
    for name, g in groups.items():
        out.append(f"| {name} | {g['questions']} | {_cell(g['formats'])} | {_cell(g['keys_and_citation'])} | "
                   f"{_cell(g['plain'])} | {_ratio(g)} |")
    return out


def markdown(results: dict[str, Any], *, show_failures: bool = False) -> str:
    """The run as Markdown: the targets (ratios to the plain-text ceiling), then by format, by where
    the answer lies and by kind, each share with its Wilson interval; asked, every failure."""
    ds, figs, m = results["dataset"], results["figures"], results["machine"]
    out = [f"Dataset: {NAME}: {ds['documents']} documents ({ds['formats']}), {ds['asked']} questions asked "
           f"({ds['questions']} in the set{'; ' + ds['selection'] if ds.get('selection') else ''}); ceiling: "
           f"{ds['ceiling']}. Model: {results['model']}. Measured {m['date']} on {m['cpus']} CPUs (load "
           f"{m['load_average']}), commit {m['git_commit']}; ingest {results['timings_s']['ingest_s']} s "
           f"(plain text {results['timings_s']['plain_ingest_s']} s), questions {results['timings_s']['questions_s']} s."
           + (f" **Failed to ingest** (their questions count as wrong): {', '.join(ds['failed_to_ingest'])}."
              if ds.get("failed_to_ingest") else ""),
           "", "### Targets (issue 31): formats over the same questions on plain text", "",
           "| figure | covers | goal | formats | plain text | ratio [95% bootstrap] | met |", "|---|---|---|---|---|---|---|"]
    for v in figs["verdicts"]:
        met = {True: "yes", False: "**no**", None: "not measured"}[v["met"]]
        out.append(f"| {v['what']} | {v['covers']} | {v['goal']} | {_cell(v['formats'])} | {_cell(v['plain'])} | "
                   f"{_ratio(v)} | {met} |")
    out += _table("All questions", {"all": figs["all"]})
    out += _table("By format", figs["by_format"])
    out += _table("By where the answer lies", figs["by_where"])
    out += _table("By kind (what is asked)", figs["by_kind"])
    out += ["", "(right: every key in the answer, the right file cited, and one of its citations on the named page, "
            "slide, sheet row or chapter; a DOCX has no pages, its file is its place. Shares with their Wilson 95% "
            "intervals; the ratio's interval is a paired bootstrap over the same questions.)"]
    if show_failures:
        out += ["", failures(results["questions"])]
    return "\n".join(out)


def failures(questions: Sequence[dict[str, Any]]) -> str:
    """Every question not right over the documents, with why and what the plain text did."""
    failed = [q for q in questions if not q["right"]]
    out = [f"### Failures ({len(failed)})"]
    for q in failed:
        a = q["answer"]
        why = [f"missing keys {a['keys_missing']}"] if a["keys_missing"] else []
        why += [] if a["cited_right"] else [f"cited {a['cited_files'] or 'nothing'}"]
        why += [f"cited the file at {q['cited_places']}, not {q['place']}"] if a["correct"] else []
        why += ["refused"] if a["refused"] else []
        why += [f"keys {'were' if a['keys_in_contexts'] else 'were not all'} in its contexts"] \
            if a.get("keys_in_contexts") is not None else []
        plain = {True: "right", False: "wrong", None: "not asked"}[q["plain_right"]]
        out += ["", f"- **{q['id']}** ({q['format']}, {q['where']}, {q['place'] or 'no place'}): {a['question']}",
                f"  expected keys {q['keys']}; got {a['status']}/{a['outcome']}: {'; '.join(why) or 'right'}; "
                f"over plain text: {plain}", "  answer: " + " ".join((a["answer"] or "(none)").split())]
    return "\n".join(out)
