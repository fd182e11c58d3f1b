"""How much element coverage extraction can reach on fitz-gov at best.

fitz-gov's relevance cases list required elements an answer should contain. Many are
words a writer adds ("not specified", "not mentioned", "different firm", "depends"),
not words of the case's own passages. This scores, with the eval's own
``element_coverage``, the whole text of each case's own passages as if it were the
answer: no extractive answer quoting those passages can cover more.

    .venv/bin/python bench/element_ceiling.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.tools.eval.dataset import build_fitz_gov  # noqa: E402
from shared.tools.eval.metrics import element_coverage, element_found  # noqa: E402


def main() -> None:
    full = build_fitz_gov()
    text = {p.passage_id: p.text for p in full.passages}
    cases = [q for q in full.queries if q.required_elements]
    own = [" ".join(text[p] for p in sorted(q.relevant)) for q in cases]
    coverage = [element_coverage(q.required_elements, t) for q, t in zip(cases, own, strict=True)]
    passes = [sum(element_found(e, t) for e in q.required_elements) >= q.min_required
              for q, t in zip(cases, own, strict=True)]
    writer = sum(1 for q in cases if any(e.lower().startswith("not ") for e in q.required_elements))
    print(f"fitz-gov {full.version}: {len(cases)} answerable cases with required elements; "
          f"{writer} list a 'not ...' element")
    print(f"element coverage of the whole text of each case's own passages: {np.mean(coverage):.3f}; "
          f"fitz-gov's pass rule met by {np.mean(passes):.1%}")


if __name__ == "__main__":
    main()
