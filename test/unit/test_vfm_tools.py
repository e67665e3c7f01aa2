"""Every VFM tool's real loading and inference code on tiny random models (no downloads)."""
import threading

import cv2
import numpy as np
import pytest
import skimage.data

import tiny_models
from vision_dialogue.vfm import memory, registry
from vision_dialogue.vfm.errors import Cancelled, ModelMissingError, ToolError, UnknownToolError
from vision_dialogue.vfm.models import opencv_maps
from vision_dialogue.vfm.models.common import RunContext, ToolImage, torch_dtype
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
        "remove": "man", "segmentobject": "man", "outpaint": "96x64"}


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
        if isinstance(out, ToolImage):
            assert out.text
            if out.rgb is None:         # the tiny random detector may find nothing
                assert op == "segmentobject" and out.text.startswith("found no"), out.text
                return
            out = out.rgb
        assert out.dtype == np.uint8 and out.ndim == 3 and out.shape[2] == 3
        assert out.shape[:2] == ((64, 96) if op == "outpaint" else (64, 64))
    if spec.checkpoints and any(k in spec.checkpoints for k in ("sd", "pix2pix", "inpaint")):
        denoising = [(i, n) for s, i, n in steps
                     if s == "denoising" or (s.startswith("extending") and ":" not in s)]
        assert denoising[-1][0] == 2 and all(n == 2 for i, n in denoising)


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


# ---- Segment Anything, segment the given object, outpainting ------------------------------

def test_segment_colours_each_mask_and_counts_them(box, photo):
    out = box.run("segment", photo, "", ctx())
    n = int(out.text.split()[0])
    assert n >= 1 and out.text.endswith("segment" if n == 1 else "segments")
    changed = np.any(out.rgb != photo, axis=2)
    assert changed.mean() > 0.05                                   # the overlay is drawn
    blank = box.run("segment", np.full((64, 64, 3), 200, np.uint8), "", ctx())
    assert "blank" in blank.text and blank.rgb is None


def test_segment_object_masks_the_detected_boxes_only(box, photo, monkeypatch):
    from vision_dialogue.vfm.models import grounding
    monkeypatch.setattr(grounding.GroundingDetector, "detect",
                        lambda self, rgb, names, threshold=None:
                        [("man", 0.9, (8, 8, 30, 40))] if "man" in names else [])
    out = box.run("segmentobject", photo, "man, cup", ctx())
    assert out.text == "segmented man; found no cup"
    changed = np.any(out.rgb != photo, axis=2)
    assert changed.any() and not changed[50:, 50:].any()          # outside the box: untouched
    none = box.run("segmentobject", photo, "unicorn", ctx())
    assert none.rgb is None and none.text == "found no unicorn in the image"


def test_outpaint_grows_step_by_step_keeps_the_middle_and_reports_each_step(box, photo):
    stages = []
    out = box.run("outpaint", photo, "2.5x", ctx(progress=lambda s, i, n: stages.append(s)))
    assert out.shape[:2] == (160, 160)
    np.testing.assert_array_equal(out[48:112, 48:112], photo)      # the original, unchanged
    steps = sorted({s.split(":")[0] for s in stages if s.startswith("extending")})
    assert steps == ["extending 1/2", "extending 2/2"]
    wide = box.run("outpaint", photo, "256 x 64", ctx())
    assert wide.shape[:2] == (64, 256)


def test_outpaint_cancel_stops_between_steps(box, photo):
    seen, cancel = [], threading.Event()

    def progress(stage, i, n):
        seen.append(stage)
        if stage.startswith("extending 1/3") and i >= 1:
            cancel.set()
    with pytest.raises(Cancelled):
        box.run("outpaint", photo, "8x",
                ctx(steps=3, progress=progress, cancelled=cancel.is_set))
    assert not any(s.startswith("extending 2/") for s in seen)


@pytest.mark.parametrize("text, error", [
    ("huge", "widthxheight"), ("32x32", "not larger"), ("64x64", "not larger"),
    ("5000x64", "too large"), ("100x", "too large")])
def test_outpaint_bad_sizes_are_clear_errors(box, photo, text, error):
    with pytest.raises(ToolError, match=error):
        box.run("outpaint", photo, text, ctx())


# ---- the memory budget ---------------------------------------------------------------------

def _sizes(ckpts, photo, ops):
    """Each tool's measured size alone (MiB), in a toolbox of its own."""
    out = {}
    for op in ops:
        box = Toolbox({op: "cpu"}, ckpts)
        box.run(op, photo, TEXT.get(op, "a red robot"), ctx())
        out[op] = box.placement(op)[1]
        assert box.placement(op)[0] == "cpu" and out[op] > 0
    return out


def test_a_budget_for_two_unloads_the_least_recently_used_idle_model(ckpts, photo):
    ops = ("caption", "depth", "seg")
    size = _sizes(ckpts, photo, ops)
    lines = []
    # room for the two and a little (a first load's estimate is its weight files on disk,
    # a few % over what it measures once loaded), not for the third
    budget = memory.Budget.from_mib(cpu_mib=size["caption"] + size["depth"] + 0.1)
    assert size["seg"] > 0.1
    box = Toolbox({op: "cpu" for op in ops}, ckpts, budget=budget, log=lines.append)
    first = box.run("caption", photo, "", ctx())
    box.run("depth", photo, "", ctx())
    assert box.is_loaded("caption") and box.is_loaded("depth") and not lines
    box.run("caption", photo, "", ctx())                 # depth is now the least recent
    import weakref
    depth = [weakref.ref(m) for m in memory.modules_of(box._model(box._keys("depth")[-1]))]
    box.run("seg", photo, "", ctx())
    assert depth and not any(r() for r in depth)         # freed at once, nothing holds it
    assert box.is_loaded("caption") and box.is_loaded("seg") and not box.is_loaded("depth")
    assert len(lines) == 1 and lines[0].startswith("unloaded depth@cpu") and \
        "to make room for seg@cpu" in lines[0], lines
    assert sum(box.memory_in_use().values()) <= budget.cpu
    assert box.status("depth") == "not loaded" and box.placement("depth") == ("", 0.0)
    again = box.run("caption", photo, "", ctx())         # nothing lost: the same answer
    assert again == first
    np.testing.assert_array_equal(box.run("depth", photo, "", ctx()),
                                  Toolbox({"depth": "cpu"}, ckpts).run("depth", photo, ""))


def test_a_running_model_is_never_unloaded(ckpts, photo, monkeypatch):
    size = _sizes(ckpts, photo, ("caption",))
    lines = []
    box = Toolbox({"caption": "cpu", "depth": "cpu"}, ckpts, log=lines.append,
                  budget=memory.Budget.from_mib(cpu_mib=size["caption"] + 0.01))
    from vision_dialogue.vfm.models import blip
    inside, go = threading.Event(), threading.Event()
    run = blip.Captioner.run

    def slow(self, rgb):
        inside.set()
        assert go.wait(60)
        return run(self, rgb)
    monkeypatch.setattr(blip.Captioner, "run", slow)
    result = {}
    goal = threading.Thread(
        target=lambda: result.setdefault("caption", box.run("caption", photo, "")))
    goal.start()
    assert inside.wait(60)
    box.run("depth", photo, "", ctx())                   # needs room: only caption holds any
    assert box.is_loaded("caption") and box.is_loaded("depth")
    assert any("nothing idle to unload" in line and "caption@cpu" in line for line in lines)
    go.set()
    goal.join(60)
    assert isinstance(result["caption"], str) and result["caption"]
    box.run("depth", photo, "", ctx())                   # caption idle now, depth in use: stays
    assert box.is_loaded("depth")


def test_shared_weights_count_once(ckpts, photo):
    """text2image and a ControlNet tool share one SD UNet/VAE/text encoder."""
    box = Toolbox({"text2image": "cpu", "canny2image": "cpu"}, ckpts)
    box.run("text2image", None, "a cat", ctx())
    alone = sum(box.memory_in_use().values())
    box.run("canny2image", photo, "a cat", ctx())
    both = sum(box.memory_in_use().values())
    t2i, cn = box.placement("text2image")[1], box.placement("canny2image")[1]
    assert abs(alone / memory.MIB - t2i) < 0.01
    assert abs((both - alone) / memory.MIB - cn) < 0.01 and 0 < cn < t2i


def test_budget_parameters_are_checked():
    with pytest.raises(ValueError, match="MiB"):
        memory.Budget.from_mib(cpu_mib=-1)
    assert memory.Budget().describe() == "gpu unbounded, cpu unbounded"
    assert memory.device_kind("cuda:1") == "gpu" and memory.canonical("cuda") == "cuda:0"


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_offload_moves_an_idle_gpu_model_to_the_cpu_and_back(ckpts, photo):
    size = _sizes(ckpts, photo, ("caption",))
    lines = []
    box = Toolbox({"caption": "cuda", "depth": "cuda"}, ckpts, log=lines.append,
                  budget=memory.Budget.from_mib(gpu_mib=size["caption"] / 2 + 0.01,
                                                offload=True))
    box.run("caption", photo, "")
    box.run("depth", photo, "")
    assert box.placement("caption")[0] == "cpu (offloaded)" and "offloaded" in lines[0]
    box.run("caption", photo, "")
    assert box.placement("caption")[0] == "cuda:0"
