"""One Index contract, run against the local HybridIndex, FirestoreIndex (emulator) and
VertexVectorSearchIndex (an in-memory Vector Search speaking its REST bodies + a state store).

What the indexer and the retriever rely on: search finds the right chunk first
in every mode, an upsert replaces the document's chunks (old ids gone, nothing
twice), deletes remove, counts follow, metadata round-trips, ``k`` holds and
scores come best first. Vectors are small hand-made unit vectors, so the
expected order is known exactly.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from shared.adapters.gcp.firestore_index import FirestoreIndex
from shared.adapters.gcp.vertex_index import VertexVectorSearchIndex
from shared.adapters.local.index import HybridIndex
from shared.adapters.local.state import SqliteStateStore
from shared.contract.errors import RetryableError
from shared.contract.ports import Chunk, Index
from tests.fake_vector_search import FakeMatchingEngine
from tests.fakes import InMemoryStateStore

DIM = 8
# "-batched": the same adapters with commits/requests so small that every document spans
# several, which exercises the non-atomic paths (and the Vertex adapter on SQLite state).
INDEXES = ["local", "firestore", "firestore-batched", "vertex", "vertex-batched"]


@pytest.fixture(params=INDEXES)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Index]:
    if request.param == "local":
        local = HybridIndex(tmp_path / "index", dimension=DIM)
        yield local
        local.close()
    elif request.param.startswith("firestore"):
        client = request.getfixturevalue("firestore_client")
        commit = 3 if request.param.endswith("batched") else 500
        yield FirestoreIndex(
            client, dimension=DIM, namespace=f"t{uuid.uuid4().hex[:8]}", max_commit_writes=commit
        )
    elif request.param == "vertex":
        engine = FakeMatchingEngine(dimension=DIM)
        yield VertexVectorSearchIndex(
            engine, engine.deployed_index_id, InMemoryStateStore(), dimension=DIM
        )
    else:
        engine = FakeMatchingEngine(dimension=DIM)
        state = SqliteStateStore(tmp_path / "state.db")
        yield VertexVectorSearchIndex(
            engine, engine.deployed_index_id, state, dimension=DIM, datapoints_per_request=2
        )
        state.close()


def unit(*weights: tuple[int, float]) -> np.ndarray:
    """A unit vector with the given (axis, weight) components."""
    v = np.zeros(DIM, dtype=np.float32)
    for axis, weight in weights:
        v[axis] = weight
    return v / np.linalg.norm(v)


def chunk(document_id: str, ordinal: int, text: str, **meta: str | None) -> Chunk:
    return Chunk(
        chunk_id=f"{document_id}/v1/{ordinal}",
        document_id=document_id,
        ordinal=ordinal,
        text=text,
        title=meta.get("title") or f"Title of {document_id}",
        url=meta.get("url") or f"https://example.org/{document_id}",
        published=meta.get("published"),
        source=meta.get("source") or "feed:example",
    )


GLACIERS = [
    chunk(
        "doc-glaciers",
        0,
        "Alpine glaciers retreat faster as summer temperatures rise.",
        published="2025-03-01",
    ),
    chunk("doc-glaciers", 1, "Meltwater from glaciers feeds rivers through the dry season."),
]
GLACIER_VECTORS = np.stack([unit((0, 1.0), (1, 0.2)), unit((1, 1.0), (0, 0.2))])

QUANTUM = [
    chunk(
        "doc-quantum",
        0,
        "Quantum error correction protects logical qubits from noise.",
        source="file:q.md",
    ),
    chunk("doc-quantum", 1, "Surface codes need many physical qubits per logical qubit."),
    chunk("doc-quantum", 2, "Cryogenic amplifiers read out superconducting qubits."),
]
QUANTUM_VECTORS = np.stack(
    [unit((2, 1.0), (3, 0.1)), unit((3, 1.0), (2, 0.2)), unit((4, 1.0), (3, 0.3))]
)


def load(index: Index) -> None:
    index.upsert("doc-glaciers", GLACIERS, GLACIER_VECTORS)
    index.upsert("doc-quantum", QUANTUM, QUANTUM_VECTORS)


def ids(hits: list) -> list[str]:
    return [h.chunk.chunk_id for h in hits]


# ------------------------------------------------------------------ tests


def test_the_index_satisfies_the_port(index: Index) -> None:
    assert isinstance(index, Index)


def test_empty_index_answers_nothing(index: Index) -> None:
    assert index.search("glaciers", unit((0, 1.0)), 5) == []
    assert index.count_chunks() == 0
    assert index.count_documents() == 0


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_each_chunk_is_found_first_by_its_own_vector(index: Index, mode: str) -> None:
    load(index)
    for c, v in zip(GLACIERS + QUANTUM, np.vstack([GLACIER_VECTORS, QUANTUM_VECTORS]), strict=True):
        hits = index.search(c.text, v, 3, mode=mode)
        assert hits[0].chunk == c, (mode, c.chunk_id, ids(hits))
        assert hits[0].dense_score == pytest.approx(1.0, abs=1e-4)


def test_a_nearby_query_vector_ranks_by_cosine(index: Index) -> None:
    load(index)
    hits = index.search("", unit((3, 1.0), (2, 0.5)), 5, mode="dense")
    # Closest: quantum/1 (axes 3+2), then quantum/0 (2+3), then quantum/2 (4+3); glaciers share nothing.
    assert ids(hits)[:3] == ["doc-quantum/v1/1", "doc-quantum/v1/0", "doc-quantum/v1/2"]
    assert [h.dense_score for h in hits] == sorted((h.dense_score for h in hits), reverse=True)


def test_bm25_mode_finds_the_words(index: Index) -> None:
    load(index)
    # The vector points at nothing in particular; only the words can decide.
    hits = index.search("surface codes", unit((7, 1.0)), 5, mode="bm25")
    assert ids(hits)[0] == "doc-quantum/v1/1"
    assert all(h.bm25_score and h.bm25_score > 0 for h in hits)
    assert "doc-glaciers/v1/0" not in ids(hits)  # shares no word with the query


def test_hybrid_lets_the_words_break_a_dense_tie(index: Index) -> None:
    twins = [
        chunk("doc-twins", 0, "Firn compaction slowly turns old snow into ice."),
        chunk("doc-twins", 1, "Moraines mark where the ice once stood."),
    ]
    same = unit((5, 1.0), (6, 0.5))
    index.upsert("doc-twins", twins, np.stack([same, same]))
    load(index)
    hits = index.search("firn compaction", same, 2, mode="hybrid")
    assert ids(hits) == ["doc-twins/v1/0", "doc-twins/v1/1"]
    assert hits[0].score > hits[1].score
    assert hits[0].dense_score == pytest.approx(hits[1].dense_score, abs=1e-5)


@pytest.mark.parametrize("mode", ["dense", "hybrid", "bm25"])
def test_k_is_respected_and_scores_descend(index: Index, mode: str) -> None:
    load(index)
    for k in (1, 2, 4):
        hits = index.search("qubits glaciers", unit((2, 1.0), (0, 1.0)), k, mode=mode)
        assert 0 < len(hits) <= k
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert len(set(ids(hits))) == len(hits)
    assert index.search("qubits", unit((2, 1.0)), 0, mode=mode) == []
    assert len(index.search("qubits glaciers", unit((2, 1.0)), 50, mode="dense")) == 5


def test_counts_follow_upserts_and_deletes(index: Index) -> None:
    load(index)
    assert (index.count_chunks(), index.count_documents()) == (5, 2)
    assert index.delete_document("doc-glaciers") == 2
    assert (index.count_chunks(), index.count_documents()) == (3, 1)


def test_upsert_again_replaces_the_document(index: Index) -> None:
    load(index)
    revised = [
        Chunk(
            chunk_id="doc-quantum/v2/0",
            document_id="doc-quantum",
            ordinal=0,
            text="Revised: topological qubits promise lower error rates.",
            title="Quantum, revised",
        ),
        Chunk(
            chunk_id="doc-quantum/v2/1",
            document_id="doc-quantum",
            ordinal=1,
            text="Revised: braiding anyons implements logical gates.",
            title="Quantum, revised",
        ),
    ]
    index.upsert("doc-quantum", revised, np.stack([unit((2, 1.0)), unit((3, 1.0))]))

    assert (index.count_chunks(), index.count_documents()) == (4, 2)
    assert index.get_chunks([c.chunk_id for c in QUANTUM]) == []
    assert index.get_chunks(["doc-quantum/v2/0", "doc-quantum/v2/1"]) == revised
    for mode in ("dense", "hybrid", "bm25"):
        hits = index.search("qubits logical gates", unit((2, 1.0), (3, 1.0)), 10, mode=mode)
        found = ids(hits)
        assert not any("/v1/" in i and i.startswith("doc-quantum") for i in found), (mode, found)
        assert len(found) == len(set(found))
    assert ids(index.search("", unit((2, 1.0)), 1, mode="dense")) == ["doc-quantum/v2/0"]


def test_upserting_the_same_content_twice_changes_nothing(index: Index) -> None:
    load(index)
    index.upsert("doc-quantum", QUANTUM, QUANTUM_VECTORS)
    assert (index.count_chunks(), index.count_documents()) == (5, 2)
    hits = index.search("qubits", unit((2, 1.0)), 10, mode="dense")
    assert len(ids(hits)) == len(set(ids(hits))) == 5


def test_upsert_with_no_chunks_empties_the_document(index: Index) -> None:
    load(index)
    index.upsert("doc-glaciers", [], np.zeros((0, DIM), dtype=np.float32))
    assert (index.count_chunks(), index.count_documents()) == (3, 1)
    assert index.get_chunks([c.chunk_id for c in GLACIERS]) == []


def test_delete_document_removes_it_and_is_harmless_twice(index: Index) -> None:
    load(index)
    assert index.delete_document("doc-quantum") == 3
    assert index.delete_document("doc-quantum") == 0
    assert index.delete_document("doc-never-indexed") == 0
    assert index.get_chunks([c.chunk_id for c in QUANTUM]) == []
    hits = index.search("qubits", unit((2, 1.0)), 10, mode="hybrid")
    assert {h.chunk.document_id for h in hits} == {"doc-glaciers"}
    assert (index.count_chunks(), index.count_documents()) == (2, 1)


def test_get_chunks_round_trips_metadata_in_the_order_asked(index: Index) -> None:
    load(index)
    asked = ["doc-quantum/v1/2", "unknown/chunk", "doc-glaciers/v1/0", "doc-quantum/v1/0"]
    got = index.get_chunks(asked)
    assert got == [QUANTUM[2], GLACIERS[0], QUANTUM[0]]
    assert got[1].published == "2025-03-01" and got[0].published is None
    assert got[2].source == "file:q.md" and got[2].url == "https://example.org/doc-quantum"
    assert index.get_chunks([]) == []


def test_search_returns_whole_chunks(index: Index) -> None:
    load(index)
    (hit,) = index.search("meltwater rivers", GLACIER_VECTORS[1], 1)
    assert hit.chunk == GLACIERS[1]
    assert hit.bm25_score is not None and hit.bm25_score > 0


def test_bad_input_is_refused(index: Index) -> None:
    with pytest.raises(ValueError, match="shape"):
        index.upsert("doc-glaciers", GLACIERS, GLACIER_VECTORS[:1])
    with pytest.raises(ValueError, match="other documents"):
        index.upsert("doc-other", GLACIERS, GLACIER_VECTORS)
    with pytest.raises(ValueError, match="mode"):
        index.search("x", unit((0, 1.0)), 3, mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected"):
        index.search("x", np.ones(DIM + 1, dtype=np.float32), 3)
    assert index.count_chunks() == 0


# ------------------------------------------------- Firestore specifics


def test_concurrent_upserts_of_one_document_leave_exactly_one_version(
    firestore_client: object,
) -> None:
    """The transaction reads the document's chunks, so racing writers serialise, not interleave.

    A writer that loses every attempt gets a RetryableError (its message is redelivered).
    """
    import threading

    index = FirestoreIndex(firestore_client, dimension=DIM, namespace=f"t{uuid.uuid4().hex[:8]}")  # type: ignore[arg-type]
    versions = {
        f"v{n}": [
            Chunk(
                chunk_id=f"doc-race/v{n}/{i}",
                document_id="doc-race",
                ordinal=i,
                text=f"version {n} part {i}",
            )
            for i in range(3)
        ]
        for n in range(2)
    }
    errors: list[BaseException] = []

    def write(version: str) -> None:
        try:
            index.upsert(
                "doc-race", versions[version], np.stack([unit((i, 1.0)) for i in range(3)])
            )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(v,)) for v in versions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(e, RetryableError) for e in errors), errors
    assert len(errors) < len(versions)
    hits = index.search("", unit((0, 1.0)), 20, mode="dense")
    found_versions = {h.chunk.chunk_id.split("/")[1] for h in hits}
    assert len(found_versions) == 1 and len(hits) == 3
    (winner,) = found_versions
    assert index.document_chunk_ids("doc-race") == [c.chunk_id for c in versions[winner]]
    assert (index.count_chunks(), index.count_documents()) == (3, 1)
