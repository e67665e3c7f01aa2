"""The demo video's person: her whole face in every frame of her scene, as people_node needs."""
from __future__ import annotations

import numpy as np
import pytest

from vision_dialogue.camera.demo_video import DemoSpec, pan_frames

pytest.importorskip("dlib", reason="requirements/identity.txt is not installed")


def test_the_person_scene_shows_a_face_a_face_print_can_be_made_of_in_each_frame():
    """At mid-height the pan cut her forehead off: no frontal face, nobody reported."""
    from skimage import data

    from vision_dialogue.application.identity.embedders import FaceEmbedder
    spec = DemoSpec()
    frames = pan_frames(data.astronaut()[..., ::-1], round(spec.person_seconds * spec.fps),
                        spec, level=True)
    faces = FaceEmbedder()
    for frame in frames[::4] + frames[-1:]:
        rgb = np.ascontiguousarray(frame[..., ::-1])
        [(x, y, w, h)] = faces.faces_in(rgb)
        assert y > 0 and y + h < spec.height, (x, y, w, h)
        faces.embed(rgb[y:y + h, max(0, x - w // 4):x + w + w // 4])      # no error
