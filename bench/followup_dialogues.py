"""The development part's dialogues alone, figures per writer (issue 36.4).

``ragbus eval --dataset realtext --part dev`` asks every question and every dialogue (4-10 minutes on
2 cores, most of it the 1,145 questions); work on the follow-up rule needs only the dialogues, and
needs them per writer (design on one writer's dialogues, check on the other's). This asks each
dev dialogue's turns in one conversation through the embedded pipeline, as the eval does
(:func:`shared.tools.eval.conversations_run.ask_dialogues`), and prints, per writer, how many
follow-ups were right in conversation, right asked as their standalone form, and how many were
rewritten. ``--out`` writes every turn's standalone question and answer as JSON, writer d's left out (what the earlier
turns answered is what the rule reads: ``tests/data/followup_rewrites.jsonl`` keeps those answers).

    RAGBUS_LLM=local python bench/followup_dialogues.py --cache .ragbus-eval [--out F]
    RAGBUS_LLM=local python bench/followup_dialogues.py --dialogues bench/followup_fresh.jsonl \
        --home /tmp/c/realtext-dev-home    # dialogues written apart from the rules, over dev documents

``--dialogues`` asks a file of dialogues of the dev part's shape instead of the part's own:
``bench/followup_fresh.jsonl`` holds 38 follow-ups and 3 topic changes over documents of dev/a, dev/b
and realdocs, written before the follow-up design they measure was chosen (issue 36.4), their keys
checked in the cleaned documents (``tests/unit/test_followup_fresh_set.py``); ``bench/followup_fresh2.jsonl``
(16 follow-ups, 6 topic changes) was written after that design was chosen, to check it on dialogues it
was not chosen on; ``bench/followup_fresh3.jsonl`` (31 follow-ups, 2 topic changes, over documents the first
two barely use) was written before the reader's handling of yes/no and few-word follow-ups ("Is that the default?",
"And on Windows?", "Why?") was designed, to choose between designs. Right in conversation at 9e3a768 / after
f29bccd-5ab493f (bare "Why?" and "And before?" refer back, "Is that ..." asked in context, the earlier document
found by BM25): fresh 24/38 -> 25/38, fresh2 10/16 -> 11/16, fresh3 21/31 -> 23/31 (gold standalone 28, 10, 26
both ways); the dev dialogues unchanged (a 33/48, b 29/44, d 13/22). Of the 26 follow-ups lost, 9 are lost by the
conversation (the gold standalone is right) and 17 by the reader on the gold standalone question: all 17
answered_with_caveat, none refused; 14 quoting the right document's wrong sentences, 3 a neighbouring document.
``bench/followup_fresh4.jsonl`` (30 follow-ups, 2 topic changes; lsof, node timers, what's new in Python 3.1/3.9,
xz, ipaddress, fontconfig, grep, French/Spanish/German FAQs) was written before the rewrite's handling of pronouns for
the earlier answer, "what about" splices inside a call or an option, "And before 3.9?", "Is that the default?" after
"What about -l?" and "And its maximum?" was changed: right in conversation 18/30 -> 21/30 (gold standalone 22/30),
fresh 26/38, fresh2 11/16, fresh3 23/31 unchanged. ``bench/followup_fresh5.jsonl`` (20 follow-ups, 1 topic change; login.defs,
make NEWS, functools, curses, maintainer scripts, xz) was written before the rewrite's handling of "And when X?" conditions and
"its X" of an attribute was changed: 15/20 -> 16/20 (gold standalone 15/20). ``bench/followup_fresh6.jsonl`` (25 follow-ups, 1 topic change; coreutils
and less NEWS, zstd, node SECURITY, policy control fields, ninja, Python FAQ and functional HOWTO, krb5, French/German/Spanish
maintainer guide) was written before 3cf4194 changed the rewrite of options ("base64 -w"), "-eed" nouns, "And how many X?",
"Which one" of a bare plural, a plural or irregular verb after the asked noun and "And for X?" of the same head noun: right in
conversation 20/25 both ways (gold standalone 23/25; its 4 rewrites that changed read right now, same outcomes), in fresh the 4 dialogues
whose rewrites changed 3/4 -> 4/4 (the Jessie dialogue); the other sets' rewrites are unchanged. ``bench/followup_fresh7.jsonl`` (30 follow-ups; diffutils, findutils, bash and man-db NEWS,
OpenSSL ENGINES, libcbor, pip, the annotations, instrumentation and descriptor HOWTOs, debconf, shared libraries, apt, a Spanish
pro-drop pair, French and German maintainer guides: documents the earlier sets and the dev dialogues barely use) was written before
the rewrite of "it" after "Which function/option ...?", "the first one", "another one", "since X 2.0" and Spanish pro-drop was changed:
at 0182edb right in conversation 24/30 (gold standalone 27/30); after 86417e0 ("it" after "Which function/option ...?" or "Which N did X
add?" as that function or option, "since X 2.0", "k1 in BM25" then "And b?", Spanish pro-drop) 25/30, fresh5 16/20 -> 17/20, the other
sets unchanged (fresh 28/38, fresh2 11/16, fresh3 23/31, fresh4 21/30, fresh6 21/25), the dev dialogues unchanged (a 33/48, b 29/44,
d 13/22). ``bench/followup_fresh8.jsonl`` (35 follow-ups; the Python general FAQ, base-passwd, the Debian manifesto and history, less and
gzip NEWS, isolating extensions, policy's operating-system chapter, debfaq choosing, French/Spanish/German FAQs and guide) was written
before 688813e-94fd6a8 changed the rewrite of "it" after a past act or a plural asked for, "they" before a stranded preposition, a bare
option, Spanish pro-drop, "X of packages", long passives, "says so" and "In which month and year?": right in conversation 24/35 -> 27/35
(gold standalone 26/35; 3 gained, none lost); the 989 public rewrites of the other sets and dev dialogues unchanged (fresh..fresh7 at
7525bb8: 28/38, 11/16, 23/31, 20/30, 17/20, 21/25, 25/30; fresh4's 21/30 after 86417e0 lost fr4-timers-interval to a3a3697's reader
change, its answer's 'delay ... Default: 1.' replaced by 'options ... Default: true.'). ``bench/followup_fresh11.jsonl``
(53 follow-ups over ten documents no set uses; half a, fr11a-, for design; half b, fr11b-, unrun until round 19's design
was frozen) was written before 9e2f1ee-f2a5077 changed "What if X?", a bare "How?", condition clauses, fragments naming
nothing and the earlier question beside a rewrite's search: asked through the pipeline over the 24 documents of fresh9-11
(``ragbus eval --dataset <a part folder> --reuse-ingest``), fresh9+10+11a 61/86 -> 65/86 (fresh11a 18/28 -> 21/28), the kept
half 11b 12/25 -> 12/25 (gold standalone 18/25): nothing measured on the unseen half. ``bench/followup_fresh12.jsonl``
(35 follow-ups over six documents no set uses; half a, fr12a-, for design; half b, fr12b-, unrun until round 20's design was
frozen) was written before efbbad2-350f2b9 refused splices that took their clause's verb, kept remarks ("Thanks?") as typed
and showed a bracketed follow-up as typed: right in conversation 12a 15/18 -> 16/18, the kept half 12b 14/17 -> 14/17 (same
answers; bracket or garbled forms shown 6 -> 2), fresh9+10+11 76/111 -> 76/111 (same answers, 37 bracket forms shown as typed).
Without f2a5077 (the earlier question beside a rewrite's search of the earlier document): 12a 15, 12b 14, fresh9+10+11 77
(11b 12 -> 14, 11a 21 -> 20): a tie, so it stays. ``--home`` reuses a kept home, such as the one ``ragbus eval
--dataset realtext --part dev --reuse-ingest --cache C`` leaves. Never run two of these at once on one home: their
workers share its local bus and take each other's queries, so one run's follow-ups are read by the other's code.

The documents are ingested once into ``<cache>/realtext-dialogues-home`` and reused by later runs
(delete it after changing cleaning, chunking or indexing). A document's id is derived from its
absolute path: reuse a kept home only from the same checkout (to compare two versions of the code,
swap the files in one checkout), or every document is ingested a second time beside the first. The
sealed test part is never read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.runtime.bootstrap import build_local  # noqa: E402
from shared.runtime.readiness import require_ready  # noqa: E402
from shared.runtime.stages import QUERY_STAGES  # noqa: E402
from shared.tools.eval import conversations, realtext  # noqa: E402
from shared.tools.eval.conversations_run import ask_dialogues  # noqa: E402
from shared.tools.eval.pipeline import FULL, pipeline_settings  # noqa: E402
from shared.tools.eval.realdocs_run import RealDocsOptions, ingest_into  # noqa: E402

HELD_OUT = "d"  # the writer nobody designs on: its figures are printed, its dialogues never written out


def writer_of(part: realtext.Part) -> dict[str, str]:
    """Each dialogue id's writer (its folder's name)."""
    out: dict[str, str] = {}
    for folder in part.folders:
        path = folder / "dialogues.jsonl"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    out[json.loads(line)["id"]] = folder.name
    return out


def earlier_turns(state, dialogues, since: str) -> dict[str, list[dict[str, str]]]:
    """Each dialogue's turns as its conversation stored them (question typed, question the loop read, as shown, answer,
    outcome), matched by the typed questions in order; records created before ``since`` (an earlier
    run's, in a kept home) are left out."""
    from shared.contract import state_collections  # noqa: PLC0415
    from shared.query.record import QueryRecord  # noqa: PLC0415

    by_conversation: dict[str, list[QueryRecord]] = {}
    for doc in state.list(state_collections.QUERIES):
        record = QueryRecord.from_doc(doc)
        if record.conversation_id and record.created_at >= since:
            by_conversation.setdefault(record.conversation_id, []).append(record)
    wanted = {tuple(d.turns): d.id for d in dialogues}
    out: dict[str, list[dict[str, str]]] = {}
    for records in by_conversation.values():
        records.sort(key=lambda r: r.created_at)
        typed = tuple(r.original_query for r in records)
        if typed in wanted:
            out[wanted[typed]] = [{"question": r.original_query, "standalone": r.question,  # what the loop read
                                   "shown": r.standalone_question or r.original_query,
                                   "outcome": r.outcome, "answer": r.answer or ""} for r in records]
    return out


def per_writer(results: list[conversations.DialogueResult], writers: dict[str, str]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for r in results:
        if r.kind != conversations.FOLLOW_UP:
            continue
        row = table.setdefault(writers.get(r.id, "?"), {"follow_ups": 0, "right_in_conversation": 0,
                                                         "right_standalone": 0, "rewritten": 0})
        row["follow_ups"] += 1
        row["right_in_conversation"] += r.in_conversation.correct
        row["right_standalone"] += r.standalone_alone.correct
        row["rewritten"] += r.rewritten
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(".ragbus-eval"))
    parser.add_argument("--out", type=Path, help="every dialogue's turns, rewrites and answers as JSON")
    parser.add_argument("--dialogues", type=Path, help="a JSON-lines file of dialogues over the dev part's documents "
                        "(bench/followup_fresh.jsonl) asked instead of the part's own")
    parser.add_argument("--home", type=Path, help="a kept home to reuse (an eval's <cache>/realtext-dev-home)")
    args = parser.parse_args()
    part = realtext.load_part("dev")
    writers = writer_of(part)
    dialogues = list(part.dialogues)
    if args.dialogues:
        from shared.tools.eval import realdocs  # noqa: PLC0415
        dialogues = conversations.load_rows(realdocs.jsonl_lines(args.dialogues),
                                            {d.file: d.folder / d.file for d in part.documents},
                                            corpora=(realtext.NAME,), max_turns=realtext.MAX_TURNS,
                                            topic_change_as_typed=False)
        writers = {d.id: args.dialogues.stem for d in dialogues}
    home = args.home or args.cache / "realtext-dialogues-home"
    home.mkdir(parents=True, exist_ok=True)
    settings = pipeline_settings(home, FULL)
    require_ready(settings, QUERY_STAGES)
    system = build_local(settings)
    started = time.perf_counter()
    try:
        files = ingest_into(system, settings, part.document_folders,
                            RealDocsOptions(cache_dir=args.cache, reuse_ingest=True, ingest_timeout_s=3600), home)
        print(f"ingest {time.perf_counter() - started:.0f}s, {system.deps.index.count_chunks()} chunks", file=sys.stderr)
        started, since = time.perf_counter(), system.deps.clock.now().isoformat()
        results, _ = ask_dialogues(system, dialogues, files, concurrency=2, query_timeout_s=120,
                                   say=lambda msg: print(msg, file=sys.stderr))
        earlier = earlier_turns(system.deps.state, dialogues, since)
    finally:
        system.deps.index.close()
    print(f"dialogues {time.perf_counter() - started:.0f}s", file=sys.stderr)
    table = per_writer(results, writers)
    for writer, row in sorted(table.items()):
        n = row["follow_ups"]
        print(f"writer {writer}: {n} follow-ups; right in conversation {row['right_in_conversation']}/{n} "
              f"({row['right_in_conversation'] / n:.3f}); right standalone {row['right_standalone']}/{n}; "
              f"rewritten {row['rewritten']}")
    if args.out:
        files_of = {d.id: d.file for d in dialogues}
        args.out.write_text(json.dumps({"per_writer": table, "dialogues": [
            {"writer": writers.get(r.id), "id": r.id, "kind": r.kind, "file": files_of.get(r.id), "turns": r.turns, "standalone": r.standalone,
             "asked_as": r.asked_as, "shown_as": r.shown_as, "right_in_conversation": r.in_conversation.correct,
             "right_standalone": r.standalone_alone.correct, "answer": r.in_conversation.answer,
             "outcome": r.in_conversation.outcome, "cited": r.in_conversation.cited_files,
             "standalone_answer": r.standalone_alone.answer, "standalone_outcome": r.standalone_alone.outcome,
             "standalone_cited": r.standalone_alone.cited_files,
             "conversation": earlier.get(r.id, [])}
            for r in results if writers.get(r.id) != HELD_OUT]}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
