"""One table of settings: it builds the loader and docs/configuration.md's table.

A setting is one declaration in shared/contract/config.py (variable, default, kind,
description) and its consumer; ``python -m shared.tools.docs`` regenerates docs/configuration.md.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from shared.contract.config import (
    DEFAULTS,
    OTHER_VARIABLES,
    SETTINGS,
    Choice,
    Settings,
    Whole,
    is_set,
    load_settings,
    setting,
    settings_table,
)
from shared.contract.errors import ConfigError
from shared.contract.providers import PROVIDER_NAMES
from shared.tools import docs

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_hold_the_generated_tables():
    assert docs.stale() == [], "a generated part of docs/ or infra/ is stale: run python -m shared.tools.docs"


def test_a_stale_settings_table_is_caught_and_the_command_rewrites_it(tmp_path):
    for part in docs.PARTS:
        (tmp_path / part.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part.path, tmp_path / part.path)
    page = tmp_path / "docs" / "configuration.md"
    page.write_text(page.read_text().replace("| `RAGBUS_TOP_K` | integer ≥ 1 | `10` |", "| `RAGBUS_TOP_K` | integer ≥ 1 | `12` |"))
    assert docs.stale(tmp_path) == ["docs/configuration.md (settings-table)"]
    for part in docs.PARTS:
        part.write(tmp_path)
    assert docs.stale(tmp_path) == []
    assert page.read_text() == (ROOT / "docs" / "configuration.md").read_text()


def test_the_check_command_names_a_stale_part_and_fails(tmp_path, capsys):
    done = subprocess.run([sys.executable, "-m", "shared.tools.docs", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr  # the repository as committed
    for part in docs.PARTS:
        (tmp_path / part.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / part.path, tmp_path / part.path)
    (tmp_path / "infra" / "registry.tf").write_text("# edited by hand\n")
    assert docs.main(["--check"], root=tmp_path) == 1
    assert "stale: infra/registry.tf (whole file)" in capsys.readouterr().out
    assert docs.main([], root=tmp_path) == 0 and docs.main(["--check"], root=tmp_path) == 0


def test_every_variable_read_is_in_the_table_once():
    names = [s.env for s in (*SETTINGS, *OTHER_VARIABLES)]
    assert len(names) == len(set(names))
    for name in ("RAGBUS_FIRESTORE_DATABASE", "RAGBUS_GATEWAY_HOST", "RAGBUS_EMBED_MODEL", "RAGBUS_MIN_SCORE"):
        assert f"| `{name}` |" in settings_table()
    # every RAGBUS_* name the code writes anywhere is a documented variable
    written = set()
    for path in [*ROOT.glob("shared/**/*.py"), *ROOT.glob("services/**/*.py"), ROOT / "main.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                written |= set(re.findall(r"\bRAGBUS_[A-Z0-9_]*[A-Z0-9]\b", node.value))
    prefixes = {n for n in written if n.endswith("_") or any(o.startswith(n + "_") for o in names)}
    undocumented = written - set(names) - prefixes
    assert not undocumented, f"read or named but not in the table: {sorted(undocumented)}"


def test_an_empty_environment_gives_the_declared_defaults():
    assert load_settings({}) == Settings() == DEFAULTS
    assert load_settings({}).thresholds.completeness == 0.55


OPENAI = {"RAGBUS_LLM": "openai", "RAGBUS_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "RAGBUS_OPENAI_MODEL": "m"}


@pytest.mark.parametrize(("env", "message"), [
    ({"RAGBUS_TRACING": "maybe"}, "RAGBUS_TRACING='maybe' is not a boolean; use 1/0, true/false, yes/no"),
    ({"RAGBUS_TOP_K": "ten"}, "RAGBUS_TOP_K='ten' is not an integer"),
    ({"RAGBUS_TOP_K": "0"}, "RAGBUS_TOP_K=0 must be >= 1"),
    ({"RAGBUS_FETCH_HOST_RATE": "fast"}, "RAGBUS_FETCH_HOST_RATE='fast' is not a number"),
    ({"RAGBUS_QUERY_TIMEOUT_S": "0"}, "RAGBUS_QUERY_TIMEOUT_S=0.0 must be a positive number of seconds"),
    ({"RAGBUS_RETRY_MIN_BACKOFF_S": "-1"}, "RAGBUS_RETRY_MIN_BACKOFF_S=-1.0 must be a number of seconds, 0 or more"),
    ({"RAGBUS_RETRY_MIN_BACKOFF_S": "9", "RAGBUS_RETRY_MAX_BACKOFF_S": "2"},
     "RAGBUS_RETRY_MIN_BACKOFF_S=9.0 is above RAGBUS_RETRY_MAX_BACKOFF_S=2.0"),
    ({"RAGBUS_MIN_SCORE": "2"}, "RAGBUS_MIN_SCORE=2.0 must be between 0 and 1"),
    ({"RAGBUS_RUNTIME": "cloud"}, "RAGBUS_RUNTIME='cloud': use 'local' (default) or 'gcp'"),
    ({"RAGBUS_LLM": "claude"}, "RAGBUS_LLM='claude': use 'local' (default), " + ", ".join(
        f"'{n}'" for n in sorted(PROVIDER_NAMES)[:-1] if n != "local") + f" or '{sorted(PROVIDER_NAMES)[-1]}'"),
    ({"RAGBUS_REMOVED_ITEMS": "x"}, "RAGBUS_REMOVED_ITEMS='x': use 'remove' (default) or 'keep'"),
    ({"RAGBUS_EMBEDDER": "x"}, "RAGBUS_EMBEDDER='x': use 'local' (default, packaged MiniLM) or 'genai'"),
    ({"RAGBUS_INDEX": "x"}, "RAGBUS_INDEX='x': use 'firestore' (default) or 'vertex'"),
    ({"RAGBUS_EMBED_DIMENSION": "wide"}, "RAGBUS_EMBED_DIMENSION='wide' is not a whole number"),
    ({"RAGBUS_EMBED_TIMEOUT_S": "0"}, "RAGBUS_EMBED_TIMEOUT_S='0' must be a positive number of seconds"),
    ({"RAGBUS_GEMINI_LOCATION": "moon"}, "RAGBUS_GEMINI_LOCATION='moon' is not a Vertex AI location"),
    ({"RAGBUS_API_TOKEN": "a b"}, "RAGBUS_API_TOKEN holds a space"),
    # a model key is sent in a header too: a pasted line break failed every call as "could not reach the server"
    ({**OPENAI, "RAGBUS_OPENAI_API_KEY": "sk-abc123\ndef456"}, "RAGBUS_OPENAI_API_KEY holds a line break, which no "
                                                              "Authorization header can carry"),
    ({**OPENAI, "RAGBUS_OPENAI_BASE_URL": "https://api.openai.com/v1", "OPENAI_API_KEY": "sk-abc 123def456"},
     "OPENAI_API_KEY holds a space"),
    ({"RAGBUS_LLM": "gemini", "GEMINI_API_KEY": "AIzaSyA1b2C3\n123d4E5f6G7h8I9j0KLmnOp"}, "GEMINI_API_KEY holds a line break"),
])
def test_each_kind_keeps_its_error_text(env, message):
    with pytest.raises(ConfigError) as raised:
        load_settings(env)
    assert str(raised.value).startswith(message)
    assert "123" not in str(raised.value)  # no part of a secret is shown


@pytest.mark.parametrize("target, says", [("file", "is a file, not a folder"), ("dangling", "links to nothing")])
def test_a_data_directory_that_can_hold_nothing_is_an_error_naming_the_variable(tmp_path, target, says):
    """RAGBUS_HOME=/etc/passwd ended every command with "error: FileExistsError: [Errno 17] File exists:
    '/etc/passwd'", which names neither the setting nor the fix."""
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match=f"RAGBUS_HOME='{tmp_path / target}' {says}; name a folder"):
        load_settings({"RAGBUS_HOME": str(tmp_path / target)})


def test_a_data_directory_that_cannot_be_made_is_an_error_naming_the_variable(tmp_path):
    from shared.runtime.bootstrap import build_local

    (tmp_path / "file").write_text("not a folder")
    under_a_file = tmp_path / "file" / "home"
    with pytest.raises(ConfigError, match=f"RAGBUS_HOME='{under_a_file}' cannot be made a folder \\(Not a directory\\)"):
        build_local(load_settings({"RAGBUS_HOME": str(under_a_file)}))


def test_a_new_setting_is_one_declaration():
    """The recipe: a field declared with setting() is read, validated and documented."""

    @dataclass(frozen=True)
    class Extended(Settings):
        rerank_depth: int = setting("RAGBUS_RERANK_DEPTH", 20, Whole(1), "contexts the reranker reorders")
        rerank_mode: str = setting("RAGBUS_RERANK_MODE", "fast", Choice(("fast", "exact")), "how it reranks")
        unrelated: list = field(default_factory=list)

    from shared.contract import config

    rows = config._rows(Extended)  # noqa: SLF001 - the table builder on a throwaway class
    assert [r.env for r in rows][-2:] == ["RAGBUS_RERANK_DEPTH", "RAGBUS_RERANK_MODE"]
    values = config._read(Extended, {"RAGBUS_RERANK_DEPTH": "7"}, {})  # noqa: SLF001
    assert (values["rerank_depth"], values["rerank_mode"]) == (7, "fast")
    with pytest.raises(ConfigError, match="RAGBUS_RERANK_MODE='slow': use 'fast' \\(default\\) or 'exact'"):
        config._read(Extended, {"RAGBUS_RERANK_MODE": "slow"}, {})  # noqa: SLF001


def test_the_cli_reads_its_data_directory_and_runtime_choice_through_the_settings(tmp_path):
    """A topology recorded under RAGBUS_HOME (~ expanded) whose processes died stops a command,
    unless RAGBUS_RUNTIME names a runtime, even the default local one."""
    import json

    from typer.testing import CliRunner

    from shared.tools.cli import app

    home = tmp_path / "home"
    home.mkdir()
    (home / "topology.json").write_text(json.dumps({"processes": [{"name": "grader", "pid": 2**22 + 12345}],
                                                     "env": {}}))
    env = {"HOME": str(tmp_path), "RAGBUS_HOME": "~/home", "RAGBUS_TRACING": "0", "COLUMNS": "200"}
    stopped = CliRunner().invoke(app, ["feeds", "list"], env=env)
    assert stopped.exit_code != 0 and "is not running whole" in stopped.output, stopped.output
    chosen = CliRunner().invoke(app, ["feeds", "list"], env={**env, "RAGBUS_RUNTIME": "local"})
    assert chosen.exit_code == 0, chosen.output
    assert is_set("runtime", {"RAGBUS_RUNTIME": "local"}) and not is_set("runtime", {})
