"""Sphinx configuration of the vision_dialogue documentation (MyST Markdown, as rosdoc2 uses).

Built by scripts/docs.sh into build/docs/ (HTML); the test suite builds it with warnings as
errors (test/installed/test_docs.py). The reference pages (parameters, topics, interfaces,
results, API) are generated from the code by docs/_ext/vd_reference.py at every build.
"""
from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(REPO))

project = "vision_dialogue"
author = "vision_dialogue contributors"
copyright = "vision_dialogue contributors, Apache-2.0"      # noqa: A001 - Sphinx's name
extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "vd_reference"]
myst_enable_extensions = ["colon_fence", "deflist", "substitution"]
myst_heading_anchors = 4
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "README.md"]
html_theme = "sphinx_rtd_theme"
html_theme_options = {"navigation_depth": 3, "collapse_navigation": True}
html_title = "vision_dialogue"
html_static_path = ["_static"]
html_css_files = ["tables.css"]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_typehints = "none"
nitpicky = False
#: an attribute named in two classes (`seconds`) is an ambiguous reference, not a broken one
suppress_warnings = ["ref.python"]
