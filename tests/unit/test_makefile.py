"""`make demo` installs what the demo runs on, visibly; the dev extra is for `make test`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[2]


def _recipe(target: str, tmp_path: Path) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if "pip install" in line and "--upgrade pip" not in line]


def test_demo_installs_only_the_runtime_dependencies_with_progress(tmp_path):
    installs = _recipe("demo", tmp_path)
    assert installs and not any("[dev]" in line for line in installs)
    assert not any("--quiet" in line or " -q " in line for line in installs)


def test_tests_install_the_dev_extra(tmp_path):
    assert any("[dev]" in line for line in _recipe("test", tmp_path))
