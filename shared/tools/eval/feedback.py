"""Rated answers as evaluation cases (issue 33): ``ragbus eval --from-feedback`` exports them,
``ragbus eval --dataset <file or folder>`` asks them again and reports how many down-rated answers now
change and how many up-rated answers stay the same (a regression check on the questions people ask).

A dataset is JSON Lines, one case per rated query (:data:`FIELDS`)::

    {"id": query id, "question": the question as answered (a follow-up's standalone form),
     "asked": the question as typed, "answer": the answer given, "outcome": its outcome,
     "citations": [{id, title, url, document_id}], "filters": the query's filters or null,
     "rating": "up"|"down" (the latest), "comment": text or null, "wrong_citations": [n],
     "expected": the expected answer or null, "ratings": {"up": n, "down": n}, "rated_at": time}

A folder holding ``feedback.jsonl`` is a dataset too (every ``feedback*.jsonl`` in it is read), so
several exports can sit side by side. An answer "stays the same" when the outcome is the same and the
text is the same once spaces are normalised; anything else is a change. With ``expected``, the report
also counts the new answers that contain it (case and spacing aside).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from shared.contract.errors import ConfigError, RagbusError
from shared.query.record import QueryRecord

FIELDS = ("id", "question", "asked", "answer", "outcome", "citations", "filters", "rating", "comment",
          "wrong_citations", "expected", "ratings", "rated_at")
REQUIRED = ("id", "question", "answer", "outcome", "rating")
FOLDER_FILE = "feedback.jsonl"
#: A line of a dataset file, at most (a case holds an answer, a comment and an expected answer).
MAX_LINE_BYTES = 1_000_000

Ask = Callable[[dict[str, Any]], QueryRecord]  # a case -> its finished record, asked again


def case_of(record: QueryRecord) -> dict[str, Any] | None:
    """The evaluation case of a rated record (None when it has no rating)."""
    from shared.query.feedback import feedback_counts, latest_feedback

    latest = latest_feedback(record)
    if latest is None:
        return None
    return {
        "id": record.id,
        "question": record.question,
        "asked": record.original_query,
        "answer": record.answer,
        "outcome": record.outcome or record.status,
        "citations": [{k: c.get(k) for k in ("id", "title", "url", "document_id")} for c in record.citations],
        "filters": record.filters,
        "rating": latest.get("rating"),
        "comment": latest.get("comment"),
        "wrong_citations": list(latest.get("wrong_citations") or []),
        "expected": latest.get("expected"),
        "ratings": feedback_counts(record),
        "rated_at": latest.get("at"),
    }


def export_cases(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cases of every rated query record, oldest rating first."""
    cases = [case for case in (case_of(QueryRecord.from_doc(doc)) for doc in docs) if case is not None]
    return sorted(cases, key=lambda c: (c["rated_at"] or "", c["id"]))


def write_cases(cases: list[dict[str, Any]], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(case, ensure_ascii=False) + "\n" for case in cases), encoding="utf-8")


def is_feedback_dataset(path: Path) -> bool:
    """True for an exported file, or a folder holding ``feedback.jsonl``."""
    return path.is_file() or (path.is_dir() and (path / FOLDER_FILE).is_file())


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of an exported file or folder; :class:`ConfigError` naming the file and line at fault."""
    files = sorted(path.glob("feedback*.jsonl")) if path.is_dir() else [path]
    cases: list[dict[str, Any]] = []
    for file in files:
        with file.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                if len(raw) > MAX_LINE_BYTES:
                    raise ConfigError(f"{file}:{number}: a line of more than {MAX_LINE_BYTES} bytes; "
                                      "is this a dataset `ragbus eval --from-feedback` wrote?")
                if not raw.strip():
                    continue
                try:
                    case = json.loads(raw)
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    raise ConfigError(f"{file}:{number}: not a JSON line ({exc}); a dataset is JSON Lines "
                                      "as `ragbus eval --from-feedback` writes it") from None
                missing = [k for k in REQUIRED if not isinstance(case, dict) or k not in case]
                if missing:
                    raise ConfigError(f"{file}:{number}: a case needs {', '.join(REQUIRED)}; this one lacks "
                                      f"{', '.join(missing)}")
                if case["rating"] not in ("up", "down") or not isinstance(case["question"], str):
                    raise ConfigError(f"{file}:{number}: 'rating' must be up or down and 'question' text")
                cases.append(case)
    if not cases:
        raise ConfigError(f"no rated cases in {path}; export some with `ragbus eval --from-feedback --out FILE`")
    return cases


def _same_text(a: str | None, b: str | None) -> bool:
    return " ".join((a or "").split()) == " ".join((b or "").split())


def _contains(answer: str | None, expected: str) -> bool:
    fold = lambda text: re.sub(r"\s+", " ", text).strip().casefold()  # noqa: E731
    return fold(expected) in fold(answer or "")


def compare(case: dict[str, Any], record: QueryRecord) -> dict[str, Any]:
    """One case asked again: what it gave then and now, and whether it changed."""
    now_outcome = record.outcome or record.status
    changed = now_outcome != case["outcome"] or not _same_text(case.get("answer"), record.answer)
    row = {"id": case["id"], "question": case["question"], "rating": case["rating"], "comment": case.get("comment"),
           "outcome_then": case["outcome"], "outcome_now": now_outcome, "answer_then": case.get("answer"),
           "answer_now": record.answer, "changed": changed, "query_id": record.id}
    if case.get("expected"):
        row["expected"] = case["expected"]
        row["expected_found"] = _contains(record.answer, case["expected"])
    return row


def run_cases(cases: list[dict[str, Any]], ask: Ask, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Ask every case again with ``ask``; the rows and the summary :func:`markdown` reports."""
    say = progress or (lambda _msg: None)
    rows = []
    for n, case in enumerate(cases, start=1):
        say(f"[{n}/{len(cases)}] {case['question'][:80]}")
        try:
            rows.append(compare(case, ask(case)))
        except RagbusError as exc:  # one case that cannot be asked (its filters, a full bus) fails alone
            rows.append({"id": case["id"], "question": case["question"], "rating": case["rating"],
                         "comment": case.get("comment"), "outcome_then": case["outcome"], "outcome_now": "failed",
                         "answer_then": case.get("answer"), "answer_now": None, "changed": True,
                         "query_id": None, "error": str(exc),
                         **({"expected": case["expected"], "expected_found": False} if case.get("expected") else {})})
    return {"cases": len(rows), "summary": summarise(rows), "rows": rows}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    down = [r for r in rows if r["rating"] == "down"]
    up = [r for r in rows if r["rating"] == "up"]
    expected = [r for r in rows if "expected" in r]
    return {
        "down_rated": len(down), "down_changed": sum(r["changed"] for r in down),
        "up_rated": len(up), "up_same": sum(not r["changed"] for r in up),
        "with_expected": len(expected), "expected_found": sum(r["expected_found"] for r in expected),
        "failed_now": sum(r["outcome_now"] in ("failed", "timed_out") for r in rows),
    }


def regressions(results: dict[str, Any]) -> list[str]:
    """The up-rated answers that changed: what ``--check`` fails on."""
    return [r["id"] for r in results["rows"] if r["rating"] == "up" and r["changed"]]


def markdown(results: dict[str, Any], *, show_failures: bool = False) -> str:
    s = results["summary"]
    lines = [
        "## Rated answers asked again",
        "",
        "| what | count |",
        "|---|---|",
        f"| down-rated answers that now change | {s['down_changed']} of {s['down_rated']} |",
        f"| up-rated answers that stay the same | {s['up_same']} of {s['up_rated']} |",
        f"| answers now holding the expected text | {s['expected_found']} of {s['with_expected']} |",
        f"| failed or timed out now | {s['failed_now']} of {results['cases']} |",
    ]
    shown = [r for r in results["rows"] if show_failures or (r["rating"] == "up" and r["changed"])]
    if shown:
        lines += ["", "| rating | question | then | now | changed |", "|---|---|---|---|---|"]
        for r in shown:
            cell = lambda text: " ".join(str(text or "").split()).replace("|", "\\|")[:120]  # noqa: E731
            lines.append(f"| {r['rating']} | {cell(r['question'])} | {cell(r['outcome_then'])}: "
                         f"{cell(r['answer_then'])} | {cell(r['outcome_now'])}: {cell(r['answer_now'] or r.get('error'))} | "
                         f"{'yes' if r['changed'] else 'no'} |")
    return "\n".join(lines)
