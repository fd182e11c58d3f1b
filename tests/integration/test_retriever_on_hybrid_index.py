"""The retriever on the real hybrid index and MiniLM embedder: whatever a rewrite adds, the
contexts' first half is the index's plain search of the question (issue 11, item 5)."""

from __future__ import annotations

import math

from shared.adapters.local.embedder import OnnxMiniLMEmbedder
from shared.adapters.local.index import HybridIndex
from tests.unit.loop_fakes import chunk, make_loop

TOPICS = {
    "sourdough": ["A sourdough starter needs flour and water fed every day at room temperature.",
                  "Bakers keep a sourdough starter in the fridge and feed it weekly.",
                  "Rye flour makes a sourdough starter ferment faster than white flour.",
                  "Sourdough bread rises slowly because wild yeast is weaker than baker's yeast."],
    "bicycles": ["Tubeless bicycle tyres seal small punctures with liquid sealant.",
                 "A bicycle chain should be cleaned and oiled every few hundred kilometres.",
                 "Disc brakes on a bicycle stop better in rain than rim brakes.",
                 "Gravel bicycles take wider tyres than road bicycles."],
    "heat pumps": ["An air-source heat pump moves heat from outdoor air into the house.",
                   "Heat pumps lose efficiency when the outdoor temperature falls far below freezing.",
                   "A ground-source heat pump draws heat from pipes buried in the garden.",
                   "Heat pump water heaters use a compressor instead of a resistance element."],
    "bees": ["Honey bees communicate the direction of flowers with a waggle dance.",
             "A bee colony swarms when the hive becomes crowded in spring.",
             "Beekeepers treat hives against varroa mites in late summer.",
             "Bumblebees can fly in colder weather than honey bees."],
}

QUESTIONS = [
    ("How do I feed a sourdough starter?", "rye fridge weekly"),
    ("Why do heat pumps lose efficiency?", "compressor garden pipes"),
    ("How do bees find flowers?", "varroa mites swarm"),
    ("What tyres suit a gravel bicycle?", "sealant punctures chain"),
]


def test_the_contexts_first_half_is_the_plain_search_of_the_question_whatever_the_rewrite_adds(tmp_path):
    embedder = OnnxMiniLMEmbedder()
    index = HybridIndex(tmp_path / "index", embedder.dimension)
    n = 0
    for topic, sentences in TOPICS.items():
        for k, text in enumerate(sentences):
            n += 1
            c = chunk(n, f"{topic} {k}", text + " " + text)  # a body over 100 characters: not header-only
            index.upsert(c.document_id, [c], embedder.embed([c.text]))
    loop = make_loop()
    loop.deps.override("embedder", embedder)
    loop.deps.override("index", index)
    top_k = 6
    reordered = 0
    for q, (question, added) in enumerate(QUESTIONS):
        query_id = f"q{q}"
        loop.submit(question, query_id=query_id, top_k=top_k)
        rewrite = f"{question} {added}"
        loop.deliver(loop.transformed(rewrite, query_id=query_id))
        contexts = [c["chunk_id"] for c in loop.record(query_id)["iterations"][0]["contexts"]]
        vector = embedder.embed([question])[0]
        plain = [h.chunk.chunk_id for h in index.search(question, vector, top_k)]
        by_rewrite = [h.chunk.chunk_id for h in index.search(rewrite, vector, top_k)]
        half = math.ceil(top_k / 2)
        assert contexts[:half] == plain[:half], question
        assert len(contexts) == top_k
        reordered += by_rewrite[:half] != plain[:half]
    assert reordered  # the rewrites' own searches lead differently: the rule is what kept the order
    index.close()
