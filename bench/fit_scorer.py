"""Fit the local reader's sentence score on the realtext set's development part, judged for writers it never saw.

    .venv/bin/python bench/fit_scorer.py --from-rows R --reread --reuse-ingest --cache C --rows R2   # read (minutes)
    .venv/bin/python bench/fit_scorer.py --from-rows R2 --dry-run           # fit and report only (seconds)
    .venv/bin/python bench/fit_scorer.py --from-rows R2 --answers --reuse-ingest --cache C --dry-run
                                                  # also each writer's answers read with the weights fit without it

The reader (:class:`shared.query.reading.extractive.Reader`) scores the few sentences its cheap score ranks best
(``Reader.pool``) on the columns of ``Reader.scored_on`` and quotes the best-scored one first. This script fits
those columns' weights as a ranking model over the answerable questions of the **development** part (the dev
writers' folders and the realdocs set), from the rows ``bench/fit_reader.py`` collects (the same options:
``--rows``, ``--from-rows``, ``--reread``): a softmax over each question's scored sentences, whose target is the
sentences that hold every key string of the question and come from the question's file (a question with none
teaches nothing and is left out of the fit, not of the figures). The L2 penalty is the one with the best held-out
likelihood **leaving one writer out** (writers a, b and the realdocs set), and a column weighs 0 unless its weight
has one sign, and some strength, in every fit that leaves a writer out (:func:`fit_reader.stable_columns`).

It reports, for each writer held out, how often the best-scored sentence holds the keys from the right file with
the weights fit on the other writers and with the weights in use, in the same run; with ``--answers`` also how
often the answer the reader quotes holds the keys and cites the question's file (each writer's passages read again
with the weights fit without that writer: minutes). It also counts, per writer, where each answerable question's
keys are lost on their way from the retrieved passages to the answer (:func:`fit_reader.lost_at`: not retrieved, not
in one quotable sentence, outside the embedded pool, not ranked first ...), and where the first sentence holding them
ranks and what ranks first instead (:func:`key_ranks_by_writer`; ``--examples N`` shows wrong answers of each writer
but the judge). ``--judge WRITER`` leaves a writer out of the fit and the penalty's choice and reports its figures
only. Unless ``--dry-run`` it writes the weights fit on the whole part (less the judge), scaled to the sum of the weights in use (the reader's shares, ``further_share`` and ``close_share``, compare
scores), with how they were fit, to ``shared/query/reading/sentence_score.json``.

Nothing here reads the sealed test part.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_reader  # noqa: E402
from fit_reader import ROOT, say  # noqa: E402

from shared.query.reading import extractive  # noqa: E402
from shared.query.reading.sentence_score import SCORE_FILE, SCORED_ON, SentenceScore  # noqa: E402

L2_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
Question = tuple[np.ndarray, np.ndarray]  # a question's scored sentences (rows: SCORED_ON) and which are right


def questions_of(rows: list[dict[str, Any]]) -> list[Question]:
    """Each answerable row's scored sentences and the target: those holding every key from the question's file."""
    out = []
    for row in rows:
        pool = row.get("pool") or []
        if pool:
            out.append((np.array([p["scored_on"] for p in pool], dtype=float),
                        np.array([bool(p["keys"] and p["own_file"]) for p in pool])))
    return out


def fit_softmax(questions: list[Question], l2: float, columns: np.ndarray | None = None,
                iterations: int = 50) -> np.ndarray:
    """The weights (one per column, 0 outside ``columns``) of an L2-penalised softmax over each question's
    sentences whose target spreads evenly over its right sentences (a question with none is left out), by Newton's
    method on standardised columns; returned on the columns' own scale (a sentence's score is ``x @ weights``)."""
    taught = [(x, y) for x, y in questions if y.any()]
    if not taught:
        raise ValueError("fit_softmax needs a question with a right sentence")
    d = taught[0][0].shape[1]
    keep = np.ones(d, dtype=bool) if columns is None else columns
    scale = np.vstack([x for x, _ in taught]).std(axis=0)
    scale[scale < 1e-9] = 1.0
    design = [(x[:, keep] / scale[keep], y / y.sum()) for x, y in taught]
    w = np.zeros(int(keep.sum()))
    for _ in range(iterations):
        gradient, hessian = l2 * w, l2 * np.eye(len(w)) + 1e-9 * np.eye(len(w))
        for x, target in design:
            z = x @ w
            p = np.exp(z - z.max())
            p /= p.sum()
            gradient = gradient + x.T @ (p - target)
            hessian = hessian + x.T @ (np.diag(p) - np.outer(p, p)) @ x
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    out = np.zeros(d)
    out[keep] = w / scale[keep]
    return out


def _standardised(weights: np.ndarray, questions: list[Question]) -> np.ndarray:
    scale = np.vstack([x for x, _ in questions]).std(axis=0)
    return weights * np.where(scale < 1e-9, 1.0, scale)


def fit_stable_softmax(questions: list[Question], writer: np.ndarray, l2: float) -> np.ndarray:
    """:func:`fit_softmax` over the columns whose standardised weight keeps one sign, some strength, in every fit
    that leaves one of ``writer``'s groups out (all columns when there is one group, or none is stable)."""
    groups = np.unique(writer)
    keep = None
    if len(groups) >= 2:
        parts = [[q for q, w in zip(questions, writer, strict=True) if w != g] for g in groups]
        fits = [_standardised(fit_softmax(part, l2), part) for part in parts if any(y.any() for _, y in part)]
        keep = fit_reader.stable_columns(np.array(fits))
        keep = keep if keep.any() else None
    return fit_softmax(questions, l2, keep)


def log_likelihood(weights: np.ndarray, questions: list[Question]) -> float:
    """Mean log probability the softmax gives a question's right sentences (questions with one)."""
    out = []
    for x, y in questions:
        if y.any():
            z = x @ weights
            z = z - z.max()
            out.append(float(np.log(np.exp(z[y]).sum()) - np.log(np.exp(z).sum())))
    return float(np.mean(out)) if out else 0.0


def top_right(weights: np.ndarray, questions: list[Question]) -> int:
    """How many questions' best-scored sentence is a right one (the first of a tie, as the pool is ordered)."""
    return sum(int(y[int(np.argmax(x @ weights))]) for x, y in questions)


def held_out_weights(questions: list[Question], writer: np.ndarray, l2: float) -> dict[str, np.ndarray]:
    """Per writer, the weights fit on the other writers' questions only."""
    out = {}
    for g in np.unique(writer):
        train = [q for q, w in zip(questions, writer, strict=True) if w != g]
        out[str(g)] = fit_stable_softmax(train, writer[writer != g], l2)
    return out


def choose_l2(questions: list[Question], writer: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    """The L2 penalty whose held-out weights (leaving each writer out) give the right sentences the highest mean
    log probability on the writers they did not see, and those weights."""
    best: tuple[float, float, dict[str, np.ndarray]] | None = None
    for l2 in L2_GRID:
        fits = held_out_weights(questions, writer, l2)
        scored = [log_likelihood(fits[str(g)], [q for q, w in zip(questions, writer, strict=True) if w == g])
                  * int(sum(y.any() for (_, y), w in zip(questions, writer, strict=True) if w == g))
                  for g in np.unique(writer)]
        total = float(np.sum(scored))
        if best is None or total > best[0]:
            best = (total, l2, fits)
    assert best is not None
    return best[1], best[2]


def scaled_like(weights: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``weights`` scaled to the sum of ``reference``'s magnitudes: the same ranking, scores of the same size."""
    total = float(np.abs(weights).sum())
    return weights * (float(np.abs(reference).sum()) / total) if total > 0 else weights


def answers_right(rows: list[dict[str, Any]], weights: np.ndarray, home: Path | None) -> int:
    """How many of ``rows``' answerable questions the reader, scoring sentences with ``weights``, answers with every
    key and a citation of the question's file (their kept passages read again; ``rows`` are not changed)."""
    again = copy.deepcopy([r for r in rows if not r["near_miss"]])
    shipped = extractive.shipped_sentence_score
    extractive.shipped_sentence_score = lambda: SentenceScore(tuple(map(float, weights)))
    try:
        fit_reader.reread(again, say, home)
    finally:
        extractive.shipped_sentence_score = shipped
    fit_reader.label_rows(again)
    return sum(r["right"] for r in again)


def losses_by_writer(rows: list[dict[str, Any]], writers: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per writer, how many answerable questions lose their keys at each of :data:`fit_reader.LOSS_STAGES` (rows read
    by this checkout's reader; ``"no_reading"``: it quoted nothing it could judge, e.g. no passage kept)."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        if not row["near_miss"]:
            stages = out.setdefault(writers[row["file"]], dict.fromkeys(fit_reader.LOSS_STAGES, 0))
            stage = row.get("lost_at", "no_reading")
            stages[stage] = stages.get(stage, 0) + 1
    return {w: {s: n for s, n in stages.items() if n} for w, stages in sorted(out.items())}


#: Where the first sentence holding an answerable question's keys (from its file) ranks among the reader's scored
#: sentences (:func:`key_ranks_by_writer`): first, second or third, lower, outside the embedded pool, or in no
#: quotable sentence of the retrieved passages (spread over several, only in another file's, not quotable ...).
RANKS = ("first", "second_third", "lower", "outside_pool", "no_sentence")
#: What the sentence ranked first is, when one holding the keys ranks lower: another file's, one stating a value of the
#: asked type (not the asked one), or one of the right file that states none (it restates the asked subject).
INSTEAD = ("other_file", "states_other_value", "restates_subject")


def key_rank(row: dict[str, Any], weights: np.ndarray) -> tuple[str, str | None]:
    """Where ``row``'s first sentence holding its keys from its file ranks when the scored sentences are ranked by
    ``weights`` (:data:`RANKS`), and what the first-ranked one is instead (:data:`INSTEAD`; None when it holds them
    or none is scored)."""
    pool = row.get("pool") or []
    if pool:
        x = np.array([p["scored_on"] for p in pool], dtype=float)
        order = np.argsort(-(x @ weights), kind="stable")
        right = [n for n, k in enumerate(order) if pool[k]["keys"] and pool[k]["own_file"]]
        if right:
            at = right[0]
            rank = "first" if at == 0 else "second_third" if at < 3 else "lower"
            if at == 0:
                return rank, None
            lead = pool[order[0]]
            states = lead["scored_on"][SCORED_ON.index("states")] > 0
            return rank, "other_file" if not lead["own_file"] else "states_other_value" if states else "restates_subject"
    return ("outside_pool" if row.get("lost_at") == "outside_pool" else "no_sentence"), None


def key_ranks_by_writer(rows: list[dict[str, Any]], writers: dict[str, str],
                        weights: dict[str, np.ndarray]) -> dict[str, dict[str, dict[str, int]]]:
    """Per writer, over its answerable questions whose keys are in some retrieved passage: how many rank their first
    key-holding sentence at each of :data:`RANKS` (``rank``), and what ranks first instead (``instead``), the sentences
    ranked by the writer's ``weights``."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        writer = writers[row["file"]]
        if row["near_miss"] or row.get("lost_at", "not_in_contexts") == "not_in_contexts" or writer not in weights:
            continue
        rank, instead = key_rank(row, weights[writer])
        mine = out.setdefault(writer, {"rank": dict.fromkeys(RANKS, 0), "instead": dict.fromkeys(INSTEAD, 0)})
        mine["rank"][rank] += 1
        if instead:
            mine["instead"][instead] += 1
    return dict(sorted(out.items()))


def show_instead(rows: list[dict[str, Any]], writers: dict[str, str], weights: np.ndarray, n: int,
                 judge: str | None) -> None:
    """Up to ``n`` questions per writer (never the judge's) whose keys rank below first and whose answer is wrong: the
    question, its keys and the answer quoted instead."""
    shown: dict[str, int] = {}
    for row in rows:
        writer = writers[row["file"]]
        if writer == judge or row["near_miss"] or row["right"] or key_rank(row, weights)[0] not in ("second_third",
                                                                                                   "lower"):
            continue
        if shown.setdefault(writer, 0) < n:
            shown[writer] += 1
            say(f"  [{writer}] {row['question']} keys {row['keys']}\n      quoted: {row.get('answer', '')[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    fit_reader.add_row_arguments(parser)
    parser.add_argument("--answers", action="store_true",
                        help="also read each writer's passages again with the weights fit without it, and with the "
                             "weights in use (minutes): how often the quoted answer is right, held out")
    parser.add_argument("--judge", default=None, help="a writer (e.g. d) left out of the fit and the choice of the "
                        "penalty, reported apart (its figures only): a judge nobody fitted on")
    parser.add_argument("--examples", type=int, default=0,
                        help="show N questions per writer (never the judge's) whose keys rank below first, and the "
                             "answer quoted instead")
    args = parser.parse_args()
    started, commit = time.perf_counter(), fit_reader.checkout_commit()
    rows = fit_reader.rows_from_arguments(args, say)
    writers = fit_reader.document_writers()
    answerable = [r for r in rows if not r["near_miss"]]
    read = [r for r in answerable if r.get("pool")]
    questions = questions_of(read)
    writer = np.array([writers[r["file"]] for r in read])
    shipped = extractive.shipped_sentence_score()
    in_use = np.array(shipped.weights)
    fit_on = writer != args.judge
    train = [q for q, f in zip(questions, fit_on, strict=True) if f]
    l2, fits = choose_l2(train, writer[fit_on])
    weights = scaled_like(fit_stable_softmax(train, writer[fit_on], l2), in_use)
    if args.judge:
        fits[args.judge] = weights
    say(f"{len(answerable)} answerable questions, {len(read)} with sentences scored, {sum(y.any() for _, y in questions)}"
        f" with a right one among them; l2 {l2} (held-out log-likelihood, leaving one writer out"
        + (f"; writer {args.judge} judged, not fitted on)" if args.judge else ")"))
    by_writer: dict[str, dict[str, Any]] = {}
    for g in sorted(fits):
        mine = [q for q, w in zip(questions, writer, strict=True) if w == g]
        n = sum(1 for r in answerable if writers[r["file"]] == g)
        by_writer[g] = {"answerable": n, "right_among_scored": sum(int(y.any()) for _, y in mine),
                        "top_right_in_use": round(top_right(in_use, mine) / n, 4),
                        "top_right_fit": round(top_right(fits[g], mine) / n, 4)}
    if args.answers:
        home = fit_reader.reread_home(args)
        for g in sorted(fits):
            theirs = [r for r in answerable if writers[r["file"]] == g]
            n = len(theirs)
            by_writer[g]["answer_right_in_use"] = round(answers_right(theirs, in_use, home) / n, 4)
            by_writer[g]["answer_right_fit"] = round(answers_right(theirs, scaled_like(fits[g], in_use), home) / n, 4)
    for g, figures in by_writer.items():
        say(f"  writer {g} held out{' (the judge)' if g == args.judge else ''}: {figures}")
    for name, w in (("in use", dict.fromkeys(fits, in_use)), ("fit without the writer", fits)):
        for g, ranks in key_ranks_by_writer(rows, writers, w).items():
            say(f"  writer {g}, where the first sentence holding the keys ranks ({name}): {ranks}")
    show_instead(rows, writers, in_use, args.examples, args.judge)
    losses = losses_by_writer(rows, writers)
    for g, stages in losses.items():
        say(f"  writer {g}, where the keys are lost: {stages}")
    say("fitted weights: " + ", ".join(f"{c} {w:+.3f}" for c, w in zip(SCORED_ON, weights, strict=True)))
    say("in use:         " + ", ".join(f"{c} {w:+.3f}" for c, w in zip(SCORED_ON, in_use, strict=True)))
    fitted = {
        "by": "bench/fit_scorer.py",
        "on": "realtext dev part (the dev writers' folders and the realdocs set), answerable questions",
        "questions": len(read), "taught": int(sum(y.any() for _, y in questions)),
        "target": "the scored sentences holding every key string, from the question's file",
        "split": "by writer (leave one writer out)" + (f"; writer {args.judge} judged" if args.judge else ""), "l2": l2, "held_out_by_writer": by_writer,
        "lost_at_by_writer": losses,
        "in_use": {"weights": [round(float(w), 6) for w in in_use], "by": shipped.fitted.get("by", "bench/fit_scorer.py")},
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "git_commit": commit,
        "seconds": round(time.perf_counter() - started, 1),
    }
    if args.dry_run:
        say("dry run: nothing written")
        return
    SentenceScore(tuple(float(w) for w in weights), fitted).save()
    say(f"wrote {SCORE_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
