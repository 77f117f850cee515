"""The closing lines of a CI run, from pytest's JUnit XML report: every skipped test with its
reason, then one line of counts (``ci: N passed, N failed, N skipped``).

Under CI a test skips only through an allowance named in tests/helpers/needs.py (its reason
then says "allowed under CI"); any other skip fails there (helpers.needs is a pytest plugin that
sees them). Away from CI a skip that says nothing of the kind did not go through that helper,
and is marked here so that it is seen.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ALLOWED = "allowed under CI"


def main(report: Path) -> int:
    if not report.is_file():  # the run stopped before pytest (ruff, mypy): nothing to count
        return 0
    suites = ET.parse(report).getroot()
    suite_list = [suites] if suites.tag == "testsuite" else list(suites)
    tests = failed = 0
    skips: list[tuple[str, str]] = []
    for suite in suite_list:
        tests += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        for case in suite.iter("testcase"):
            for skipped in case.findall("skipped"):
                name = f"{case.get('classname', '')}::{case.get('name', '')}"
                skips.append((name, skipped.get("message", "")))
    print(f"\nskipped tests: {len(skips)}")
    for name, reason in skips:
        mark = "" if ALLOWED in reason else "  [not through helpers.needs]"
        print(f"  {name}: {reason}{mark}")
    passed = tests - failed - len(skips)
    print(f"ci: {passed} passed, {failed} failed, {len(skips)} skipped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
