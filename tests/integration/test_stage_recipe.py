"""docs/architecture.md's recipe for a query stage stays true: its blocks, as written there, make a
throwaway reranker (in a temporary package) that a query runs through on the embedded runtime."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"

# Run in a fresh interpreter: the blocks extend the registry (and so the message table: the new
# stage's hop), which the handlers read at import, and this process's registry must stay as it is.
DRIVER = '''
import json, sys
from dataclasses import replace
from pathlib import Path

blocks = json.loads(Path(sys.argv[1]).read_text())
home = sys.argv[2]

from shared.runtime import stages

stage = eval(blocks["stage"].replace("services.reranker.", "throwaway_reranker."), vars(stages))
(grader,) = [s for s in stages.DECLARED if s.name == "grader"]
assert stage.after == "retriever", "the recipe's stage follows the retriever"
stage = replace(stage, after=grader.after)  # the retriever, or a stage since put before the grader
declared = []
for s in stages.DECLARED:
    declared += [stage, replace(s, after=stage.name)] if s.name == "grader" else [s]
stages.STAGES = stages.linked(tuple(declared))
stages.STAGE_BY_NAME = {s.name: s for s in stages.STAGES}
stages.CONSUMERS = tuple(c for s in stages.STAGES for c in s.consumers)
stages.QUERY_STAGES = tuple(s.name for s in stages.STAGES if s.group == "query")

from shared.contract.config import Settings
from shared.query.api import submit_query, wait_for_query
from shared.runtime.bootstrap import build_local
from shared.runtime.local import LocalRuntime
from tests.unit.loop_fakes import CORPUS, HashingEmbedder, MemoryIndex, ScriptedLLM

embedder = HashingEmbedder()
system = build_local(Settings(home=Path(home)), embedder=embedder, index=MemoryIndex(embedder, CORPUS),
                     llm=ScriptedLLM())
query_consumers = [c for c in stages.CONSUMERS if c.stage in stages.QUERY_STAGES]
with LocalRuntime(system.deps, system.bus, query_consumers):
    submitted = submit_query(system.deps, "how does BM25 rank documents")
    record = wait_for_query(system.deps, submitted.id, 60.0)
print(json.dumps({**record.to_doc(), "query_stages": stages.QUERY_STAGES}))
'''


def recipe_blocks(text: str) -> dict[str, str]:
    """Each ``<!-- recipe: name -->`` marker's following Python block, dedented."""
    found = re.findall(r"<!-- recipe: (\w+) -->\s*```python\n(.*?)```", text, re.DOTALL)
    return {name: textwrap.dedent(body) for name, body in found}


def run_recipe(tmp_path: Path, blocks: dict[str, str], package: str, modules: dict[str, str], driver: str,
               *args: str, timeout: float = 180) -> dict:
    """Write ``modules`` (file name -> the block that is its text) as the throwaway ``package``, run
    ``driver`` in a fresh interpreter with the blocks, ``home`` and ``args``; its last line as JSON."""
    folder = tmp_path / "pkg" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for name, block in modules.items():
        (folder / name).write_text(blocks[block])
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "driver.py").write_text(driver)
    home = tmp_path / "home"
    env = {**os.environ, "RAGBUS_HOME": str(home),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path / "pkg")])}
    env.pop("RAGBUS_RUNTIME", None)
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "blocks.json"), str(home),
                           *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_recipe_s_stage_runs_between_the_retriever_and_the_grader(tmp_path):
    blocks = recipe_blocks(DOC.read_text())
    assert {"handler", "stage"} <= set(blocks) and "message" not in blocks, sorted(blocks)
    record = run_recipe(tmp_path, blocks, "throwaway_reranker", {"handler.py": "handler"}, DRIVER)
    assert record["status"] == "answered" and record["answer"], record.get("error")
    stages_done = record["stages_done"]
    order = record["query_stages"]  # the registry's, the reranker just before the grader
    assert order[order.index("reranker") + 1] == "grader"
    assert stages_done[:len(order)] == [f"0/{s}" for s in order]
    reranked = [e for e in record["events"] if e["stage"] == "reranker"]
    assert [e["type"] for e in reranked] == ["reranked"]
    assert "reranker" in record["iterations"][0]["timings"]
