"""The evaluation set built from fitz-gov's core tier (synthetic RAG cases, MIT licence).

fitz-gov (4.1.0, installed by the dev extra) ships 2,920 core cases, each a query with
one to five contexts and an expected behaviour (answer, abstain, dispute). The set is
built exactly as the measurement issue specifies:

- every unique context of a core case is one passage (5,899), numbered in order of
  first appearance (``fg00000`` ...), so ids are stable for a given dataset version;
- every non-abstain case is a query (2,235), and the passages of its own contexts are
  its relevant passages;
- abstain cases (685) are kept apart: their contexts are in the corpus as decoys, but
  nothing in it answers them, which is what abstention accuracy asks about.

The cases were written by a language model to exercise governance behaviour, so
queries and passages are short and topically tidy: the set is synthetic and its
figures say how ragbus ranks such passages, not how it does on a real corpus.

Every case (answerable and abstain alike) belongs to one of two halves, decided by its
id alone (:func:`split_of`): the **calibration** split, on which the grader's thresholds
may be fit, and the **held-out** split, on which ``ragbus eval`` reports the pipeline's
figures by default. The rule depends on nothing but the id, so it is the same for any
slice or sample of the set and for every run; fitz-gov 4.1.0 falls 1,136 / 1,099
answerable and 340 / 345 abstain cases (calibration / held-out). The corpus is the same
for both: only the questions are split.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import metadata

from shared.contract.errors import ConfigError

DATASET_NAME = "fitz-gov"
TIER = "tier1_core"

CALIBRATION = "calibration"
HELDOUT = "heldout"
SPLITS = (CALIBRATION, HELDOUT)
SPLIT_RULE = "sha256('fitz-gov:' + case id): first byte even -> calibration, odd -> heldout"


def split_of(query_id: str) -> str:
    """The split a case belongs to, from its id alone (see :data:`SPLIT_RULE`)."""
    first_byte = hashlib.sha256(f"{DATASET_NAME}:{query_id}".encode()).digest()[0]
    return CALIBRATION if first_byte % 2 == 0 else HELDOUT


@dataclass(frozen=True)
class Passage:
    """One unique context of the dataset, indexed as one chunk (document id = passage id)."""

    passage_id: str
    text: str


@dataclass(frozen=True)
class EvalQuery:
    """One case's query; ``relevant`` are the ids of its own contexts (empty when it must abstain)."""

    query_id: str
    text: str
    relevant: frozenset[str]
    expected_mode: str  # trustworthy | disputed | abstain
    category: str
    contexts: frozenset[str] = frozenset()  # the ids of the case's own contexts (decoys when abstaining)
    required_elements: tuple[str, ...] = ()
    min_required: int = 1
    subcategory: str = ""  # fitz-gov's kind of case, e.g. wrong_entity or temporal_mismatch for an abstain case


@dataclass(frozen=True)
class EvalSet:
    """Passages, answerable queries and abstain queries of one dataset version."""

    version: str
    passages: list[Passage]
    queries: list[EvalQuery]
    abstain: list[EvalQuery] = field(default_factory=list)
    split_name: str = "all"  # which cases' questions are kept: all, calibration or heldout

    @property
    def key(self) -> str:
        """Identifies the passages' texts: the cache key of their embeddings."""
        digest = hashlib.sha256()
        for passage in self.passages:
            digest.update(passage.passage_id.encode())
            digest.update(b"\0")
            digest.update(passage.text.encode())
            digest.update(b"\0")
        return f"{DATASET_NAME}-{self.version}-{len(self.passages)}-{digest.hexdigest()[:12]}"

    def slice(self, queries: int) -> EvalSet:
        """The first ``queries`` answerable queries and the first ``queries // 2`` abstain
        queries, over a corpus of exactly their contexts (the abstain cases' decoys compete).

        Deterministic: the smoke test pins the figures of a fixed slice.
        """
        kept = self.queries[:queries]
        decoys = self.abstain[: queries // 2]
        ids = set().union(*(q.contexts for q in (*kept, *decoys)))
        return EvalSet(
            version=f"{self.version}[:{queries}]",
            passages=[p for p in self.passages if p.passage_id in ids],
            queries=kept,
            abstain=decoys,
            split_name=self.split_name,
        )

    def split(self, name: str) -> EvalSet:
        """The cases of one split (``calibration`` or ``heldout``; ``all``: this set) over the same corpus.

        The passages stay as they are (the other split's contexts still compete in the
        index), so the version and :attr:`key` do not change and cached embeddings serve both.
        """
        if name == "all":
            return self
        if name not in SPLITS:
            raise ConfigError(f"unknown split {name!r}: choose one of all, {', '.join(SPLITS)}")
        return EvalSet(
            version=self.version,
            passages=self.passages,
            queries=[q for q in self.queries if split_of(q.query_id) == name],
            abstain=[q for q in self.abstain if split_of(q.query_id) == name],
            split_name=name,
        )


def _load_core_cases():
    try:
        from fitz_gov.loader import Tier, load_tier
    except ImportError as exc:
        raise ConfigError(
            "the evaluation set comes from the PyPI package fitz-gov, which the dev extra installs: "
            "`.venv/bin/pip install -e '.[dev]'` (`make test` does it too)"
        ) from exc
    return load_tier(Tier.CORE)


def fitz_gov_version() -> str:
    try:
        return metadata.version("fitz-gov")
    except metadata.PackageNotFoundError as exc:
        raise ConfigError("fitz-gov is not installed; the dev extra installs it: `.venv/bin/pip install -e '.[dev]'`") from exc


def build_fitz_gov() -> EvalSet:
    """The evaluation set from the installed fitz-gov core tier (see the module docstring)."""
    cases = _load_core_cases()
    if not cases:
        raise ConfigError("fitz-gov's core tier loaded no cases; reinstall fitz-gov==4.1.0")
    ids: dict[str, str] = {}
    for case in cases:
        for context in case.contexts:
            if context not in ids:
                ids[context] = f"fg{len(ids):05d}"
    passages = [Passage(pid, text) for text, pid in ids.items()]
    queries: list[EvalQuery] = []
    abstain: list[EvalQuery] = []
    for case in cases:
        mode = case.expected_mode.value
        own = frozenset(ids[c] for c in case.contexts)
        config = case.evaluation_config or {}
        query = EvalQuery(
            query_id=case.id,
            text=case.query,
            relevant=frozenset() if mode == "abstain" else own,
            expected_mode=mode,
            category=case.category.value,
            contexts=own,
            required_elements=tuple(case.required_elements or ()),
            min_required=int(config.get("min_required", 1) or 1),
            subcategory=str(case.subcategory or ""),
        )
        if mode == "abstain":
            abstain.append(query)
        else:
            queries.append(query)
    return EvalSet(version=fitz_gov_version(), passages=passages, queries=queries, abstain=abstain)


def calibration_cases(evalset: EvalSet | None = None) -> EvalSet:
    """The calibration split (of ``evalset``, else of the installed fitz-gov): fit thresholds on these only."""
    return (evalset or build_fitz_gov()).split(CALIBRATION)


def heldout_cases(evalset: EvalSet | None = None) -> EvalSet:
    """The held-out split: the cases the evaluation's figures are reported on."""
    return (evalset or build_fitz_gov()).split(HELDOUT)
