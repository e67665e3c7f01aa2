"""The sandboxed image store and Visual ChatGPT's chained names."""
import os
import re
import threading

import numpy as np
import pytest

from vision_dialogue.vfm.image_store import ImageStore, StoreError

CHAIN = re.compile(r"^([0-9a-f]{8})_([a-z0-9]+)_([0-9a-f]{8})_([0-9a-f]{8})\.png$")


@pytest.fixture
def store(tmp_path):
    return ImageStore(tmp_path / "images")


def _img(v=10, h=16, w=24):
    a = np.zeros((h, w, 3), np.uint8)
    a[..., 0] = v
    a[2:5, 3:9] = (200, 30, 90)
    return a


def test_add_and_load_round_trip_rgb(store):
    img = _img()
    name = store.add(img)
    assert re.fullmatch(r"[0-9a-f]{8}\.png", name)
    np.testing.assert_array_equal(store.load(name), img)


def test_chained_names_follow_visual_chatgpt(store):
    org = store.add(_img())
    org_id = org[:-4]
    a = store.save(_img(20), "canny", org)
    m = CHAIN.match(a)
    assert m and m.group(2) == "canny" and m.group(3) == org_id and m.group(4) == org_id
    b = store.save(_img(30), "canny2image", a)
    m2 = CHAIN.match(b)
    assert m2.group(2) == "canny2image" and m2.group(3) == m.group(1) and m2.group(4) == org_id
    assert m2.group(1) != m.group(1)
    assert (store.root / b).is_file()
    assert store.chain(b) == (m2.group(1), org_id)


def test_text_to_image_output_starts_a_chain(store):
    name = store.save(_img(), "text2image", None)
    assert re.fullmatch(r"[0-9a-f]{8}\.png", name)


@pytest.mark.fault("VFM", "path tricks: .., absolute, symlink out")
def test_rejects_parent_dir(store, tmp_path):
    (tmp_path / "x.png").write_bytes(b"not important")
    with pytest.raises(StoreError, match=r"'\.\.'"):
        store.resolve("../x.png")
    with pytest.raises(StoreError, match=r"'\.\.'"):
        store.resolve("sub/../../x.png")


@pytest.mark.fault("VFM", "path tricks: .., absolute, symlink out")
def test_rejects_absolute_path_outside(store, tmp_path):
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"x")
    with pytest.raises(StoreError, match="outside the image store"):
        store.resolve(str(outside))
    with pytest.raises(StoreError, match="outside the image store"):
        store.resolve("/etc/passwd")


def test_accepts_absolute_path_inside(store):
    name = store.add(_img())
    assert store.resolve(str(store.root / name)) == store.root / name


@pytest.mark.fault("VFM", "path tricks: .., absolute, symlink out")
def test_rejects_symlink_pointing_out(store, tmp_path):
    outside = tmp_path / "o.png"
    outside.write_bytes(b"x")
    os.symlink(outside, store.root / "link.png")
    with pytest.raises(StoreError, match="symlink pointing outside"):
        store.resolve("link.png")
    os.symlink(tmp_path, store.root / "dirlink")
    with pytest.raises(StoreError, match="outside"):
        store.resolve("dirlink/o.png")


def test_symlink_inside_is_fine(store):
    name = store.add(_img())
    os.symlink(store.root / name, store.root / "alias.png")
    assert store.resolve("alias.png") == store.root / name


def test_missing_empty_and_non_image(store):
    with pytest.raises(StoreError, match="does not exist"):
        store.resolve("nope.png")
    with pytest.raises(StoreError, match="empty"):
        store.resolve("  ")
    (store.root / "bad.png").write_bytes(b"garbage")
    with pytest.raises(StoreError, match="not a readable"):
        store.load("bad.png")


def test_bad_op_and_bad_array(store):
    with pytest.raises(ValueError):
        store.new_name("bad_op", None)
    with pytest.raises(ValueError):
        store.save(np.zeros((4, 4), np.float32), "canny", None)
    assert not [p for p in store.root.iterdir() if p.suffix == ".png" and p.stat().st_size == 0]


def test_concurrent_saves_get_distinct_names(tmp_path):
    store = ImageStore(tmp_path, id_len=2)  # tiny id space: collisions must be avoided
    org = store.add(_img())
    names, lock = [], threading.Lock()

    def work():
        for _ in range(10):
            n = store.save(_img(), "canny", org)
            with lock:
                names.append(n)
    ts = [threading.Thread(target=work) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert len(set(names)) == 40
