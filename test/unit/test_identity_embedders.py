"""The face and voice printers on real photos and recordings (test/data, sources there)."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from conftest import REPO
from vision_dialogue.application.identity.embedders import IdentityInputError
from vision_dialogue.application.identity.matching import RULES
from vision_dialogue.application.identity.records import Modality

pytest.importorskip("dlib", reason="requirements/identity.txt is not installed")
DATA = REPO / "test" / "data"


@pytest.fixture(scope="module")
def faces():
    from vision_dialogue.application.identity.embedders import FaceEmbedder
    return FaceEmbedder()


def crop(faces, person: str, shot: int) -> np.ndarray:
    rgb = np.asarray(Image.open(DATA / "people" / person / f"{shot}.jpg").convert("RGB"))
    [(x, y, w, h)] = faces.faces_in(rgb)
    m = w // 4
    return rgb[max(0, y - m):y + h + m, max(0, x - m):x + w + m]


def test_photos_of_one_person_match_and_of_two_people_do_not(faces):
    rule = RULES[Modality.FACE]
    a1, a2 = (faces.embed(crop(faces, "obama", n)) for n in (1, 3))
    b = faces.embed(crop(faces, "biden", 2))
    assert a1.vector.shape == (128,) and a1.model == faces.model and "dlib" in a1.version
    same, other = rule.distance(a1.vector, a2.vector), rule.distance(a1.vector, b.vector)
    assert same < rule.threshold < other


def test_faces_that_cannot_be_printed_are_refused_with_the_reason(faces):
    face = crop(faces, "obama", 1)
    with pytest.raises(IdentityInputError, match="too small"):
        faces.embed(face[::12, ::12])
    with pytest.raises(IdentityInputError, match="no frontal face"):
        faces.embed(np.rot90(face))
    with pytest.raises(IdentityInputError, match="RGB image"):
        faces.embed(face[..., 0])


def test_two_faces_in_one_picture_are_two(faces):
    left = np.asarray(Image.open(DATA / "people" / "obama" / "1.jpg").convert("RGB")
                      .resize((300, 375)))
    right = np.asarray(Image.open(DATA / "people" / "biden" / "2.jpg").convert("RGB")
                       .resize((375, 375)))
    assert len(faces.faces_in(np.concatenate([left, right], axis=1))) == 2


def test_voices_print_and_a_clip_too_short_is_refused():
    import soundfile

    from vision_dialogue.application.identity.embedders import VoiceEmbedder
    voices = VoiceEmbedder()
    clips = {(who, n): soundfile.read(DATA / "voices" / who / f"{n}.flac", dtype="int16")
             for who in ("diane", "sheila") for n in (1, 2)}
    prints = {k: voices.embed(x, sr).vector for k, (x, sr) in clips.items()}
    rule = RULES[Modality.VOICE]
    assert prints["sheila", 1].shape == (256,)
    assert rule.distance(prints["sheila", 1], prints["sheila", 2]) < rule.distance(
        prints["sheila", 1], prints["diane", 1])
    x, sr = clips["diane", 1]
    with pytest.raises(IdentityInputError, match="too short"):
        voices.embed(x[:sr // 2], sr)


SHARED_BY_TWO_THREADS = """
import sys, threading
import numpy as np
from PIL import Image
from vision_dialogue.application.identity.embedders import FaceEmbedder
faces = FaceEmbedder()
rgb = np.asarray(Image.open(sys.argv[1]).convert("RGB"))
[(x, y, w, h)] = faces.faces_in(rgb)
face = rgb[y - 20:y + h + 20, x - 20:x + w + 20]
done = []
def find():
    done.extend(len(faces.faces_in(rgb)) for _ in range(20))
def embed():
    done.extend(faces.embed(face).vector.shape[0] for _ in range(20))
threads = [threading.Thread(target=find), threading.Thread(target=embed)]
[t.start() for t in threads]
[t.join() for t in threads]
print(sorted(set(done)), len(done))
"""


def test_one_face_printer_serves_two_threads():
    """A printer shared by threads (a node's worker and its caller) answers both.

    Without the printer's lock two threads on one dlib printer corrupt its memory now and
    then (a fresh-clone run hung for minutes so; a probe of two threads for 15 s crashed or
    hung in 3 of 14 runs, and in none of 8 with the lock): this short run catches it only
    sometimes. In a child process, so a crash or hang cannot take the test's with it.
    """
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-c", SHARED_BY_TWO_THREADS,
                          str(DATA / "people" / "obama" / "1.jpg")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["[1,", "128]", "40"], res.stdout
