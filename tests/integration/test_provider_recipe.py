"""docs/architecture.md's recipe for a model provider stays true: its three blocks, as written there,
make a throwaway Anthropic-style provider (an adapter in a temporary package, its registry row, its
settings) that a query runs through on the embedded runtime, against a Messages API on 127.0.0.1;
and the deploy (infra/registry.tf, terraform.tfvars.example) and ``load_settings``' checks follow."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.integration.test_stage_recipe import run_recipe

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"

# Run in a fresh interpreter: the blocks extend the provider registry and the settings, which this
# process's registry and settings must not see.
DRIVER = '''
import dataclasses, json, re, sys, textwrap, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

blocks = json.loads(Path(sys.argv[1]).read_text())
home = Path(sys.argv[2])
KEY = "sk-recipe-0123456789abcdef"

from shared.contract import config, providers
from shared.contract.errors import ConfigError
from tests.support import send_json

namespace = dict(vars(config))
exec("@dataclass(frozen=True)\\nclass RecipeSettings(Settings):\\n" + textwrap.indent(blocks["settings"], "    "),
     namespace)
RecipeSettings = namespace["RecipeSettings"]
for f in dataclasses.fields(RecipeSettings):
    if "setting" in f.metadata and f.name not in config.SETTING_BY_FIELD:
        config.SETTING_BY_FIELD[f.name] = dataclasses.replace(f.metadata["setting"], field=f.name)

row = eval(blocks["row"].replace("shared.adapters.anthropic:", "throwaway_anthropic.adapter:"), vars(providers))
providers.PROVIDERS = (*providers.PROVIDERS, row)
providers.PROVIDER_BY_NAME[row.name] = row

requests = []


def answer(prompt):
    if prompt.startswith("Rewrite the user's question"):
        return {"rewritten": "BM25 ranking term frequency saturation", "sub_queries": [], "reasoning": "expanded"}
    if prompt.startswith("Grade how well"):
        return {"score": 0.9, "relevance": 0.9, "completeness": 0.85, "grounded": True, "answerable": True,
                "reasoning": "a context defines it"}
    if prompt.startswith("Answer the question"):
        first = int(re.search(r'<context id="(\\d+)"', prompt).group(1))
        return {"abstained": False, "sentences": [
            {"text": "BM25 ranks documents by term frequency with saturation.", "citations": [first]}]}
    return None


class Messages(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        requests.append((self.path, self.headers.get("x-api-key"), body))
        reply = answer(body["messages"][-1]["content"]) if self.path == "/v1/messages" else None
        if self.headers.get("x-api-key") != KEY:
            send_json(self, 401, {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}})
        elif reply is None:
            send_json(self, 400, {"type": "error", "error": {"type": "invalid_request_error", "message": "what?"}})
        else:
            send_json(self, 200, {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                                  "content": [{"type": "text", "text": json.dumps(reply)}],
                                  "stop_reason": "end_turn", "usage": {"input_tokens": 50, "output_tokens": 20}})


server = ThreadingHTTPServer(("127.0.0.1", 0), Messages)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}/v1"

# load_settings' checks, derived from the row: what it requires is named when missing
refused = []
for values in ({"anthropic_base_url": base, "anthropic_model": None, "anthropic_api_key": None},
               {"anthropic_base_url": "ftp://example.com", "anthropic_model": "m", "anthropic_api_key": KEY},
               {"anthropic_base_url": "http://api.example.com/v1", "anthropic_model": "m", "anthropic_api_key": KEY}):
    try:
        config.require_provider(row, values)
    except ConfigError as exc:
        refused.append(str(exc))

from shared.query.api import submit_query, wait_for_query
from shared.runtime.bootstrap import build_local
from shared.runtime.local import LocalRuntime
from shared.runtime.stages import CONSUMERS, QUERY_STAGES
from shared.tools import infra_registry
from tests.unit.loop_fakes import CORPUS, HashingEmbedder, MemoryIndex

settings = RecipeSettings(home=home, llm_provider="anthropic", anthropic_base_url=base,
                          anthropic_model="claude-recipe", anthropic_api_key=KEY)
embedder = HashingEmbedder()
system = build_local(settings, embedder=embedder, index=MemoryIndex(embedder, CORPUS))
with LocalRuntime(system.deps, system.bus, [c for c in CONSUMERS if c.stage in QUERY_STAGES]):
    submitted = submit_query(system.deps, "how does BM25 rank documents")
    record = wait_for_query(system.deps, submitted.id, 60.0)
server.shutdown()
print(json.dumps({"record": record.to_doc(), "requests": requests, "refused": refused,
                  "registry_tf": infra_registry.render(), "tfvars": infra_registry.render_tfvars()}))
'''


def provider_blocks(text: str) -> dict[str, str]:
    """Each ``<!-- provider recipe: name -->`` marker's following Python block, dedented."""
    found = re.findall(r"<!-- provider recipe: (\w+) -->\s*```python\n(.*?)```", text, re.DOTALL)
    return {name: textwrap.dedent(body) for name, body in found}


def test_the_recipe_s_provider_answers_a_query_and_deploys(tmp_path):
    blocks = provider_blocks(DOC.read_text())
    assert set(blocks) == {"adapter", "row", "settings"}, sorted(blocks)
    out = run_recipe(tmp_path, blocks, "throwaway_anthropic", {"adapter.py": "adapter"}, DRIVER)
    record = out["record"]
    assert record["status"] == "answered", record.get("error")
    assert "BM25 ranks documents by term frequency" in record["answer"]
    assert record["answer_provider"] == "anthropic" and not record.get("fallbacks"), (record.get("fallbacks"), record["events"])
    calls = out["requests"]
    assert len(calls) >= 3 and {path for path, _, _ in calls} == {"/v1/messages"}
    assert all(key == "sk-recipe-0123456789abcdef" and body["model"] == "claude-recipe" for _, key, body in calls)
    # load_settings' checks, from the row: the required settings named, a bad base, a key in clear text
    missing, not_http, clear = out["refused"]
    assert "RAGBUS_ANTHROPIC_MODEL" in missing and "RAGBUS_ANTHROPIC_API_KEY" in missing
    assert "RAGBUS_ANTHROPIC_BASE_URL" in not_http and "not an http(s) URL" in not_http
    assert "RAGBUS_ANTHROPIC_API_KEY would be sent in clear text" in clear
    # the deploy, from the same row: variables, secret, plan-time checks, the example's lines
    registry = out["registry_tf"]
    for declared in ("anthropic_model", "anthropic_api_key_secret", "anthropic_timeout_s"):
        assert f'variable "{declared}"' in registry
    assert "RAGBUS_ANTHROPIC_API_KEY = var.anthropic_api_key_secret" in registry
    assert 'var.anthropic_model != "" && var.anthropic_api_key_secret != ""' in registry
    assert "budget_s  = 1 * var.anthropic_timeout_s + 20" in registry
    assert '"anthropic"]' in registry.split('variable "llm_provider"')[1]
    assert '# anthropic_model          = "claude-sonnet-4-5"' in out["tfvars"]
