"""Fixtures of the installed tier: one clean build of the package per test session."""
from __future__ import annotations

import pytest

from installed.user_env import Installed, build_workspace, readme_install


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    return build_workspace(tmp_path_factory.mktemp("ws"))


@pytest.fixture(scope="session")
def readme_installed(tmp_path_factory) -> Installed:
    """The checkout's own install tree, as README command 1 leaves it (symlinks)."""
    try:
        return readme_install(tmp_path_factory.mktemp("readme_user"))
    except FileNotFoundError as e:
        pytest.skip(str(e))
