"""The conversation set (``conversations``): follow-up questions that lean on an earlier turn.

``datasets/conversations/dialogues.jsonl`` holds one dialogue a line, each of two or three
turns asked in one conversation, over the real documents of the ``realdocs`` set and the
sample corpus (``corpus``: ``realdocs`` or ``sample``; ``file``: the document under either):

- a ``follow_up``'s last turn cannot be understood without the earlier ones ("What is
  libjpeg-turbo?" then "How much faster than libjpeg is it?"); ``standalone`` is the same
  question written out ("How much faster than libjpeg is libjpeg-turbo?"), and ``keys`` are
  short exact strings a correct answer holds (as in :mod:`shared.tools.eval.realdocs`);
- a ``topic_change``'s last turn asks about something else and must be answered as if the
  earlier turns were not there (``standalone`` is the last turn itself).

Scoring follows the realdocs set: an answer is right when every key is in it and it cites the
right file. Each dialogue's last turn is scored three ways: asked in its conversation, its
``standalone`` form asked alone (the reference), and, for follow-ups, the last turn as typed but
alone (what the question gives without the conversation). A topic change is polluted when the
conversation changed its question (its standalone question differs from the typed one) or it
is wrong where the question asked alone is right.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.contract.errors import ConfigError
from shared.tools.eval import realdocs

NAME = "conversations"
ROOT = Path(__file__).resolve().parent / "datasets" / NAME
SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "corpus"
#: the sample corpus's documents as files (the site's articles and the Markdown/text notes)
SAMPLE_FOLDERS = (SAMPLE_CORPUS / "site" / "articles", SAMPLE_CORPUS / "docs")

FOLLOW_UP = "follow_up"
TOPIC_CHANGE = "topic_change"
KINDS = (FOLLOW_UP, TOPIC_CHANGE)
CORPORA = ("realdocs", "sample")
#: the issue's targets: (figure, what, op, bound); "at least as often as standalone" is a comparison
MIN_FOLLOW_UPS, MIN_TOPIC_CHANGES = 30, 10


@dataclass(frozen=True)
class Dialogue:
    id: str
    kind: str
    corpus: str
    file: str
    turns: tuple[str, ...]
    standalone: str
    keys: tuple[realdocs.Key, ...]

    @property
    def last(self) -> str:
        return self.turns[-1]

    def as_question(self, text: str) -> realdocs.Question:
        """The last turn as a realdocs question (``text`` asked), for :func:`realdocs.score`."""
        return realdocs.Question(self.id, text, "prose", self.file, self.keys)


def document_folders() -> dict[str, Path]:
    """Every document a dialogue may name, by file name: the realdocs set's and the sample corpus's."""
    folders = [realdocs.ROOT / "documents", *SAMPLE_FOLDERS]
    return {p.name: p for folder in folders for p in sorted(folder.iterdir()) if p.is_file()}


def load(root: Path = ROOT) -> tuple[Dialogue, ...]:
    """The dialogues; a malformed line is a :class:`ConfigError` naming it."""
    return tuple(load_rows(realdocs.jsonl_lines(root / "dialogues.jsonl"), document_folders()))


def load_rows(rows: Iterable[tuple[str, Any]], files: Mapping[str, Path], *, corpora: Sequence[str] = CORPORA,
              max_turns: int = 3, seen: set[str] | None = None, where_prefix: str = "",
              topic_change_as_typed: bool = True) -> list[Dialogue]:
    """Dialogues from parsed JSON lines (``(where, object)``), each naming a file of ``files`` and a
    corpus of ``corpora``, with 2 to ``max_turns`` turns; ids are added to ``seen`` (a repeat is an error).
    ``topic_change_as_typed``: a topic change's standalone question must be its last turn as typed."""
    out: list[Dialogue] = []
    seen = set() if seen is None else seen
    for where, raw in rows:
        where = where_prefix + where
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: not an object")
        if raw.get("kind") not in KINDS:
            raise ConfigError(f"{where}: kind {raw.get('kind')!r} is not one of {', '.join(KINDS)}")
        if raw.get("corpus") not in corpora:
            raise ConfigError(f"{where}: corpus {raw.get('corpus')!r} is not one of {', '.join(corpora)}")
        if raw.get("file") not in files:
            raise ConfigError(f"{where}: file {raw.get('file')!r} is not a document of the set")
        turns = raw.get("turns")
        if not isinstance(turns, list) or not 2 <= len(turns) <= max_turns or not all(
                isinstance(t, str) and t for t in turns):
            words = {3: "two or three", 4: "two to four"}.get(max_turns, f"2 to {max_turns}")
            raise ConfigError(f"{where}: 'turns' must be {words} questions")
        qid = raw.get("id") or ""
        if not qid or qid in seen:
            raise ConfigError(f"{where}: id {qid!r} is missing or repeated")
        seen.add(qid)
        keys = tuple(realdocs.key_from_json(k, where) for k in raw.get("keys") or [])
        if not keys:
            raise ConfigError(f"{where}: a dialogue needs at least one key")
        standalone = raw.get("standalone")
        if not isinstance(standalone, str) or not standalone:
            raise ConfigError(f"{where}: 'standalone' is missing")
        if topic_change_as_typed and raw["kind"] == TOPIC_CHANGE and standalone != turns[-1]:
            raise ConfigError(f"{where}: a topic change's standalone question is its last turn")
        out.append(Dialogue(qid, raw["kind"], raw["corpus"], raw["file"], tuple(turns), standalone, keys))
    return out


# ------------------------------------------------------------ scoring


@dataclass
class DialogueResult:
    """One dialogue's last turn, scored asked in its conversation, as its standalone form, and alone."""

    id: str
    kind: str
    corpus: str
    turns: list[str]
    standalone: str
    asked_as: str | None  # the question the conversation's last turn was retrieved, graded and answered as (record.question)
    in_conversation: realdocs.Scored
    standalone_alone: realdocs.Scored
    typed_alone: realdocs.Scored | None  # follow-ups: the last turn as typed, with no conversation
    shown_as: str | None = None  # its standalone question as shown: as typed where asked_as is it with the earlier one

    @property
    def rewritten(self) -> bool:
        return self.asked_as is not None and self.asked_as != self.turns[-1]

    @property
    def polluted(self) -> bool:
        """A topic change the conversation changed: its question rewritten, or wrong where alone it is right."""
        return self.rewritten or (self.standalone_alone.correct and not self.in_conversation.correct)


def _ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 4)


def figures(results: Sequence[DialogueResult]) -> dict[str, Any]:
    """Right answers per way of asking, per kind and corpus; topic changes polluted."""
    from shared.tools.eval.metrics import wilson_interval

    def ci(k: int, n: int) -> list[float] | None:
        return None if n == 0 else [round(x, 4) for x in wilson_interval(k, n)]

    follow = [r for r in results if r.kind == FOLLOW_UP]
    change = [r for r in results if r.kind == TOPIC_CHANGE]
    conv = sum(r.in_conversation.correct for r in follow)
    alone = sum(r.standalone_alone.correct for r in follow)
    typed = sum(bool(r.typed_alone and r.typed_alone.correct) for r in follow)
    out: dict[str, Any] = {
        "follow_ups": len(follow), "topic_changes": len(change),
        "follow_up_right_in_conversation": _ratio(conv, len(follow)),
        "follow_up_right_in_conversation_ci95": ci(conv, len(follow)),
        "follow_up_right_standalone": _ratio(alone, len(follow)),
        "follow_up_right_standalone_ci95": ci(alone, len(follow)),
        "follow_up_right_typed_alone": _ratio(typed, len(follow)),
        "follow_up_keys_in_conversation": _ratio(sum(not r.in_conversation.keys_missing for r in follow), len(follow)),
        "follow_up_keys_standalone": _ratio(sum(not r.standalone_alone.keys_missing for r in follow), len(follow)),
        "follow_ups_rewritten": sum(r.rewritten for r in follow),
        # where the two ways disagree: right only in the conversation, right only standalone
        "follow_up_only_in_conversation": sum(r.in_conversation.correct and not r.standalone_alone.correct
                                              for r in follow),
        "follow_up_only_standalone": sum(r.standalone_alone.correct and not r.in_conversation.correct
                                         for r in follow),
        "topic_change_right_in_conversation": _ratio(sum(r.in_conversation.correct for r in change), len(change)),
        "topic_change_right_alone": _ratio(sum(r.standalone_alone.correct for r in change), len(change)),
        "topic_changes_rewritten": sum(r.rewritten for r in change),
        "topic_changes_polluted": sum(r.polluted for r in change),
    }
    for corpus in CORPORA:
        rows = [r for r in follow if r.corpus == corpus]
        out[f"follow_ups_{corpus}"] = {"dialogues": len(rows),
                                       "right_in_conversation": sum(r.in_conversation.correct for r in rows),
                                       "right_standalone": sum(r.standalone_alone.correct for r in rows),
                                       "right_typed_alone": sum(bool(r.typed_alone and r.typed_alone.correct)
                                                                for r in rows)}
    return out


def verdicts(figs: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 24's checks: follow-ups right at least as often in conversation as standalone, and no
    topic change polluted; plus the set's size."""
    conv, alone = figs.get("follow_up_right_in_conversation"), figs.get("follow_up_right_standalone")
    return [
        {"what": "follow-ups answered right in conversation, at least as often as standalone",
         "goal": f">= standalone ({_f(alone)})", "value": conv,
         "met": None if conv is None or alone is None else conv >= alone},
        {"what": "topic changes polluted by earlier turns", "goal": "0", "value": figs["topic_changes_polluted"],
         "met": figs["topic_changes"] > 0 and figs["topic_changes_polluted"] == 0},
        {"what": "dialogues in the set", "goal": f">= {MIN_FOLLOW_UPS} follow-ups + {MIN_TOPIC_CHANGES} topic changes",
         "value": f"{figs['follow_ups']} + {figs['topic_changes']}",
         "met": figs["follow_ups"] >= MIN_FOLLOW_UPS and figs["topic_changes"] >= MIN_TOPIC_CHANGES},
    ]


def _f(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def markdown(results: dict[str, Any], *, show_failures: bool = False) -> str:
    figs, m = results["figures"], results["machine"]
    out = [
        f"Dataset: {NAME}: {figs['follow_ups']} follow-up dialogues + {figs['topic_changes']} topic changes over "
        f"{results['dataset']['documents']} documents (the realdocs set and the sample corpus). Model: "
        f"{results['model']}. Measured {m['date']} on {m['cpus']} CPUs, commit {m['git_commit']}, "
        f"{results['timings_s']['questions_s']} s for {results['timings_s']['queries']} queries.",
        "",
        "| the later turn, asked | right (keys + right file cited) | 95% interval | every key in the answer |",
        "|---|---:|---|---:|",
        f"| in its conversation | {_f(figs['follow_up_right_in_conversation'])} | "
        f"{_ci(figs['follow_up_right_in_conversation_ci95'])} | {_f(figs['follow_up_keys_in_conversation'])} |",
        f"| as its standalone question, alone | {_f(figs['follow_up_right_standalone'])} | "
        f"{_ci(figs['follow_up_right_standalone_ci95'])} | {_f(figs['follow_up_keys_standalone'])} |",
        f"| as typed, alone (no conversation) | {_f(figs['follow_up_right_typed_alone'])} | – | – |",
        "",
        f"Follow-ups rewritten by the conversation: {figs['follow_ups_rewritten']} of {figs['follow_ups']}; right only "
        f"in conversation: {figs['follow_up_only_in_conversation']}, only standalone: "
        f"{figs['follow_up_only_standalone']}. Per corpus: "
        + "; ".join(f"{c}: {figs[f'follow_ups_{c}']}" for c in CORPORA) + ".",
        f"Topic changes: right in conversation {_f(figs['topic_change_right_in_conversation'])}, asked alone "
        f"{_f(figs['topic_change_right_alone'])}; rewritten {figs['topic_changes_rewritten']}, polluted "
        f"{figs['topic_changes_polluted']} of {figs['topic_changes']}.",
        "",
        "| check | goal | value | met |",
        "|---|---|---|---|",
    ]
    for row in results["verdicts"]:
        met = {True: "yes", False: "**no**", None: "not measured"}[row["met"]]
        out.append(f"| {row['what']} | {row['goal']} | {_f(row['value'])} | {met} |")
    if show_failures:
        out += ["", "### Dialogues not right in conversation, or rewritten topic changes"]
        for d in results["dialogues"]:
            conv = d["in_conversation"]
            if conv["correct"] and not (d["kind"] == TOPIC_CHANGE and d["asked_as"] != d["turns"][-1]):
                continue
            out += ["", f"- **{d['id']}** ({d['kind']}): " + " / ".join(d["turns"]),
                    f"  asked as: {d['asked_as']!r}"
                    + (f" (shown as {d['shown_as']!r})" if d.get("shown_as") not in (None, d["asked_as"]) else "")
                    + f"; standalone right: {d['standalone_alone']['correct']}; "
                    f"missing {conv['keys_missing']}, cited {conv['cited_files'] or 'nothing'}",
                    "  answer: " + " ".join((conv["answer"] or "(none)").split())[:400]]
    return "\n".join(out)


def _ci(ci: list[float] | None) -> str:
    return "–" if not ci else f"{ci[0]:.3f}–{ci[1]:.3f}"
