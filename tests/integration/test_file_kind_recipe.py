"""docs/architecture.md's recipe for a file kind stays true: its two blocks, as written there, make a
throwaway JSON Lines reader (in a temporary package) and its registry row, and a file of that kind
is ingested on the embedded runtime with every chunk knowing its row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_stage_recipe import recipe_blocks, run_recipe

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"

# A fresh interpreter: the row extends the registry, which this process's must not see.
DRIVER = '''
import json, sys, time
from pathlib import Path

blocks = json.loads(Path(sys.argv[1]).read_text())
home, notes = Path(sys.argv[2]), Path(sys.argv[3])

from shared.formats import registry

kind = eval(blocks["kind"].replace("shared.formats.jsonl", "throwaway_formats.jsonl"), vars(registry))
registry.KINDS.append(kind)

from shared.contract import state_collections
from shared.contract.config import Settings
from shared.ingest.files import ingest_path
from shared.runtime import stages
from shared.runtime.bootstrap import build_local
from shared.runtime.local import LocalRuntime
system = build_local(Settings(home=home))
deps = system.deps
consumers = [c for c in stages.CONSUMERS if c.stage in ("cleaner", "indexer")]
with LocalRuntime(deps, system.bus, consumers):
    (message,) = ingest_path(notes, state=deps.state, blobs=deps.blobs, publisher=deps.publisher, clock=deps.clock)
    deadline = time.monotonic() + 120
    while deps.state.get(state_collections.DOCUMENTS, message.document_id) is None:
        letters = deps.state.list(state_collections.DEAD_LETTERS)
        assert not letters and time.monotonic() < deadline, f"the notes were not indexed: {letters}"
        time.sleep(0.1)
record = deps.state.get(state_collections.DOCUMENTS, message.document_id)
chunks = deps.index.get_chunks(record["chunk_ids"])
print(json.dumps({"content_type": message.content_type, "positions": [c.position for c in chunks],
                  "texts": [c.text for c in chunks]}))
'''

FACTS = [
    "The Debian archive keeps packages in three areas: main, contrib and non-free, of which only main is part "
    "of the distribution proper.",
    "Every package must have a priority: required, important, standard or optional; extra is deprecated and "
    "treated as equivalent to optional.",
    "Packages with a priority of optional may conflict with each other, while two packages of standard priority "
    "or higher must not conflict.",
]


def test_the_recipe_s_file_kind_is_ingested_with_its_rows(tmp_path):
    blocks = recipe_blocks(DOC.read_text())
    assert {"reader", "kind"} <= set(blocks), sorted(blocks)
    notes = tmp_path / "notes.jsonl"
    # the Debian Policy Manual's own sentences (section 2.5), one note a line, a blank line between
    notes.write_text("\n".join(json.dumps({"text": fact * 3}) + "\n" for fact in FACTS))
    result = run_recipe(tmp_path, blocks, "throwaway_formats", {"jsonl.py": "reader"}, DRIVER, str(notes),
                        timeout=240)
    assert result["content_type"] == "application/jsonl"
    assert result["positions"] and all(p.startswith("row") for p in result["positions"]), result["positions"]
    # the notes stand on lines 1, 3 and 5 (a blank line between each): the first chunk starts at row 1
    assert result["positions"][0].split(" ", 1)[1].startswith("1"), result["positions"]
    assert any("three areas" in t for t in result["texts"])
