"""Fixtures of the installed tier: one clean build of the package per test session."""
from __future__ import annotations

import pytest

from installed.user_env import Installed, build_workspace


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    return build_workspace(tmp_path_factory.mktemp("ws"))
