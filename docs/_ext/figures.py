"""Measured figures typed by hand into a page: what the docs test refuses.

Figures (timings, rates, scores) enter the documentation only from the benchmarks' results
files (docs/results.md is generated from them). A page that types one in goes stale the
moment the code or the machine changes, and pages then disagree with each other. What counts
as a measured figure here: a percentile or median with a number, a number with a latency
percentile, tokens per second, a speed-up factor, a score word with a decimal (grounding,
hallucination, precision, recall, accuracy, WER), and a duration with two or more decimals
(settings are written with one at most). Parameter defaults and limits are settings, not
figures, and pass.
"""
from __future__ import annotations

import re

PATTERNS = [
    re.compile(r"\b(p50|p95|p99|median)\b[^.\n|]{0,12}?\d", re.I),
    re.compile(r"\d(\.\d+)?\s*(s|ms)\s*(p50|p95|median)\b", re.I),
    re.compile(r"\d+(\.\d+)?\s*tok/s\b"),
    re.compile(r"\b\d+(\.\d+)?\s*[×x]\s+(faster|slower|less|more)\b"),
    re.compile(r"\b(grounding|hallucination|precision|recall|accuracy|WER)\b[^.\n|]{0,12}?"
               r"\b[01]?\.\d\d?\b", re.I),
    re.compile(r"\b\d+\.\d{2,}\s*(s|ms|seconds)\b"),
    re.compile(r"\b\d+ min \d+ s\b"),
    re.compile(r"\b(took|takes|gave|measured)\b[^.\n|]{0,20}?\b\d+(\.\d+)?\s*(s|ms|min|"
               r"minutes|seconds|%)\b", re.I),
    re.compile(r"\b\d+(\.\d+)?\s*(s|ms|min|minutes|%)\b[^.\n|]{0,30}\bon (these |this "
               r"machine's |the |its )?2 (shared |CPU )?cores\b", re.I),
]
#: a table whose header names one of these holds measurements in every row
MEASURED_HEADER = re.compile(r"p50|p95|median|precision|recall|grounding|hallucination|"
                             r"\bright\b|\bwrong\b|\bmissed\b|latency|first sentence|\bms\b|\s\(s\)", re.I)


def figures(text: str) -> list[str]:
    """The lines of `text` (Markdown) that type a measured figure in, outside code blocks."""
    found, in_code, measured_table = [], False, False
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code
            continue
        if in_code:
            continue
        line = re.sub(r"`[^`]*`", "``", line)          # inline code: a log line, a command
        row = line.lstrip().startswith("|")
        if row and n < len(lines) and re.match(r"^\s*\|[-:| ]+\|\s*$", lines[n]):
            measured_table = bool(MEASURED_HEADER.search(line))     # a header row
        elif not row:
            measured_table = False
        in_measured_row = row and measured_table and re.search(r"\d", line) and \
            not re.match(r"^\s*\|[-:| ]+\|\s*$", line)
        if in_measured_row or any(p.search(line) for p in PATTERNS):
            found.append(f"{n}: {line.strip()[:160]}")
    return found
