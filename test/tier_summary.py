"""The closing line of scripts/test.sh: every tier's counts together, and the time.

    python test/tier_summary.py build/test-results SECONDS

Reads the JUnit XML each tier wrote; prints one line per tier, and from each tier's timeline
(test/timeline.py) how busy each worker was, the files that took longest (whole files are
scheduled on workers: the longest bound the tier's time) and the files that used the most CPU
(with every core busy, what a tier's time is made of); the tests that failed, and where a
process the backstop ended was stuck (test/stacks_digest.py), last, where CI's tail shows them;
then the plain closing line 'N passed, N failed, N skipped' that CI reads.
"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from file_order import underweighed
from stacks_digest import digests

#: the files named in a tier's time line
LONGEST_FILES = 6
#: failed tests named at the end, at most
FAILED_NAMED = 12


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


def failed_tests(xml: Path) -> list[str]:
    """'file::test: the first line of its message' of each failed test of a JUnit XML file."""
    out = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        for bad in [*case.iter("failure"), *case.iter("error")]:
            message = (bad.get("message") or bad.text or "").strip().splitlines() or [""]
            file = case.get("classname", "").replace(".", "/") + ".py"
            out.append(f"{file}::{case.get('name')}: {message[0][:160]}")
            break
    return out


def time_line(tsv: Path) -> str:
    """'workers busy A, B s of W s; longest files: f.py N s, ...; most CPU: f.py N s, ...'."""
    busy: dict[str, float] = defaultdict(float)
    files: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    first, last = float("inf"), 0.0
    for line in tsv.read_text().splitlines():
        try:
            worker, start, end, cpu_s, nodeid = line.split("\t", 4)
            start_s, end_s, cpu_used = float(start), float(end), float(cpu_s)
        except ValueError:
            continue                # a line cut short by a process that died
        file = nodeid.split("::")[0]
        busy[worker] += end_s - start_s
        files[file] += end_s - start_s
        cpu[file] += cpu_used
        first, last = min(first, start_s), max(last, end_s)
    if not busy:
        return "no tests timed"
    late = underweighed(files)
    return (f"workers busy {', '.join(f'{busy[w]:.0f}' for w in sorted(busy))} s of "
            f"{last - first:.0f} s; longest files: {_most(files)}; most CPU: {_most(cpu)}"
            + (f"; long files that may start late (weigh them in test/file_order.py "
               f"HEAVY_FILES): {', '.join(late)}" if late else ""))


def _most(seconds: dict[str, float]) -> str:
    """The LONGEST_FILES largest, 'f.py N s, ...'."""
    largest = sorted(seconds.items(), key=lambda kv: -kv[1])[:LONGEST_FILES]
    return ", ".join(f"{Path(f).name} {t:.0f} s" for f, t in largest)


def main(argv: list[str]) -> int:
    folder, seconds = Path(argv[1]), int(argv[2])
    total = {"passed": 0, "failed": 0, "skipped": 0}
    failed = []
    for xml in sorted(folder.glob("*.xml")):
        failed += failed_tests(xml)
        c = counts(xml)
        print(f"[test] tier {xml.stem}: {c['passed']} passed, {c['failed']} failed, "
              f"{c['skipped']} skipped")
        timeline = folder / f"timeline-{xml.stem}.tsv"
        if timeline.is_file():
            print(f"[test] tier {xml.stem}: {time_line(timeline)}")
        for k in total:
            total[k] += c[k]
    for line in failed[:FAILED_NAMED]:
        print(f"[test] failed: {line}")
    for line in digests(folder):
        print(f"[test] {line}")
    print(f"[test] tests took {seconds // 60} min {seconds % 60} s")
    print(f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
