"""No package index is named by its address: with the machine's configuration set aside
(PIP_CONFIG_FILE=/dev/null, UV_NO_CONFIG=1, index variables unset), pip's and uv's default is PyPI."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
#: Ways a tool is pointed at an index: flags, variables, config keys, and a /simple address.
NAMED_INDEX = re.compile(
    r"--(?:extra-)?index-url|--default-index|\b(?:PIP|UV)_(?:EXTRA_)?INDEX(?:_URL)?=\S|\bUV_DEFAULT_INDEX=\S"
    r"|^\s*(?:extra-)?index-url\s*=|https?://[^\s\"']+/simple\b", re.MULTILINE)
#: Documents whose text is data (evaluation corpora, a cleaner fixture), not configuration.
DATA = ("shared/tools/eval/datasets/", "shared/corpus/", "tests/data/")


def _tracked() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in names.splitlines() if not name.startswith(DATA)]


def test_nothing_in_the_repository_names_a_package_index():
    named = []
    for path in _tracked():
        if path.name == Path(__file__).name or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        named += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for m in NAMED_INDEX.finditer(text)
                  if "example.com" not in text[m.start(): m.end() + 40]]
    assert named == []


def test_ci_and_the_lock_set_the_machines_configuration_aside():
    run = (ROOT / ".ci" / "run").read_text()
    assert "export PIP_CONFIG_FILE=/dev/null" in run
    assert re.search(r"unset PIP_INDEX_URL PIP_FIND_LINKS PIP_EXTRA_INDEX_URL", run)
    makefile = (ROOT / "Makefile").read_text()
    (lock_env,) = re.findall(r"^LOCK_ENV := (.+)$", makefile, re.MULTILINE)
    for variable in ("UV_INDEX", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS"):
        assert f"-u {variable} " in lock_env + " ", variable
    assert "UV_NO_CONFIG=1" in lock_env
    assert makefile.count("$(LOCK_ENV) $(VENV)/bin/uv pip compile") == 3  # the two locks, and the 3.13 wheel check
