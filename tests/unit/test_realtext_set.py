"""The real-text dataset ``realtext`` (issue 36, deliver 1): every writer's folder checked the same way.

``shared/tools/eval/datasets/realtext/<part>/<writer>/`` holds ``manifest.json``,
``questions.jsonl``, ``dialogues.jsonl``, ``README.md`` and ``documents/`` (the format is
described in the set's README). This is the hand-check of each folder made permanent: every key
is in its document *as the cleaner outputs it*, a near miss's ``absent`` strings are in no
document of its part (cleaned or raw), ids and file names are unique across the set, a document
sits in one part only, and every genre, kind and language is one the set knows.

The checks are parametrised by folder, not by question, so that running this file shows no
question of the sealed test part; a failure names what is wrong.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from services.cleaner.handler import clean_content
from shared.ingest.files import MEDIA_TYPES
from shared.tools.eval import realdocs

pytestmark = pytest.mark.unit

DATASETS = Path(realdocs.__file__).resolve().parent / "datasets"
ROOT = DATASETS / "realtext"
PARTS = ("dev", "test")

GENRES = {"docs", "essay", "news", "spec", "faq"}
LANGUAGES = {"en", "de", "fr", "es"}
KINDS = {"value", "list", "how_why", "yes_no", "definition", "comparison", "identifier"}
NEAR_MISS = "near_miss"
DIALOGUE_KINDS = {"follow_up", "topic_change"}
#: the manifest's format for each file suffix the cleaner reads
FORMATS = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown", ".txt": "text",
           ".rst": "text", ".rest": "text"}
MAX_BYTES = 400_000

DOCUMENT_FIELDS = {"file", "format", "genre", "language", "package", "version", "source", "licence"}
QUESTION_FIELDS = {"id", "genre", "kind", "file", "question"}
DIALOGUE_FIELDS = {"id", "genre", "kind", "corpus", "file", "turns", "standalone", "keys"}


# ---------------------------------------------------------------- reading a folder


def folders(root: Path = ROOT) -> list[Path]:
    """Every ``<part>/<writer>/`` folder under ``root``, in a stable order."""
    return sorted(p for part in PARTS if (root / part).is_dir() for p in (root / part).iterdir() if p.is_dir())


def _lines(path: Path, problems: list[str]) -> list[dict]:
    if not path.is_file():
        problems.append(f"{path.name} is missing")
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            problems.append(f"{path.name} line {number}: not JSON ({exc})")
            continue
        if not isinstance(row, dict):
            problems.append(f"{path.name} line {number}: not a JSON object")
            continue
        rows.append({**row, "_where": f"{path.name} line {number}"})
    return rows


def manifest(folder: Path, problems: list[str]) -> list[dict]:
    try:
        data = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        problems.append(f"manifest.json cannot be read ({exc})")
        return []
    if not isinstance(data, dict) or not isinstance(data.get("documents"), list):
        problems.append("manifest.json is not {\"about\": ..., \"documents\": [...]}")
        return []
    if not isinstance(data.get("about"), str) or not data["about"].strip():
        problems.append("manifest.json lacks its 'about'")
    if not all(isinstance(d, dict) for d in data["documents"]):
        problems.append("manifest.json: a document entry is not an object")
    return [d for d in data["documents"] if isinstance(d, dict)]


@cache
def cleaned(path: Path) -> str:
    return clean_content(path.read_bytes(), MEDIA_TYPES[path.suffix], "file://" + str(path)).body


@cache
def raw(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _is_key(value: object) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) and v.strip() for v in value)


def _label(key: object) -> str:
    return realdocs.key_label(tuple(key) if isinstance(key, list) else key)  # type: ignore[arg-type]


def _missing_keys(keys: list, text: str) -> list[str]:
    return [_label(k) for k in keys if not realdocs.key_in(tuple(k) if isinstance(k, list) else k, text)]


# ---------------------------------------------------------------- the checks, each a list of problems


def check_documents(folder: Path) -> list[str]:
    problems: list[str] = []
    documents = manifest(folder, problems)
    listed = [d.get("file") for d in documents]
    for number, d in enumerate(documents, 1):
        where = f"manifest.json document {number} ({d.get('file')!r})"
        missing = sorted(f for f in DOCUMENT_FIELDS if not isinstance(d.get(f), str) or not d[f].strip())
        if missing:
            problems.append(f"{where} lacks {', '.join(missing)}")
            continue
        if set(d) - DOCUMENT_FIELDS:
            problems.append(f"{where}: unknown fields {sorted(set(d) - DOCUMENT_FIELDS)}")
        suffix = Path(d["file"]).suffix
        if FORMATS.get(suffix) != d["format"]:
            problems.append(f"{where}: format {d['format']!r} does not fit its suffix {suffix!r}")
        if d["genre"] not in GENRES:
            problems.append(f"{where}: unknown genre {d['genre']!r}")
        if d["language"] not in LANGUAGES:
            problems.append(f"{where}: unknown language {d['language']!r}")
        if not d["source"].startswith("/usr/share/"):
            problems.append(f"{where}: source {d['source']!r} is not a path a package installs")
        path = folder / "documents" / d["file"]
        if not path.is_file():
            problems.append(f"{where}: not in documents/")
        elif path.stat().st_size >= MAX_BYTES:
            problems.append(f"{where}: {path.stat().st_size} bytes (a document stays under {MAX_BYTES})")
        elif suffix in MEDIA_TYPES and not cleaned(path).strip():
            problems.append(f"{where}: cleans to nothing")
    repeated = [f for f, n in Counter(listed).items() if n > 1]
    if repeated:
        problems.append(f"manifest.json lists {repeated} more than once")
    on_disk = {p.name for p in (folder / "documents").iterdir()} if (folder / "documents").is_dir() else set()
    if on_disk - set(listed):
        problems.append(f"documents/ holds files the manifest does not list: {sorted(on_disk - set(listed))}")
    readme = folder / "README.md"
    if not readme.is_file():
        problems.append("README.md (the provenance table) is missing")
    else:
        text = readme.read_text(encoding="utf-8")
        unnamed = [f for f in listed if isinstance(f, str) and f"`{f}`" not in text]
        if unnamed:
            problems.append(f"README.md does not name {unnamed}")
    return problems


def _genre_of(folder: Path) -> dict[str, str]:
    return {d["file"]: d.get("genre") for d in manifest(folder, []) if isinstance(d.get("file"), str)}


def check_questions(folder: Path, part_texts: dict[str, tuple[str, str]]) -> list[str]:
    """``part_texts``: every document of the folder's part, file name -> (cleaned, raw), each
    ``realdocs.normalised``."""
    problems: list[str] = []
    genres = _genre_of(folder)
    answered = set()
    for q in _lines(folder / "questions.jsonl", problems):
        where = f"{q.pop('_where')} ({q.get('id')!r})"
        missing = sorted(f for f in QUESTION_FIELDS if not isinstance(q.get(f), str) or not q[f].strip())
        if missing:
            problems.append(f"{where} lacks {', '.join(missing)}")
            continue
        if q["file"] not in genres:
            problems.append(f"{where}: file {q['file']!r} is not in manifest.json")
            continue
        if q["genre"] != genres[q["file"]]:
            problems.append(f"{where}: genre {q['genre']!r}, but its file is {genres[q['file']]!r}")
        path = folder / "documents" / q["file"]
        if q["kind"] == NEAR_MISS:
            extra = set(q) - QUESTION_FIELDS - {"absent", "note"}
            absent = q.get("absent")
            if "keys" in q or not isinstance(absent, list) or not absent or not all(
                    isinstance(a, str) and a.strip() for a in absent):
                problems.append(f"{where}: a near miss has no keys and a non-empty list of absent strings")
                continue
            if not isinstance(q.get("note"), str) or not q["note"].strip():
                problems.append(f"{where}: a near miss says in its note what the documents say instead")
            for a in absent:
                # realdocs.key_in(a, text) for each text, with each text normalised once, not per key
                needle = realdocs.normalised(a)
                holders = sorted(f for f, texts in part_texts.items() if any(needle in t for t in texts))
                if holders:
                    problems.append(f"{where}: absent {a!r} is in {holders}")
        elif q["kind"] in KINDS:
            extra = set(q) - QUESTION_FIELDS - {"keys"}
            keys = q.get("keys")
            if not isinstance(keys, list) or not keys or not all(_is_key(k) for k in keys):
                problems.append(f"{where}: keys is a non-empty list of strings or lists of alternatives")
                continue
            answered.add(q["file"])
            if path.is_file():
                lost = _missing_keys(keys, cleaned(path))
                if lost:
                    problems.append(f"{where}: {lost} not in the cleaned {q['file']}")
        else:
            problems.append(f"{where}: unknown kind {q['kind']!r}")
            continue
        if extra:
            problems.append(f"{where}: unknown fields {sorted(extra)}")
    unasked = sorted(set(genres) - answered)
    if unasked:
        problems.append(f"no answerable question is about {unasked}")
    return problems


def check_dialogues(folder: Path) -> list[str]:
    problems: list[str] = []
    genres = _genre_of(folder)
    for d in _lines(folder / "dialogues.jsonl", problems):
        where = f"{d.pop('_where')} ({d.get('id')!r})"
        missing = sorted(f for f in DIALOGUE_FIELDS - {"turns", "keys"} if not isinstance(d.get(f), str)
                         or not d[f].strip())
        if missing:
            problems.append(f"{where} lacks {', '.join(missing)}")
            continue
        if set(d) - DIALOGUE_FIELDS:
            problems.append(f"{where}: unknown fields {sorted(set(d) - DIALOGUE_FIELDS)}")
        if d["kind"] not in DIALOGUE_KINDS:
            problems.append(f"{where}: unknown kind {d['kind']!r}")
        if d["corpus"] != "realtext":
            problems.append(f"{where}: corpus {d['corpus']!r}, not 'realtext'")
        turns = d.get("turns")
        if not isinstance(turns, list) or not 2 <= len(turns) <= 4 or not all(
                isinstance(t, str) and t.strip() for t in turns):
            problems.append(f"{where}: turns is a list of 2 to 4 questions")
        if d["file"] not in genres:
            problems.append(f"{where}: file {d['file']!r} is not in manifest.json")
            continue
        if d["genre"] != genres[d["file"]]:
            problems.append(f"{where}: genre {d['genre']!r}, but its file is {genres[d['file']]!r}")
        keys = d.get("keys")
        if not isinstance(keys, list) or not keys or not all(_is_key(k) for k in keys):
            problems.append(f"{where}: keys is a non-empty list of strings or lists of alternatives")
            continue
        path = folder / "documents" / d["file"]
        if path.is_file():
            lost = _missing_keys(keys, cleaned(path))
            if lost:
                problems.append(f"{where}: {lost} not in the cleaned {d['file']}")
    return problems


def check_across(root: Path = ROOT) -> list[str]:
    """Ids and file names unique across the set, each document in one part only (by content, the
    realdocs set counted as development data), and every kind in every part."""
    problems: list[str] = []
    ids: Counter[str] = Counter()
    files: Counter[str] = Counter()
    part_of: dict[str, set[str]] = {}
    for folder in folders(root):
        part = folder.parent.name
        for row in _lines(folder / "questions.jsonl", []) + _lines(folder / "dialogues.jsonl", []):
            if isinstance(row.get("id"), str):
                ids[row["id"]] += 1
        for d in manifest(folder, []):
            path = folder / "documents" / str(d.get("file"))
            files[str(d.get("file"))] += 1
            if path.is_file():
                part_of.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), set()).add(part)
    old = DATASETS / "realdocs" / "documents"
    for path in sorted(old.iterdir()) if old.is_dir() else ():
        part_of.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), set()).add("realdocs (dev)")
    problems += _sources_used_twice(root)
    problems += [f"id {i!r} is used {n} times" for i, n in ids.items() if n > 1]
    problems += [f"file name {f!r} is used {n} times" for f, n in files.items() if n > 1]
    split = [sorted(parts) for parts in part_of.values() if "test" in parts and len(parts) > 1]
    problems += [f"a document is in more than one part: {parts}" for parts in split]
    for part in PARTS:
        asked = Counter(q.get("kind") for folder in folders(root) if folder.parent.name == part
                        for q in _lines(folder / "questions.jsonl", []))
        if asked and set(asked) != KINDS | {NEAR_MISS}:
            problems.append(f"part {part} lacks the kinds {sorted((KINDS | {NEAR_MISS}) - set(asked))}")
    return problems


def _package_file(source: object) -> str:
    """The package file a manifest's ``source`` names: its path, without a note on how it was rendered."""
    return str(source).split()[0] if isinstance(source, str) and source.strip() else ""


def _sources_used_twice(root: Path) -> list[str]:
    """A package file copied by two folders (or by a folder and the realdocs set), however it was
    decompressed or rendered: the same document must not sit in two writers' folders or two parts,
    which comparing the copies' bytes misses when one was rendered or decompressed differently."""
    users: dict[str, set[str]] = {}
    for folder in folders(root):
        for d in manifest(folder, []):
            if _package_file(d.get("source")):
                users.setdefault(_package_file(d.get("source")), set()).add(f"{folder.parent.name}/{folder.name}")
    try:
        old = json.loads((root.parent / "realdocs" / "manifest.json").read_text(encoding="utf-8"))["documents"]
    except (OSError, ValueError, KeyError, TypeError):
        old = []
    for d in old if isinstance(old, list) else ():
        if isinstance(d, dict) and _package_file(d.get("source")):
            users.setdefault(_package_file(d["source"]), set()).add("realdocs")
    return [f"the package file {source} is used by {sorted(by)}" for source, by in sorted(users.items()) if len(by) > 1]


def part_texts(root: Path, part: str) -> dict[str, tuple[str, str]]:
    """Every document of ``part`` under ``root``: file name -> (cleaned, raw), each normalised as
    ``realdocs.key_in`` normalises the text it looks in."""
    texts = {}
    for folder in folders(root):
        if folder.parent.name == part:
            for d in manifest(folder, []):
                path = folder / "documents" / str(d.get("file"))
                if path.is_file() and path.suffix in MEDIA_TYPES:
                    texts[path.name] = (realdocs.normalised(cleaned(path)), realdocs.normalised(raw(path)))
    return texts


# ---------------------------------------------------------------- the set itself

FOLDERS = folders()


def test_the_set_has_folders():
    assert FOLDERS, f"no <part>/<writer>/ folder under {ROOT}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_a_folders_documents_are_listed_with_their_provenance(folder):
    problems = check_documents(folder)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_a_folders_keys_are_in_their_cleaned_documents_and_near_misses_in_none(folder):
    problems = check_questions(folder, part_texts(ROOT, folder.parent.name))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_a_folders_dialogues_are_well_formed_and_answered_by_their_file(folder):
    problems = check_dialogues(folder)
    assert not problems, "\n".join(problems)


def test_ids_and_file_names_are_unique_and_each_document_in_one_part():
    problems = check_across()
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- the checks catch what they should


def _tiny(root: Path, part: str = "dev", writer: str = "a", *, questions=(), dialogues=(), text="Alpha has 384 dims.\n",
          name="p-a.md") -> Path:
    folder = root / part / writer
    (folder / "documents").mkdir(parents=True)
    (folder / "documents" / name).write_text(text)
    (folder / "manifest.json").write_text(json.dumps({"about": "x", "documents": [
        {"file": name, "format": "markdown", "genre": "docs", "language": "en", "package": "p", "version": "1",
         "source": "/usr/share/doc/p/a.md", "licence": "MIT"}]}))
    (folder / "README.md").write_text(f"`{name}` from p\n")
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    (folder / "dialogues.jsonl").write_text("".join(json.dumps(d) + "\n" for d in dialogues))
    return folder


Q = {"id": "q1", "genre": "docs", "kind": "value", "file": "p-a.md", "question": "How many?", "keys": ["384"]}
NM = {"id": "n1", "genre": "docs", "kind": "near_miss", "file": "p-a.md", "question": "When?",
      "absent": ["released in"], "note": "the release is not dated"}
DIALOGUE = {"id": "d1", "genre": "docs", "kind": "follow_up", "corpus": "realtext", "file": "p-a.md",
            "turns": ["What is Alpha?", "How many dims has it?"], "standalone": "How many dims has Alpha?",
            "keys": ["384"]}


def test_a_good_tiny_folder_passes(tmp_path):
    folder = _tiny(tmp_path, questions=[Q, NM], dialogues=[DIALOGUE])
    assert check_documents(folder) == []
    assert check_questions(folder, part_texts(tmp_path, "dev")) == []
    assert check_dialogues(folder) == []


@pytest.mark.parametrize(("question", "problem"), [
    ({**Q, "keys": ["385"]}, "['385'] not in the cleaned p-a.md"),
    ({**Q, "keys": [["385", "three"]]}, "['385 | three'] not in the cleaned p-a.md"),
    ({**Q, "kind": "prose"}, "unknown kind 'prose'"),
    ({**Q, "genre": "spec"}, "genre 'spec', but its file is 'docs'"),
    ({**Q, "file": "b.md"}, "file 'b.md' is not in manifest.json"),
    ({**Q, "keys": []}, "keys is a non-empty list"),
    ({**{k: v for k, v in Q.items() if k != "keys"}, "key": ["384"]}, "keys is a non-empty list"),
    ({**Q, "answer": "384"}, "unknown fields ['answer']"),
    ({**NM, "absent": ["384 dims"]}, "absent '384 dims' is in ['p-a.md']"),
    ({**NM, "keys": ["x"]}, "a near miss has no keys"),
    ({**NM, "note": ""}, "says in its note"),
])
def test_a_bad_question_is_named(tmp_path, question, problem):
    folder = _tiny(tmp_path, questions=[Q, question] if question["kind"] != "value" else [question])
    problems = check_questions(folder, part_texts(tmp_path, "dev"))
    assert any(problem in p for p in problems), problems


def test_a_key_only_the_raw_markup_holds_is_not_in_the_cleaned_document(tmp_path):
    folder = _tiny(tmp_path, name="p-a.html", text="<html><body><p>Alpha<!-- 384 --></p></body></html>",
                   questions=[{**Q, "file": "p-a.html"}])
    manifest_path = folder / "manifest.json"
    data = json.loads(manifest_path.read_text())
    data["documents"][0].update(format="html", source="/usr/share/doc/p/a.html")
    manifest_path.write_text(json.dumps(data))
    problems = check_questions(folder, part_texts(tmp_path, "dev"))
    assert problems == ["questions.jsonl line 1 ('q1'): ['384'] not in the cleaned p-a.html"]


def test_a_near_miss_fact_in_another_writers_document_of_the_part_is_found(tmp_path):
    folder = _tiny(tmp_path, questions=[Q, NM])
    _tiny(tmp_path, part="test", writer="c", name="r-c.md", text="Beta was released in 2001.\n")
    assert check_questions(folder, part_texts(tmp_path, "dev")) == []  # another part's documents do not count
    _tiny(tmp_path, writer="b", name="q-b.md", text="It was released in 1999.\n")
    problems = check_questions(folder, part_texts(tmp_path, "dev"))
    assert problems == ["questions.jsonl line 2 ('n1'): absent 'released in' is in ['q-b.md']"]


@pytest.mark.parametrize(("change", "problem"), [
    ({"turns": ["only one"]}, "turns is a list of 2 to 4 questions"),
    ({"turns": ["a", "b", "c", "d", "e"]}, "turns is a list of 2 to 4 questions"),
    ({"kind": "chat"}, "unknown kind 'chat'"),
    ({"corpus": "realdocs"}, "corpus 'realdocs'"),
    ({"keys": ["512"]}, "['512'] not in the cleaned p-a.md"),
    ({"standalone": ""}, "lacks standalone"),
])
def test_a_bad_dialogue_is_named(tmp_path, change, problem):
    folder = _tiny(tmp_path, questions=[Q], dialogues=[{**DIALOGUE, **change}])
    problems = check_dialogues(folder)
    assert any(problem in p for p in problems), problems


def test_a_manifest_without_provenance_or_with_a_stray_file_is_named(tmp_path):
    folder = _tiny(tmp_path, questions=[Q])
    data = json.loads((folder / "manifest.json").read_text())
    data["documents"][0].update(licence="", genre="poem", format="html")
    (folder / "manifest.json").write_text(json.dumps(data))
    assert check_documents(folder) == ["manifest.json document 1 ('p-a.md') lacks licence"]
    data["documents"][0]["licence"] = "MIT"
    (folder / "manifest.json").write_text(json.dumps(data))
    (folder / "documents" / "stray.md").write_text("x")
    (folder / "README.md").write_text("nothing\n")
    assert check_documents(folder) == [
        "manifest.json document 1 ('p-a.md'): format 'html' does not fit its suffix '.md'",
        "manifest.json document 1 ('p-a.md'): unknown genre 'poem'",
        "documents/ holds files the manifest does not list: ['stray.md']",
        "README.md does not name ['p-a.md']",
    ]


def test_repeated_ids_names_and_a_document_in_both_parts_are_named(tmp_path):
    _tiny(tmp_path, questions=[Q])
    _tiny(tmp_path, writer="b", questions=[Q], text="other text\n")
    _tiny(tmp_path, part="test", writer="c", name="r-c.md")  # the same bytes as dev/a's document
    problems = check_across(tmp_path)
    assert "id 'q1' is used 2 times" in problems
    assert "file name 'p-a.md' is used 2 times" in problems
    assert "a document is in more than one part: ['dev', 'test']" in problems
    assert "part dev lacks the kinds ['comparison', 'definition', 'how_why', 'identifier', 'list', " \
           "'near_miss', 'yes_no']" in problems


def test_a_package_file_copied_by_two_folders_is_named_however_it_was_rendered(tmp_path):
    _tiny(tmp_path, questions=[Q])
    _tiny(tmp_path, part="test", writer="c", name="r-c.md", text="rendered differently\n")  # other bytes
    data = json.loads((tmp_path / "test" / "c" / "manifest.json").read_text())
    data["documents"][0]["source"] = "/usr/share/doc/p/a.md (rendered with MANWIDTH=80 man -l FILE | col -bx)"
    (tmp_path / "test" / "c" / "manifest.json").write_text(json.dumps(data))
    assert "the package file /usr/share/doc/p/a.md is used by ['dev/a', 'test/c']" in check_across(tmp_path)
    data["documents"][0]["source"] = "/usr/share/doc/p/other.md"
    (tmp_path / "test" / "c" / "manifest.json").write_text(json.dumps(data))
    assert not [p for p in check_across(tmp_path) if "package file" in p]
