"""Every VFM tool's real loading and inference code on tiny random models (no downloads)."""
import threading

import cv2
import numpy as np
import pytest
import skimage.data

import tiny_models
from vision_dialogue.vfm import registry
from vision_dialogue.vfm.errors import Cancelled, ModelMissingError, ToolError, UnknownToolError
from vision_dialogue.vfm.models import opencv_maps
from vision_dialogue.vfm.models.common import RunContext, torch_dtype
from vision_dialogue.vfm.models.upernet import ADE_PALETTE
from vision_dialogue.vfm.toolbox import Toolbox


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    return tiny_models.cached(tmp_path_factory.getbasetemp() / "tiny_vfm")


@pytest.fixture(scope="module")
def box(ckpts):
    return Toolbox({t.op: "cpu" for t in registry.TOOLS}, ckpts)


@pytest.fixture(scope="module")
def photo():
    return cv2.resize(skimage.data.astronaut(), (64, 64), interpolation=cv2.INTER_AREA)


def ctx(**kw):
    kw.setdefault("steps", 2)
    kw.setdefault("image_size", 64)
    kw.setdefault("seed", 3)
    return RunContext(**kw)


TEXT = {"vqa": "what color is the sky?", "detect": "man, cup", "replace": "man, robot",
        "remove": "man"}


@pytest.mark.parametrize("op", [t.op for t in registry.TOOLS])
def test_every_tool_runs_on_tiny_models(box, photo, op):
    spec = registry.get(op)
    steps = []
    out = box.run(op, None if spec.action_type == registry.TEXT_TO_IMAGE else photo,
                  TEXT.get(op, "a red robot"),
                  ctx(progress=lambda s, i, n: steps.append((s, i, n))))
    assert box.is_loaded(op) and box.status(op) == "ready"
    if spec.action_type == registry.IMAGE_TO_TEXT:
        assert isinstance(out, str) and out.strip()
    else:
        assert out.dtype == np.uint8 and out.ndim == 3 and out.shape[2] == 3
        assert out.shape[:2] == (64, 64)
    if spec.checkpoints and any(k in spec.checkpoints for k in ("sd", "pix2pix", "inpaint")):
        denoise = [i for s, i, n in steps if s == "denoising"]
        assert denoise[-1] == 2 and all(n == 2 for s, i, n in steps if s == "denoising")


def test_canny_line_scribble_need_no_weights(photo):
    box = Toolbox({"canny": "cpu", "line": "cpu", "scribble": "cpu"},
                  {k: "/nonexistent/model" for k in registry.DEFAULT_CHECKPOINTS})
    flat = np.full((64, 64, 3), 128, np.uint8)
    for op in ("canny", "line", "scribble"):
        assert box.status(op) == "ready"
        assert box.run(op, photo, "").max() == 255, op
        assert box.run(op, flat, "").max() == 0, op


def test_line_detector_finds_rectangle_edges():
    img = np.zeros((128, 128, 3), np.uint8)
    cv2.rectangle(img, (20, 30), (100, 90), (255, 255, 255), -1)
    out = opencv_maps.lines(img)[:, :, 0]
    assert out[30, 40:80].max() > 0 or out[29, 40:80].max() > 0  # top edge
    assert out[60, 60] == 0  # flat inside


def test_diffusion_is_deterministic_per_seed_and_seed_matters(box):
    a = box.run("text2image", None, "a cat", ctx(seed=5))
    b = box.run("text2image", None, "a cat", ctx(seed=5))
    c = box.run("text2image", None, "a cat", ctx(seed=6))
    np.testing.assert_array_equal(a, b)
    assert np.abs(a.astype(int) - c.astype(int)).sum() > 0


def test_cancel_stops_between_steps(box, photo):
    seen = []
    cancel = threading.Event()

    def progress(stage, i, n):
        seen.append(i)
        if i >= 1:
            cancel.set()
    with pytest.raises(Cancelled):
        box.run("canny2image", photo, "a house", ctx(steps=6, progress=progress,
                                                     cancelled=cancel.is_set))
    assert max(seen) < 6


def test_cancel_before_start(box, photo):
    with pytest.raises(Cancelled):
        box.run("pix2pix", photo, "make it blue", ctx(cancelled=lambda: True))


def test_remove_changes_the_masked_object(box, photo):
    out = box.run("remove", photo, "man", ctx())
    assert np.abs(out.astype(int) - photo.astype(int)).mean() > 5


def test_object_not_found_is_a_clear_error(tmp_path, photo, ckpts):
    none = str(tiny_models.clipseg(tmp_path / "clipseg_none", mask_bias=-8.0))
    box = Toolbox({"remove": "cpu"}, {**ckpts, "clipseg": none})
    with pytest.raises(ToolError, match="could not find 'unicorn'"):
        box.run("remove", photo, "unicorn", ctx())


def test_replace_needs_two_parts(box, photo):
    with pytest.raises(ToolError, match="object to replace, what to replace it with"):
        box.run("replace", photo, "only one", ctx())


def test_seg_uses_ade_palette(box, photo):
    out = box.run("seg", photo, "")
    colours = {tuple(c) for c in out.reshape(-1, 3)}
    assert colours <= {tuple(c) for c in ADE_PALETTE}


def test_depth_is_normalised_and_normal_points_out(box, photo):
    d = box.run("depth", photo, "")
    assert d.min() == 0 and d.max() == 255 and (d[..., 0] == d[..., 1]).all()
    n = box.run("normal", photo, "")
    assert (n[..., 2] >= 127).all()


def test_pose_finds_a_person_and_nothing_in_a_flat_image(box):
    person = skimage.data.astronaut()
    assert box.run("pose", person, "").max() > 0
    assert box.run("pose", np.zeros((64, 64, 3), np.uint8), "").max() == 0


def test_missing_model_names_the_checkpoint_and_other_tools_work(photo):
    box = Toolbox({"caption": "cpu", "canny": "cpu"}, {"caption": "/nonexistent/blip"})
    assert "/nonexistent/blip" in box.status("caption")
    with pytest.raises(ModelMissingError, match="/nonexistent/blip"):
        box.run("caption", photo, "")
    assert "/nonexistent/blip" in box.status("caption")
    assert box.run("canny", photo, "").shape == photo.shape


def _fake_hf_cache(monkeypatch, root, repos: dict):
    """A Hugging Face hub cache layout under `root` holding `repos` {repo id: source dir}."""
    import shutil
    from huggingface_hub import constants
    for repo, src in repos.items():
        base = root / ("models--" + repo.replace("/", "--"))
        shutil.copytree(src, base / "snapshots" / "0123abcd")
        (base / "refs").mkdir()
        (base / "refs" / "main").write_text("0123abcd")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))


def test_repo_ids_resolve_from_the_local_hf_cache(photo, tmp_path, monkeypatch, ckpts):
    from pathlib import Path
    _fake_hf_cache(monkeypatch, tmp_path / "hub", {
        "tiny/blip-caption": ckpts["caption"],
        "tiny/annotators": Path(ckpts["hed_annotator"]).parent})
    box = Toolbox({"caption": "cpu", "hed": "cpu"},
                  {"caption": "tiny/blip-caption", "hed_annotator": "tiny/annotators"})
    assert box.status("caption") == "not loaded" and box.status("hed") == "not loaded"
    assert isinstance(box.run("caption", photo, ""), str)
    assert box.run("hed", photo, "").shape == photo.shape


def test_repo_id_not_in_cache_is_missing_without_network(photo, tmp_path, monkeypatch):
    from huggingface_hub import constants
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    box = Toolbox({"vqa": "cpu"})
    with pytest.raises(ModelMissingError, match="Salesforce/blip-vqa-base.*allow_download"):
        box.run("vqa", photo, "what?")


def test_lazy_load_happens_once_under_concurrency(ckpts, photo):
    box = Toolbox({"depth": "cpu", "normal": "cpu"}, ckpts)
    assert not box.is_loaded("depth") and box.status("depth") == "not loaded"
    from vision_dialogue.vfm.models import dpt
    calls = []
    orig = dpt.DepthEstimator.load

    def counting(self):
        calls.append(1)
        return orig(self)
    dpt.DepthEstimator.load = counting
    try:
        ts = [threading.Thread(target=box.run, args=(op, photo, "")) for op in
              ("depth", "normal", "depth", "normal")]
        [t.start() for t in ts]
        [t.join() for t in ts]
    finally:
        dpt.DepthEstimator.load = orig
    assert len(calls) == 1 and box.is_loaded("normal")


def test_bad_inputs_and_unknown_tools(box):
    with pytest.raises(UnknownToolError, match="unknown tool 'nope'"):
        box.run("nope", None, "")
    with pytest.raises(ToolError, match="needs a text"):
        box.run("vqa", np.zeros((32, 32, 3), np.uint8), " ")
    with pytest.raises(ToolError, match="needs an RGB input image"):
        box.run("canny", None, "")
    only = Toolbox({"canny": "cpu"})
    with pytest.raises(UnknownToolError, match="offers canny"):
        only.run("caption", np.zeros((32, 32, 3), np.uint8), "")


def test_device_and_dtype_rules(ckpts, photo):
    import torch
    assert torch_dtype("cuda:0") == torch.float16 and torch_dtype("cpu") == torch.float32
    if not torch.cuda.is_available():
        box = Toolbox({"depth": "cuda:0"}, ckpts)
        with pytest.raises(ToolError, match="not available"):
            box.run("depth", photo, "")


def test_readiness_says_which_tools_can_run_before_loading_any(ckpts, tmp_path):
    """What the VFM server and `doctor` report at start: checkpoints on disk, nothing loaded."""
    everything = Toolbox({t.op: "cpu" for t in registry.TOOLS}, ckpts)
    ready, missing = everything.readiness()
    assert set(ready) == {t.op for t in registry.TOOLS} and not missing
    assert not any(everything.is_loaded(op) for op in ready if not registry.BY_OP[op].weight_free)
    bare = Toolbox({"canny": "cpu", "caption": "cpu"},
                   {k: str(tmp_path / "none" / k) for k in registry.DEFAULT_CHECKPOINTS})
    ready, missing = bare.readiness()
    assert ready == ["canny"] and list(missing) == ["caption"]
    assert str(tmp_path / "none") in missing["caption"]
