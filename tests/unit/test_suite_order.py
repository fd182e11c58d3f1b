"""`make test` hands whole files to its two workers longest first (tests/conftest.py, tests/durations.json),
not most tests first (pytest-xdist's default), so a long one-test file is not handed out last."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

from tests import conftest, durations

ROOT = Path(__file__).resolve().parents[2]


def test_make_test_keeps_the_collection_order_that_conftest_sets():
    line = next(line for line in (ROOT / "Makefile").read_text().splitlines() if "-m pytest -n" in line)
    assert "--dist loadfile" in line and "--no-loadscope-reorder" in line


def test_files_are_ordered_longest_first_an_unknown_file_as_its_folders_median(monkeypatch, tmp_path):
    table = {"tests/e2e/test_long.py": 300.0, "tests/e2e/test_mid.py": 40.0, "tests/e2e/test_short.py": 5.0,
             "tests/unit/test_many.py": 20.0, "tests/unit/test_few.py": 1.0}
    (tmp_path / "durations.json").write_text(json.dumps({"files": table}))
    monkeypatch.setattr(conftest, "_ROOT", tmp_path)
    names = ["tests/unit/test_many.py::a", "tests/unit/test_many.py::b", "tests/unit/test_few.py::a",
             "tests/e2e/test_new.py::a", "tests/e2e/test_short.py::a", "tests/e2e/test_long.py::a",
             "tests/unit/test_new.py::a", "tests/e2e/test_long.py::b"]
    items = [SimpleNamespace(nodeid=n) for n in names]
    conftest._longest_files_first(items)
    assert [i.nodeid for i in items] == [
        "tests/e2e/test_long.py::a", "tests/e2e/test_long.py::b",  # a file's tests together, in order
        "tests/e2e/test_new.py::a",  # unknown: the e2e median (40)
        "tests/unit/test_many.py::a", "tests/unit/test_many.py::b",
        "tests/unit/test_new.py::a",  # unknown: the unit median (20), after the known file of 20
        "tests/e2e/test_short.py::a", "tests/unit/test_few.py::a"]


def test_the_table_is_rewritten_from_a_runs_junit_xml_and_names_real_files(tmp_path):
    xml = tmp_path / "run.xml"
    xml.write_text('<testsuites><testsuite>'
                   '<testcase classname="tests.unit.test_a" name="x" time="1.5"/>'
                   '<testcase classname="tests.unit.test_a.TestGroup" name="y" time="2.0"/>'
                   '<testcase classname="tests.e2e.test_b" name="z" time="30"/>'
                   '</testsuite></testsuites>')
    assert durations.file_seconds(xml) == {"tests/e2e/test_b.py": 30.0, "tests/unit/test_a.py": 3.5}
    table = json.loads((ROOT / "tests" / "durations.json").read_text())["files"]
    assert table and all(re.fullmatch(r"tests/(unit|integration|e2e|hostile)/test_\w+\.py", name) for name in table)
