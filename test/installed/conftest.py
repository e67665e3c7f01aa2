"""Fixtures of the installed tier: one clean build of the package per test session."""
from __future__ import annotations

import pytest

from conftest import shared_root
from installed.user_env import Installed, readme_install, shared_workspace


@pytest.fixture(scope="session")
def installed(tmp_path_factory, worker_id) -> Installed:
    """The clean build, made once for the run (shared by the test workers)."""
    return shared_workspace(shared_root(tmp_path_factory, worker_id), worker_id)


@pytest.fixture(scope="session")
def readme_installed(tmp_path_factory) -> Installed:
    """The checkout's own install tree, as README command 1 leaves it (symlinks)."""
    try:
        return readme_install(tmp_path_factory.mktemp("readme_user"))
    except FileNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture
def camera_images(tmp_path):
    """A folder of three 320x240 colour images, for a camera node's folder source."""
    import cv2
    import numpy as np
    folder = tmp_path / "camera"
    folder.mkdir()
    for i, colour in enumerate([(0, 0, 255), (0, 255, 0), (255, 0, 0)]):
        cv2.imwrite(str(folder / f"{i}.png"), np.full((240, 320, 3), colour, np.uint8))
    return folder
