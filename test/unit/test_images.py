"""Image policy: sizes, JPEG data URLs, detail, encode-once cache, dark frames."""
import base64

import cv2
import numpy as np
import pytest
from skimage import data

from vision_dialogue.common import images
from vision_dialogue.common.images import Frame, ImagePolicy, as_bgr, downscale, is_dark


def photo():
    return cv2.resize(np.ascontiguousarray(data.astronaut()[:, :, ::-1]), (640, 480))


def decode(url):
    assert url.startswith("data:image/jpeg;base64,")
    raw = base64.b64decode(url.split(",", 1)[1])
    return cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)


def test_newest_full_size_older_downscaled_and_detail():
    pol = ImagePolicy(newest_max_side=640, older_max_side=256, jpeg_quality=70, detail="high")
    f = Frame(bgr=photo())
    new, old = pol.part(f, newest=True), pol.part(f, newest=False)
    assert new["type"] == "image_url" and new["image_url"]["detail"] == "high"
    assert decode(new["image_url"]["url"]).shape == (480, 640, 3)
    assert decode(old["image_url"]["url"]).shape == (192, 256, 3)
    # the decoded newest frame is the photo (JPEG-close), not something else
    diff = np.abs(decode(new["image_url"]["url"]).astype(int) - photo().astype(int)).mean()
    assert diff < 8


def test_jpeg_quality_changes_size():
    f = Frame(bgr=photo())
    assert len(f.jpeg(640, 30)) < len(f.jpeg(640, 95))


def test_each_size_is_encoded_once(monkeypatch):
    calls = []
    real = images.cv2.imencode

    def counting(*a, **k):
        calls.append(a[1].shape)
        return real(*a, **k)

    monkeypatch.setattr(images.cv2, "imencode", counting)
    pol = ImagePolicy()
    f = Frame(bgr=photo())
    pol.prepare(f)
    assert len(calls) == 2
    for _ in range(5):
        a = pol.part(f, True)["image_url"]["url"]
        b = pol.part(f, False)["image_url"]["url"]
    assert len(calls) == 2
    assert a is pol.part(f, True)["image_url"]["url"]     # the very same cached string
    assert b is pol.part(f, False)["image_url"]["url"]


def test_downscale_never_enlarges_and_keeps_aspect():
    small = np.zeros((100, 50, 3), np.uint8)
    assert downscale(small, 640) is small
    assert downscale(np.zeros((480, 640, 3), np.uint8), 320).shape == (240, 320, 3)


@pytest.mark.parametrize("kw,name", [({"detail": "medium"}, "image_detail"),
                                     ({"jpeg_quality": 0}, "jpeg_quality"),
                                     ({"older_max_side": 4}, "older_max_side")])
def test_invalid_policy_names_parameter(kw, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        ImagePolicy(**kw)


def test_as_bgr_accepts_grey_and_bgra_rejects_bad():
    assert as_bgr(np.zeros((5, 6), np.uint8)).shape == (5, 6, 3)
    assert as_bgr(np.zeros((5, 6, 4), np.uint8)).shape == (5, 6, 3)
    for bad in (np.zeros((5, 6, 3), np.float32), np.zeros((5, 6, 2), np.uint8), "x",
                np.zeros((0, 6, 3), np.uint8)):
        with pytest.raises(ValueError, match="frame"):
            as_bgr(bad)


def test_dark_detection():
    assert is_dark(np.full((48, 64, 3), 5, np.uint8), 20.0)
    assert not is_dark(photo(), 20.0)
