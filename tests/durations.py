"""Rewrite tests/durations.json from a whole run's JUnit XML: `python -m tests.durations RUN.xml`.

tests/conftest.py orders the test files longest first in `make test`'s workers (pytest-xdist hands out
whole files in collection order, so a long file handed out last would end the run alone). A file's
figure is the sum of its tests' times (setup and teardown included), rounded to a tenth of a second.
The figures only order the files: a stale or missing entry costs balance, never a test."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).with_name("durations.json")


def file_seconds(junit_xml: Path) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit_xml).iter("testcase"):
        # classname is "tests.unit.test_x" or "tests.unit.test_x.TestClass"; the file is the first three parts
        parts = case.get("classname", "").split(".")
        if len(parts) >= 3 and parts[0] == "tests":
            seconds["/".join(parts[:3]) + ".py"] += float(case.get("time") or 0)
    return {name: round(value, 1) for name, value in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    files = file_seconds(Path(argv[0]))
    OUT.write_text(json.dumps({"source": f"seconds per test file in one whole run ({Path(argv[0]).name}; "
                               "python -m tests.durations RUN.xml rewrites it); only their order is used",
                               "files": files}, indent=0) + "\n")
    print(f"{OUT}: {len(files)} files, {sum(files.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
