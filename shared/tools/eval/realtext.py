"""The real-text set (``realtext``, issue 36): documents nobody on this project wrote, split by
document into a development part and a sealed test part.

Layout (``datasets/realtext/README.md``): a part is the union of its writers' folders,
``realtext/<part>/<writer>/`` with ``manifest.json`` (the documents, each with its genre,
language, package, version, source and licence), ``questions.jsonl`` (answerable questions
with their ``keys``, near misses with their ``absent`` strings, each with its ``genre`` and
``kind``: what is asked), ``dialogues.jsonl`` (2-4 turns, keys answering the last one) and
``documents/``. The ``dev`` part also holds the older ``realdocs`` set (it was read while the
reader was designed), its questions counted under genre ``docs`` with their own kinds (where
the answer sits). ``--dataset PATH`` reads a folder laid out as one part.

Scoring is :func:`shared.tools.eval.realdocs.score`'s; the figures add what issue 36 asks
beside them: the **precision of** ``answered`` (over answerable questions and near misses
together: an ``answered`` is right when every key is in it and it cites the right file; a near
miss ``answered`` is wrong), by genre and by kind, each share with its Wilson interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.contract.errors import ConfigError
from shared.tools.eval import realdocs

NAME = "realtext"
ROOT = Path(__file__).resolve().parent / "datasets" / NAME
PARTS = ("dev", "test")
GENRES = ("docs", "essay", "news", "spec", "faq")
LANGUAGES = ("en", "de", "fr", "es")
NEAR_MISS = realdocs.NEAR_MISS
KINDS = ("value", "list", "how_why", "yes_no", "definition", "comparison", "identifier", NEAR_MISS)
FORMATS = ("html", "markdown", "text")
DOCUMENT_FIELDS = ("file", "format", "genre", "language", "package", "version", "source", "licence")
MAX_TURNS = 4

#: issue 36's targets on the sealed test part: (figure, what, op, bound)
TARGETS: tuple[tuple[str, str, str, float], ...] = (
    ("key_facts_and_citation", "key facts + right citation (answerable)", ">=", 0.75),
    ("answered_precision", "precision of `answered` (answerable and near misses)", ">=", 0.90),
    ("near_misses_refused", "near misses refused", ">=", 0.80),
    ("answerable_refused", "answerable questions refused", "<=", 0.05),
    ("follow_up_right_in_conversation", "follow-ups right in conversation", ">=", 0.90),
)


@dataclass(frozen=True)
class Document:
    file: str
    folder: Path  # the documents/ folder holding it
    genre: str
    language: str
    format: str
    package: str
    source: str
    licence: str


@dataclass(frozen=True)
class Part:
    """One part (or a folder laid out as one): its documents, questions and dialogues."""

    name: str
    folders: tuple[Path, ...]  # each writer's folder (and realdocs' root for dev)
    documents: tuple[Document, ...]
    questions: tuple[realdocs.Question, ...]
    genres: dict[str, str]  # question or dialogue id -> genre
    dialogues: tuple[Any, ...]  # conversations.Dialogue

    @property
    def document_folders(self) -> list[Path]:
        return list(dict.fromkeys(d.folder for d in self.documents))

    @property
    def writers(self) -> dict[str, str]:
        """Question id -> its writer: the folder holding its document (``a``, ``b``, ..., ``realdocs``). A
        writer's figures judge a reader nobody designed on it (issue 36); its records are not read for that."""
        by_file = {d.file: d.folder.parent.name for d in self.documents}
        return {q.id: by_file.get(q.file, "?") for q in self.questions}

    @property
    def answerable(self) -> list[realdocs.Question]:
        return [q for q in self.questions if not q.near_miss]

    @property
    def near_misses(self) -> list[realdocs.Question]:
        return [q for q in self.questions if q.near_miss]


def writer_folders(part: str, root: Path = ROOT) -> list[Path]:
    """``root/<part>/<writer>/`` folders, in name order (those holding a manifest)."""
    base = root / part
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and (p / "manifest.json").is_file())


def _documents(folder: Path) -> list[Document]:
    where = folder / "manifest.json"
    out = []
    for number, entry in realdocs.manifest_documents(where, DOCUMENT_FIELDS):
        for field, allowed in (("genre", GENRES), ("language", LANGUAGES), ("format", FORMATS)):
            if entry[field] not in allowed:
                raise ConfigError(f"{where}: document {number}: {field} {entry[field]!r} is not one of "
                                  f"{', '.join(allowed)}")
        if not (folder / "documents" / entry["file"]).is_file():
            raise ConfigError(f"{where}: document {number}: documents/{entry['file']} is missing")
        out.append(Document(entry["file"], folder / "documents", entry["genre"], entry["language"], entry["format"],
                            entry["package"], entry["source"], entry["licence"]))
    return out


def _questions(folder: Path, files: set[str], seen: set[str]) -> tuple[list[realdocs.Question], dict[str, str]]:
    path = folder / "questions.jsonl"
    questions: list[realdocs.Question] = []
    genres: dict[str, str] = {}
    if not path.is_file():
        return questions, genres
    for where, raw in realdocs.jsonl_lines(path):
        where = f"{folder.name}/{where}"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: not an object")
        kind, genre, qid = raw.get("kind"), raw.get("genre"), raw.get("id") or ""
        if kind not in KINDS:
            raise ConfigError(f"{where}: unknown kind {kind!r}; one of {', '.join(KINDS)}")
        if genre not in GENRES:
            raise ConfigError(f"{where}: unknown genre {genre!r}; one of {', '.join(GENRES)}")
        if raw.get("file") not in files:
            raise ConfigError(f"{where}: file {raw.get('file')!r} is not in the part's manifests")
        if not isinstance(qid, str) or not qid or qid in seen:
            raise ConfigError(f"{where}: id {qid!r} is missing or repeated")
        if not isinstance(raw.get("question"), str) or not raw["question"].strip():
            raise ConfigError(f"{where}: 'question' is missing")
        seen.add(qid)
        keys = tuple(realdocs.key_from_json(k, where) for k in raw.get("keys") or [])
        absent = tuple(raw.get("absent") or [])
        if kind == NEAR_MISS and (keys or not absent or not all(isinstance(a, str) and a for a in absent)):
            raise ConfigError(f"{where}: a near miss has no keys and at least one absent string")
        if kind != NEAR_MISS and not keys:
            raise ConfigError(f"{where}: an answerable question needs at least one key")
        questions.append(realdocs.Question(qid, raw["question"], kind, raw["file"], keys, absent,
                                           str(raw.get("note") or "")))
        genres[qid] = genre
    return questions, genres


def load_part(part: str | Path, root: Path = ROOT) -> Part:
    """A part by name (``dev``: its writers' folders and the realdocs set; ``test``) or a folder laid out
    as one part (its writer folders, or itself one writer's folder). A malformed file, an unknown
    genre, kind or file, or an id or file name used twice is a :class:`ConfigError` naming it."""
    if isinstance(part, str) and part in PARTS:
        folders = writer_folders(part, root)
        name = part
    else:
        path = Path(part)
        if not path.is_dir():
            raise ConfigError(f"--dataset {part}: neither a part ({', '.join(PARTS)}) nor a folder")
        folders = [path] if (path / "manifest.json").is_file() else writer_folders(path.name, path.parent)
        name = str(path)
    documents: list[Document] = []
    if name == "dev":
        old = realdocs.load()
        documents += [Document(d.file, old.documents_dir, "docs", "en", d.format, d.package, d.source, d.licence)
                      for d in old.documents]
    for folder in folders:
        documents += _documents(folder)
    if not documents:
        raise ConfigError(f"realtext {name}: no documents (no {root / name}/<writer>/manifest.json)")
    names = [d.file for d in documents]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"realtext {name}: file names used twice: {', '.join(repeated)}")
    files = set(names)
    questions: list[realdocs.Question] = []
    genres: dict[str, str] = {}
    seen: set[str] = set()
    if name == "dev":
        for q in old.questions:
            questions.append(q)
            genres[q.id] = "docs"
            seen.add(q.id)
    dialogues: list[Any] = []
    for folder in folders:
        more, more_genres = _questions(folder, files, seen)
        questions += more
        genres.update(more_genres)
        dialogues += _dialogues(folder, {d.file: d.folder / d.file for d in documents}, seen, genres)
    return Part(name, tuple(folders), tuple(documents), tuple(questions), genres, tuple(dialogues))


def _dialogues(folder: Path, files: dict[str, Path], seen: set[str], genres: dict[str, str]) -> list[Any]:
    from shared.tools.eval import conversations

    path = folder / "dialogues.jsonl"
    if not path.is_file():
        return []
    out = conversations.load_rows(realdocs.jsonl_lines(path), files, corpora=(NAME,), max_turns=MAX_TURNS,
                                  seen=seen, where_prefix=f"{folder.name}/",
                                  topic_change_as_typed=False)
    for raw_where, raw in realdocs.jsonl_lines(path):
        if raw.get("genre") not in GENRES:
            raise ConfigError(f"{folder.name}/{raw_where}: unknown genre {raw.get('genre')!r}; one of "
                              f"{', '.join(GENRES)}")
        genres[raw["id"]] = raw["genre"]
    return out


# ------------------------------------------------------------ figures


def _ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 4)


def _ci(k: int, n: int) -> list[float] | None:
    from shared.tools.eval.metrics import wilson_interval

    return None if n == 0 else [round(x, 4) for x in wilson_interval(k, n)]


def group_figures(scored: Sequence[realdocs.Scored]) -> dict[str, Any]:
    """The four answer figures of a group of questions, with their counts and Wilson intervals."""
    answerable = [s for s in scored if s.kind != NEAR_MISS]
    near = [s for s in scored if s.kind == NEAR_MISS]
    answered = [s for s in scored if s.outcome == "answered"]
    right = sum(s.correct for s in answerable)
    answered_right = sum(s.correct for s in answered if s.kind != NEAR_MISS)
    refused = sum(s.refused for s in answerable)
    near_refused = sum(s.refused for s in near)
    return {
        "answerable": len(answerable), "near_misses": len(near),
        "key_facts_and_citation": _ratio(right, len(answerable)), "key_facts_and_citation_ci95": _ci(right, len(answerable)),
        "answered": len(answered), "answered_right": answered_right,
        "answered_precision": _ratio(answered_right, len(answered)),
        "answered_precision_ci95": _ci(answered_right, len(answered)),
        "near_misses_refused": _ratio(near_refused, len(near)), "near_misses_refused_ci95": _ci(near_refused, len(near)),
        "answerable_refused": _ratio(refused, len(answerable)), "answerable_refused_ci95": _ci(refused, len(answerable)),
    }


def grouped(scored: Sequence[realdocs.Scored], key: dict[str, str]) -> dict[str, dict[str, Any]]:
    """:func:`group_figures` per value of ``key`` (question id -> group), groups in name order."""
    groups: dict[str, list[realdocs.Scored]] = {}
    for s in scored:
        groups.setdefault(key.get(s.id, "?"), []).append(s)
    return {name: group_figures(rows) for name, rows in sorted(groups.items())}


def verdicts(figs: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for figure, what, op, bound in TARGETS:
        value = figs.get(figure)
        met = None if value is None else (value >= bound if op == ">=" else value <= bound)
        rows.append({"figure": figure, "what": what, "goal": f"{op} {bound:g}", "value": value,
                     "ci95": figs.get(f"{figure}_ci95"), "met": met})
    return rows


def _f(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _with_ci(value: Any, ci: list[float] | None) -> str:
    return _f(value) + ("" if not ci else f" [{ci[0]:.2f}, {ci[1]:.2f}]")


def _table(title: str, groups: dict[str, dict[str, Any]]) -> list[str]:
    out = ["", f"### {title}", "",
           "| group | answerable | near misses | key facts + citation | precision of `answered` (n) | "
           "near misses refused | answerable refused |", "|---|---:|---:|---|---|---|---|"]
    for name, g in groups.items():
        out.append(f"| {name} | {g['answerable']} | {g['near_misses']} | "
                   f"{_with_ci(g['key_facts_and_citation'], g['key_facts_and_citation_ci95'])} | "
                   f"{_with_ci(g['answered_precision'], g['answered_precision_ci95'])} ({g['answered']}) | "
                   f"{_with_ci(g['near_misses_refused'], g['near_misses_refused_ci95'])} | "
                   f"{_with_ci(g['answerable_refused'], g['answerable_refused_ci95'])} |")
    return out


def markdown(results: dict[str, Any], *, show_failures: bool = False) -> str:
    """The run as Markdown: the targets with their intervals, then by writer, by genre and by kind, the
    follow-ups, and (asked) every failure."""
    ds, figs, m = results["dataset"], results["figures"], results["machine"]
    out = [
        f"Dataset: {NAME} part **{ds['part']}**: {ds['documents']} documents ({ds['genres']}), "
        f"{figs['answerable']} answerable questions + {figs['near_misses']} near misses"
        f"{'; ' + ds['selection'] if ds.get('selection') else ''}; {ds.get('dialogues', 0)} dialogues. "
        f"Model: {results['model']}. Measured {m['date']} on {m['cpus']} CPUs (load {m['load_average']}), "
        f"commit {m['git_commit']}, ingest {results['timings_s']['ingest_s']} s, questions "
        f"{results['timings_s']['questions_s']} s.",
        "", "### Targets (issue 36)", "",
        "| figure | goal | value | 95% interval | met |", "|---|---|---:|---|---|",
    ]
    for row in results["verdicts"]:
        ci = "–" if not row["ci95"] else f"{row['ci95'][0]:.3f}–{row['ci95'][1]:.3f}"
        met = {True: "yes", False: "**no**", None: "not measured"}[row["met"]]
        out.append(f"| {row['what']} | {row['goal']} | {_f(row['value'])} | {ci} | {met} |")
    out += ["", f"`answered`: {figs['answered']} answers, {figs['answered_right']} right. Citation precision "
            f"{_f(figs.get('citation_precision'))}; every key in the passages answered from "
            f"{_f(figs.get('keys_in_contexts'))}. Outcomes, answerable: {figs['outcomes_answerable']}; near misses: "
            f"{figs['outcomes_near_misses']}."]
    if len(results.get("by_writer") or {}) > 1:
        out += _table("By writer (the folder that holds the question's document)", results["by_writer"])
    out += _table("By genre", results["by_genre"])
    out += _table("By kind (what is asked; the realdocs questions keep their kinds: where the answer sits)",
                  results["by_kind"])
    conv = results.get("conversations")
    if conv:
        f = conv["figures"]
        out += ["", f"Follow-ups right in conversation: {_with_ci(f['follow_up_right_in_conversation'], f['follow_up_right_in_conversation_ci95'])}"
                f" of {f['follow_ups']}; asked standalone {_f(f['follow_up_right_standalone'])}; topic changes right "
                f"{_f(f['topic_change_right_in_conversation'])} of {f['topic_changes']}, polluted "
                f"{f['topic_changes_polluted']}."]
    if show_failures:
        out += ["", realdocs.markdown_failures(results["questions"])]
    return "\n".join(out)
