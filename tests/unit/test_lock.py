"""The locks pin every dependency, satisfy pyproject.toml, and are what installs use."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _pins(name: str) -> dict[str, Version]:
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        if not line.strip() or line.startswith((" ", "#")):
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"{name}: {line!r} is not pinned"
        pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize(("lock", "groups"), [("requirements.txt", ["dependencies"]),
                                              ("requirements-dev.txt", ["dependencies", "dev"])])
def test_each_lock_satisfies_every_declared_dependency(lock, groups):
    pins = _pins(lock)
    project = _project()
    declared = [Requirement(d) for g in groups
                for d in (project["dependencies"] if g == "dependencies" else project["optional-dependencies"][g])]
    for req in declared:
        name = canonicalize_name(req.name)
        assert name in pins, f"{lock} lacks {req}: run `make lock`"
        assert req.specifier.contains(pins[name], prereleases=True), f"{lock} pins {name}=={pins[name]}, not {req}"


def test_the_runtime_lock_has_what_the_code_imports():
    pins = _pins("requirements.txt")
    # functions_framework.aio (the gateway) appeared in 3.9.0
    assert pins["functions-framework"] >= Version("3.9")
    floor = next(Requirement(d) for d in _project()["dependencies"] if d.startswith("functions-framework"))
    assert not floor.specifier.contains("3.8.3")
    # what justext's lxml[html_clean] means, declared so old pips install it too
    assert "lxml-html-clean" in pins
    assert any(canonicalize_name(Requirement(d).name) == "lxml-html-clean" for d in _project()["dependencies"])
    # the deploy installs runtime packages only
    assert not {"pytest", "ruff", "playwright"} & set(pins)


def test_installs_use_the_locks():
    makefile = (ROOT / "Makefile").read_text()
    assert "-r requirements-dev.txt" in makefile and "-r requirements.txt" in makefile
    steps = {s["id"]: s for s in yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())["steps"]}
    assert "-r requirements-dev.txt" in " ".join(steps["install"]["args"])
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".ci/fresh-install" in ci and "PIP_CONFIG_FILE=/dev/null" in ci and "make test" in ci
    assert os.access(ROOT / ".ci" / "fresh-install", os.X_OK)
    assert ".ci/checkov" in ci and os.access(ROOT / ".ci" / "checkov", os.X_OK)


def test_the_deploy_step_accepts_the_lock_and_refuses_a_stale_one(tmp_path):
    steps = {s["id"]: s for s in yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())["steps"]}
    script = steps["package"]["args"][-1]
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "requirements.txt").write_text((ROOT / "requirements.txt").read_text())
    ok = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0 and "deploying requirements.txt" in ok.stdout, ok.stderr
    (tmp_path / "requirements.txt").write_text("\n".join(
        "functions-framework==3.8.3" if line.startswith("functions-framework==") else line
        for line in (ROOT / "requirements.txt").read_text().splitlines()))
    bad = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode != 0 and "make lock" in bad.stderr


def test_the_function_source_carries_the_runtime_lock():
    import fnmatch

    import hcl2

    with (ROOT / "infra" / "functions.tf").open() as handle:
        parsed = hcl2.load(handle)
    excludes = [e.strip('"') for block in parsed["locals"] for e in block.get("source_excludes", [])]
    assert excludes, "no source_excludes found"
    assert not any(fnmatch.fnmatch("requirements.txt", e) for e in excludes)
