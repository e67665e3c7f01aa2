"""The closing line of scripts/test.sh: every tier's counts together, and the time.

    python test/tier_summary.py build/test-results SECONDS

Reads the JUnit XML each tier wrote; prints one line per tier, then the plain closing line
'N passed, N failed, N skipped' that CI reads.
"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def counts(xml: Path) -> dict[str, int]:
    """passed / failed / skipped of one JUnit XML file (errors count as failed)."""
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    out = {"passed": 0, "failed": 0, "skipped": 0}
    for s in suites:
        tests, skipped = int(s.get("tests", 0)), int(s.get("skipped", 0))
        failed = int(s.get("failures", 0)) + int(s.get("errors", 0))
        out["failed"] += failed
        out["skipped"] += skipped
        out["passed"] += tests - failed - skipped
    return out


def main(argv: list[str]) -> int:
    folder, seconds = Path(argv[1]), int(argv[2])
    total = {"passed": 0, "failed": 0, "skipped": 0}
    for xml in sorted(folder.glob("*.xml")):
        c = counts(xml)
        print(f"[test] tier {xml.stem}: {c['passed']} passed, {c['failed']} failed, "
              f"{c['skipped']} skipped")
        for k in total:
            total[k] += c[k]
    print(f"[test] tests took {seconds // 60} min {seconds % 60} s")
    print(f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
