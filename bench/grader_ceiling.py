"""How far the local grader's kind of evidence can go on fitz-gov: variants fit on the calibration
split, reported on the held-out split, beside the shipped model's features.

    .venv/bin/python bench/grader_ceiling.py            # about 2 min with a warm --cache
    .venv/bin/python bench/grader_ceiling.py --pair     # adds the cross-encoding variant (+5 min)

Examples are built as ``bench/fit_grader.py`` builds them (each question's first-iteration
contexts in the shared index, "open", and each case's own contexts, "own"), for both splits.
Each variant is a classifier over the grader's evidence (:data:`FEATURES`) plus what the
variant adds; its threshold refuses 3% of the calibration's answerable questions, as the
shipped model's does. Printed per variant: held-out ROC AUC (open / own) and the share of
must-abstain and of answerable cases refused at that threshold (open / own).

- ``features`` — the shipped model's logistic regression, refit here (the baseline);
- ``mlp`` — the same features through one hidden layer of 8 (does a non-linear fit help?);
- ``stale`` — plus, for a question asking for the current state, how many years the newest
  year the first three contexts state lies more than two years before today;
- ``maxsim`` — plus how well each question token is matched by some context token
  (MiniLM's contextual token vectors, question and passages encoded apart: min, mean, ...);
- ``pair`` (``--pair``) — plus MiniLM reading the question and the three most similar
  contexts together (cross-encoding; 1,536 numbers) under a strong L2 penalty. It costs
  about ten query embeddings per question (~50 ms on two cores), too much for the query path.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import fit_grader  # noqa: E402

from services.grader.handler import grading_contexts  # noqa: E402
from shared.adapters.local.embedder import OnnxMiniLMEmbedder  # noqa: E402
from shared.adapters.local.grade_model import FEATURES, fit_logistic  # noqa: E402
from shared.adapters.local.llm import LocalLanguageModel  # noqa: E402
from shared.contract.config import load_settings  # noqa: E402
from shared.tools.eval.dataset import CALIBRATION, HELDOUT, build_fitz_gov  # noqa: E402
from shared.tools.eval.own_contexts import own_contexts  # noqa: E402
from shared.tools.eval.retrieval import embed_cached, fill_index, open_index  # noqa: E402

_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")
_STOP = frozenset("the a an of in on at to for and or is are was were be by with what which who whom how when "
                  "where why does do did from that this it its as their there than into about can could would "
                  "should will has have had".split())


def collect(cache: Path) -> dict[str, list[dict]]:
    """split -> examples: question, kind (open / open-abstain / own / own-abstain), label, contexts, features."""
    full = build_fitz_gov()
    embedder = OnnxMiniLMEmbedder()
    cache.mkdir(parents=True, exist_ok=True)
    vectors = embed_cached([p.text for p in full.passages], embedder, cache, full.key)
    index_path = cache / f"index-{full.key}"
    index = open_index(index_path, embedder.dimension)
    fill_index(index, full, vectors)
    index.close()
    settings = load_settings({})
    passage_text = {p.passage_id: p.text for p in full.passages}
    out: dict[str, list[dict]] = {}
    for split in (CALIBRATION, HELDOUT):
        part = full.split(split)
        cases = [*part.queries, *part.abstain]
        key = fit_grader.contexts_key(full.key, split,
                                      settings=fit_grader.pipeline_settings(cache, fit_grader.FIRST_ITERATION),
                                      config=fit_grader.FIRST_ITERATION, embedder=embedder.model_name,
                                      code=fit_grader.code_fingerprint())
        first = fit_grader.collect_open_corpus(cases, index_path=index_path, embedder=embedder, cache=cache, key=key)
        index = open_index(index_path, embedder.dimension)
        llm = LocalLanguageModel(index, embedder, grade_model=fit_grader.collecting_model())
        rows = []
        for q in cases:
            answerable = q.expected_mode != "abstain"
            contexts = first.get(q.query_id) or []
            if contexts:
                graded = grading_contexts(contexts, limit=settings.grade_contexts, chars=settings.grade_context_chars)
                ev = llm.evidence(q.text, graded)
                if ev is not None:
                    rows.append({"q": q.text, "kind": "open" if answerable else "open-abstain",
                                 "y": answerable and bool(q.relevant & {c.get("document_id") for c in contexts}),
                                 "ctx": [c.text for c in graded], "x": [ev.features[f] for f in FEATURES]})
            graded = own_contexts(q, passage_text, settings)
            ev = llm.evidence(q.text, graded)
            if ev is not None:
                rows.append({"q": q.text, "kind": "own" if answerable else "own-abstain", "y": answerable,
                             "ctx": [c.text for c in graded], "x": [ev.features[f] for f in FEATURES]})
        index.close()
        out[split] = rows
    return out


class TokenEncoder:
    """MiniLM's contextual token vectors (unit length, without [CLS]/[SEP]) and pair encodings."""

    def __init__(self) -> None:
        self.embedder = OnnxMiniLMEmbedder()
        self.embedder._load()  # noqa: SLF001 - a measurement reads the model's hidden states directly
        self.tokenizer = self.embedder._model_tokenizer  # noqa: SLF001

    def _run(self, encodings: list) -> list[tuple[object, np.ndarray]]:
        out = []
        for start in range(0, len(encodings), 16):
            batch = encodings[start:start + 16]
            width = max(len(e.ids) for e in batch)
            ids = np.zeros((len(batch), width), np.int64)
            mask, types = np.zeros_like(ids), np.zeros_like(ids)
            for row, e in enumerate(batch):
                ids[row, :len(e.ids)], mask[row, :len(e.ids)], types[row, :len(e.ids)] = e.ids, 1, e.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self.embedder._input_names:  # noqa: SLF001
                feeds["token_type_ids"] = types
            (hidden,) = self.embedder._session.run(["last_hidden_state"], feeds)  # noqa: SLF001
            out += [(e, hidden[row, :len(e.ids)]) for row, e in enumerate(batch)]
        return out

    def tokens(self, texts: list[str]) -> dict[str, tuple[np.ndarray, list[str]]]:
        out = {}
        for text, (e, hidden) in zip(texts, self._run(self.tokenizer.encode_batch(texts)), strict=True):
            keep = [i for i, t in enumerate(e.tokens) if t not in ("[CLS]", "[SEP]")] or list(range(len(e.ids)))
            unit = hidden / np.linalg.norm(hidden, axis=1, keepdims=True)
            out[text] = (unit[keep], [e.tokens[i] for i in keep])
        return out

    def pairs(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
        out = {}
        for key, (e, hidden) in zip(pairs, self._run(self.tokenizer.encode_batch(pairs)), strict=True):
            types = np.array(e.type_ids)
            inner = np.array([t not in ("[CLS]", "[SEP]") for t in e.tokens])
            question, passage = hidden[(types == 0) & inner].mean(0), hidden[(types == 1) & inner].mean(0)
            out[key] = np.concatenate([question, passage, question * passage, hidden[0]]).astype(np.float32)
        return out


def maxsim(row: dict, tokens: dict) -> list[float]:
    vectors, words = tokens[row["q"]]
    keep = [i for i, w in enumerate(words) if (w.isalnum() and w.lower() not in _STOP) or w.startswith("##")]
    question = vectors[keep or list(range(len(words)))]
    per_context = np.stack([(question @ tokens[c][0].T).max(axis=1) for c in row["ctx"]])
    best = per_context.max(axis=0)
    one = per_context[per_context.mean(axis=1).argmax()]
    return [best.min(), best.mean(), np.sort(best)[:2].mean(), one.min(), one.mean(), (one < 0.7).mean(),
            (best < 0.7).mean()]


def top_contexts(row: dict, tokens: dict, k: int = 3) -> str:
    question = tokens[row["q"]][0].mean(0)
    order = np.argsort([-float(question @ tokens[c][0].mean(0)) for c in row["ctx"]], kind="stable")
    return " ".join(row["ctx"][i] for i in order[:k])


def stale(row: dict, asks_current: int, this_year: int) -> list[float]:
    if row["x"][asks_current] <= 0:
        return [0.0]
    years = [int(y) for text in row["ctx"][:3] for y in _YEAR.findall(text)]
    return [float(min(5, max(0, this_year - max(years) - 2))) if years else 0.0]


def mlp(train_x: np.ndarray, train_y: np.ndarray, hidden: int = 8, l2: float = 1e-2, epochs: int = 3000):
    """One tanh hidden layer, full-batch Adam on the log loss; returns the probability function."""
    rng = np.random.default_rng(0)
    params = [rng.normal(0, 0.3, (train_x.shape[1], hidden)), np.zeros(hidden), rng.normal(0, 0.3, hidden),
              np.zeros(1)]
    first, second = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    for step in range(1, epochs + 1):
        w1, b1, w2, b2 = params
        h = np.tanh(train_x @ w1 + b1)
        g = (1 / (1 + np.exp(-(h @ w2 + b2[0]))) - train_y) / len(train_y)
        gh = np.outer(g, w2) * (1 - h ** 2)
        grads = [train_x.T @ gh + l2 * w1, gh.sum(0), h.T @ g + l2 * w2, np.array([g.sum()])]
        for i, (p, grad) in enumerate(zip(params, grads, strict=True)):
            first[i] = 0.9 * first[i] + 0.1 * grad
            second[i] = 0.999 * second[i] + 0.001 * grad * grad
            p -= 0.01 * (first[i] / (1 - 0.9 ** step)) / (np.sqrt(second[i] / (1 - 0.999 ** step)) + 1e-8)
    w1, b1, w2, b2 = params
    return lambda x: 1 / (1 + np.exp(-(np.tanh(x @ w1 + b1) @ w2 + b2[0])))


def report(name: str, cal: list[dict], held: list[dict], extra, *, l2: float = 10.0, nonlinear: bool = False) -> None:
    def matrix(rows):
        return (np.array([r["x"] + list(extra(r)) for r in rows], float), np.array([r["y"] for r in rows], float),
                np.array([r["kind"] for r in rows]))

    xc, yc, kc = matrix(cal)
    xh, yh, kh = matrix(held)
    if nonlinear:
        mean, scale = xc.mean(0), xc.std(0) + 1e-9
        prob = mlp((xc - mean) / scale, yc)
        pc, ph = prob((xc - mean) / scale), prob((xh - mean) / scale)
    else:
        mean, scale, w, b = fit_logistic(xc, yc.astype(bool), l2=l2)
        pc = 1 / (1 + np.exp(-(b + ((xc - mean) / scale) @ w)))
        ph = 1 / (1 + np.exp(-(b + ((xh - mean) / scale) @ w)))
    threshold = fit_grader.refusing_at_most(pc[kc == "open"], 0.03)  # as the shipped model's is chosen
    open_rows = np.isin(kh, ["open", "open-abstain"])

    def refused(kind: str) -> float:
        return float(np.mean(ph[kh == kind] < threshold))

    print(f"| {name} | {fit_grader.auc(ph[open_rows], yh[open_rows]):.3f} | {fit_grader.auc(ph[~open_rows], yh[~open_rows]):.3f}"
          f" | {refused('open-abstain'):.3f} / {refused('own-abstain'):.3f} | {refused('open'):.3f} / {refused('own'):.3f} |",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=ROOT / ".ragbus-eval")
    parser.add_argument("--pair", action="store_true", help="also the cross-encoding variant (about 5 more minutes)")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = collect(args.cache)
    cal, held = rows[CALIBRATION], rows[HELDOUT]
    print(f"{len(cal)} calibration and {len(held)} held-out examples ({time.perf_counter() - started:.0f}s)\n")
    print("| variant | AUC open | AUC own | must-abstain refused (open / own) | answerable refused (open / own) |")
    print("|---|---:|---:|---:|---:|")
    report("features (the shipped model's)", cal, held, lambda r: [])
    report("features, one hidden layer of 8", cal, held, lambda r: [], nonlinear=True)
    asks_current = FEATURES.index("asks_current")
    year = datetime.now(UTC).year
    report(f"+ stale answer to a 'current' question ({year})", cal, held, lambda r: stale(r, asks_current, year))
    encoder = TokenEncoder()
    texts = sorted({t for r in [*cal, *held] for t in [r["q"], *r["ctx"]]})
    tokens = encoder.tokens(texts)
    report("+ token max-sim (MiniLM token vectors)", cal, held, lambda r: maxsim(r, tokens))
    if args.pair:
        pairs = encoder.pairs(sorted({(r["q"], top_contexts(r, tokens)) for r in [*cal, *held]}))
        report("+ cross-encoding of the top 3 contexts (L2 1000)", cal, held,
               lambda r: pairs[(r["q"], top_contexts(r, tokens))], l2=1000.0)
    print(f"\n{time.perf_counter() - started:.0f}s in all")


if __name__ == "__main__":
    main()
