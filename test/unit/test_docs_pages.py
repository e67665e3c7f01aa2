"""The README and the documentation pages, read as files (ROS-free, fast).

The site itself is built with warnings as errors in test/installed/test_docs_site.py (broken
links between pages, names that do not exist, pages outside the table of contents).
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO

sys.path.insert(0, str(REPO / "docs" / "_ext"))
import figures  # noqa: E402 - docs/_ext is not a package
from vd_reference import generated_pages  # noqa: E402

README = REPO / "README.md"
#: pages written by hand (the generated ones are made from the code and the results files)
GENERATED = {"results.md", "readme.md", "changelog.md"}
PAGES = [README] + sorted(p for p in (REPO / "docs").glob("*.md") if p.name not in GENERATED)
WRITTEN_AT_BUILD = {p.resolve() for p in generated_pages()}
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
#: a block that cannot run or parse here says so on the line before it
NOT_RUNNABLE = "<!-- not runnable here:"


def test_the_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines (at most 250)"
    text = README.read_text()
    for must in ("./scripts/demo.sh", "./scripts/test.sh", "docs/monitor.png"):
        assert must in text


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MyST make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", page.read_text(), re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_resolves(page):
    """Relative links go to files that exist, and to headings that exist in them."""
    text = FENCE.sub("", page.read_text())
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+://|^mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() and dest not in WRITTEN_AT_BUILD:
            broken.append(target)      # (a generated page is there once the site is built)
        elif anchor and dest.exists() and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_figure_is_typed_in_by_hand(page):
    """Timings and scores come from benchmarks/results/*.json (docs/results.md), never by hand."""
    found = figures.figures(page.read_text())
    assert not found, f"{page.name} types figures in (use the results page):\n" + \
        "\n".join(found)


def test_no_issue_numbers_in_the_pages_or_the_docstrings():
    said = re.compile(r"\bissues? #?\d+\b", re.I)
    found = [f"{p.name}: {m.group(0)}" for p in PAGES for m in said.finditer(p.read_text())]
    found += [f"{p.relative_to(REPO)}: {m.group(0)}" for p in (REPO / "vision_dialogue").rglob(
        "*.py") for m in said.finditer(p.read_text())]
    assert not found, found


def blocks(page: Path):
    """(language, code, runnable) of each fenced block of a page."""
    text = page.read_text()
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip().splitlines()[-1:] or [""]
        yield m.group(1), m.group(2), not before[0].startswith(NOT_RUNNABLE)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_code_block_parses(page, tmp_path):
    """Python compiles, YAML loads, bash passes `bash -n`: what a reader copies works.

    The README's skills client runs against the real nodes in test_skills_ros.py; its robot
    tools YAML loads as the manager's file in test_robot_tools.py.
    """
    bad = []
    for i, (lang, code, runnable) in enumerate(blocks(page)):
        if not runnable:
            continue
        if lang == "python":
            try:
                compile(code, f"{page.name} block {i}", "exec")
            except SyntaxError as e:
                bad.append(f"block {i} (python): {e}")
        elif lang == "yaml":
            try:
                yaml.safe_load(code)
            except yaml.YAMLError as e:
                bad.append(f"block {i} (yaml): {e}")
        elif lang == "bash":
            script = tmp_path / f"block{i}.sh"
            script.write_text(code)
            res = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            if res.returncode != 0:
                bad.append(f"block {i} (bash): {res.stderr.strip()}")
    assert not bad, f"{page.name}:\n" + "\n".join(bad)


def test_the_figure_check_catches_what_it_should():
    """The check itself: measured figures are caught, settings and code are not."""
    assert figures.figures("The first sentence came in 0.80 s p50 on 2 cores.")
    assert figures.figures("grounding 0.71 on the battery")
    assert figures.figures("| engine | right | p50 (s) |\n|---|---|---|\n| ours | 22 | 0.86 |")
    assert figures.figures("decoded at 28 tok/s")
    assert not figures.figures("`frame_period` (default 5 s) and `n: 4`")
    assert not figures.figures("```\nfirst sentence 0.80 s p50\n```")
    assert not figures.figures("a log line: `retrying in 0.50 s`")


def test_the_results_page_gives_each_measurement_its_own_spread(tmp_path):
    """Runs of two batteries in one file: a table each, runs numbered as in the runs table."""
    import json

    import results_page
    runs = [{"date": "2026-11-28T10:00:00Z", "commit": "abc", "command": "python b.py",
             "result": {"label": label, "llm": "local", "scores": {"s": score}}}
            for label, score in (("perspective", 0.25), ("consistency", 0.9),
                                 ("perspective", 0.5), ("consistency", 1.0))]
    (tmp_path / "bench_x.json").write_text(json.dumps({"benchmark": "bench_x", "runs": runs}))
    page = results_page.page(tmp_path)
    perspective = page[page.index("### label perspective, llm local"):]
    consistency = page[page.index("### label consistency, llm local"):]
    assert "| figure | run 1 | run 3 | spread |" in perspective.split("###")[1]
    assert "| `scores.s` | 0.25 | 0.5 | 0.25–0.5 |" in perspective.split("###")[1]
    assert "| `scores.s` | 0.9 | 1 | 0.9–1 |" in consistency
    one = {"benchmark": "bench_y", "runs": runs[:1]}
    (tmp_path / "bench_x.json").write_text(json.dumps(one))
    assert "###" not in results_page.page(tmp_path)
