"""The ROS-free VFM registry, the Visual ChatGPT prompt pieces and the `load` spec parser."""
import pytest

from vision_dialogue.vfm import registry
from vision_dialogue.vfm.devices import LoadSpecError, format_load, parse_load

EXPECTED_OPS = {"caption", "vqa", "detect", "text2image", "pix2pix", "remove", "replace",
                "canny", "line", "hed", "scribble", "pose", "depth", "normal", "seg",
                "canny2image", "line2image", "hed2image", "scribble2image", "pose2image",
                "depth2image", "normal2image", "seg2image", "segment", "segmentobject",
                "outpaint"}


def test_tool_set_is_complete_and_ops_are_file_name_safe():
    ops = [t.op for t in registry.TOOLS]
    assert set(ops) == EXPECTED_OPS and len(ops) == len(set(ops))
    assert all("_" not in op and "/" not in op for op in ops)
    names = [t.name for t in registry.TOOLS]
    assert len(names) == len(set(names))


def test_visual_chatgpt_names_and_usage_texts():
    assert registry.get("caption").name == "Get Photo Description"
    assert registry.get("vqa").name == "Answer Question About The Image"
    assert registry.get("text2image").name == "Generate Image From User Input Text"
    assert registry.get("pix2pix").name == "Instruct Image Using Text"
    assert registry.get("remove").name == "Remove Something From The Photo"
    assert registry.get("replace").name == "Replace Something From The Photo"
    assert registry.get("canny").name == "Edge Detection On Image"
    assert registry.get("canny2image").name == "Generate Image Condition On Canny Image"
    assert registry.get("segment").name == "Segment the Image"
    assert registry.get("segmentobject").name == "Segment the given object"
    assert registry.get("outpaint").name == "Extend An Image"
    for t in registry.TOOLS:
        assert t.description.startswith("useful when"), t.op
        assert "input to this tool" in t.description, t.op
        if t.action_type != registry.TEXT_TO_IMAGE:
            assert "image_file" in t.description, t.op
        if t.action_type != registry.IMAGE_TO_TEXT:
            assert "file name of the" in t.description and "image" in t.description, t.op
        assert t.action_type in (registry.IMAGE_TO_TEXT, registry.IMAGE_TO_IMAGE,
                                 registry.TEXT_TO_IMAGE)
        for ck in t.checkpoints:
            assert ck in registry.DEFAULT_CHECKPOINTS


def test_action_types_and_weight_free_tools():
    by = {k: {t.op for t in registry.TOOLS if t.action_type == k}
          for k in (registry.IMAGE_TO_TEXT, registry.TEXT_TO_IMAGE)}
    assert by[registry.IMAGE_TO_TEXT] == {"caption", "vqa", "detect"}
    assert by[registry.TEXT_TO_IMAGE] == {"text2image"}
    assert set(registry.WEIGHT_FREE) == {"canny", "line", "scribble", "pose"}
    assert registry.get("canny2image").checkpoints == ("sd", "controlnet_canny")


def test_default_checkpoints_are_visual_chatgpts():
    d = registry.DEFAULT_CHECKPOINTS
    assert d["caption"] == "Salesforce/blip-image-captioning-base"
    assert d["vqa"] == "Salesforce/blip-vqa-base"
    assert d["sd"] == "runwayml/stable-diffusion-v1-5"
    assert d["pix2pix"] == "timbrooks/instruct-pix2pix"
    assert d["controlnet_line"] == "lllyasviel/sd-controlnet-mlsd"
    assert d["controlnet_pose"] == "lllyasviel/sd-controlnet-openpose"
    assert d["sam"] == "facebook/sam-vit-huge"          # sam_vit_h_4b8939.pth in TaskMatrix
    assert d["grounding"] == "IDEA-Research/grounding-dino-tiny"   # its Swin-T OGC
    assert d["inpaint"] == "runwayml/stable-diffusion-inpainting"


def test_unknown_tool_error_names_known_ops():
    with pytest.raises(KeyError, match="caption"):
        registry.get("nope")


def test_prompt_pieces():
    tools = [registry.get("caption"), registry.get("canny")]
    text = registry.system_prompt(tools, bot="Robot")
    assert text.startswith("Robot is designed")
    assert "> Get Photo Description: useful when" in text
    assert "> Edge Detection On Image: useful when" in text
    assert "should be one of [Get Photo Description, Edge Detection On Image]" in text
    assert "Answer Question About The Image" not in text
    suffix = registry.suffix("Human: hi", "what is this?", bot="Robot")
    assert "New input: what is this?" in suffix and "Human: hi" in suffix
    human, ai = registry.image_received_turn("ab12cd34.png", "a cat on a sofa")
    assert "provide a figure named ab12cd34.png" in human
    assert "The description is: a cat on a sofa." in human and ai == "Received."


def test_parse_action_input():
    assert registry.parse_action_input(registry.get("vqa"), "a.png, what, is it?") == \
        ("a.png", "what, is it?")
    assert registry.parse_action_input(registry.get("canny"), " a.png ") == ("a.png", "")
    assert registry.parse_action_input(registry.get("text2image"), "a cat, red") == (
        "", "a cat, red")


def test_parse_load_ops_classes_all_and_overrides():
    want = {"caption": "cuda:0", "text2image": "cpu"}
    assert parse_load("caption_cuda:0,Text2Image_cpu") == want
    d = parse_load("ImageEditing_cuda:1")
    assert d == {"remove": "cuda:1", "replace": "cuda:1"}
    d = parse_load("all_cpu,Text2Image_cuda:0")
    assert len(d) == len(registry.TOOLS) and d["text2image"] == "cuda:0" and d["caption"] == "cpu"
    assert list(d) == [t.op for t in registry.TOOLS]
    devices = {"vqa": "mps", "canny": "cpu"}
    assert parse_load(format_load(devices)) == devices


@pytest.mark.parametrize("spec,msg", [
    ("", "empty"), ("caption", "not <tool>_<device>"), ("caption_gpu", "device 'gpu'"),
    ("Captioner_cpu", "unknown tool 'Captioner'"), ("caption_cuda:x", "device"),
])
def test_parse_load_errors(spec, msg):
    with pytest.raises(LoadSpecError, match=msg):
        parse_load(spec)


def test_every_tool_names_a_model_class_and_method_it_can_run():
    """The registry is the one table.

    Each tool's model exists, its class is importable and has the method the tool calls, with the
    arguments the tool passes.
    """
    import importlib
    import inspect
    for t in registry.TOOLS:
        m = registry.MODELS[t.model]
        module, cls = m.cls.split(".")
        klass = getattr(importlib.import_module(f"vision_dialogue.vfm.models.{module}"), cls)
        method = getattr(klass, t.call)
        params = [p for p in inspect.signature(method).parameters if p != "self"]
        assert len(params) >= len(t.args), (t.op, params, t.args)
        assert set(t.args) <= {"rgb", "text", "helper", "ctx"}
        assert ("helper" in t.args) == bool(t.helper), t.op
        assert not t.helper or t.helper in registry.MODELS
        assert ("text" in t.args) == t.needs_text, t.op
        for key in (m.checkpoint, m.base_checkpoint):
            assert not key or key in registry.DEFAULT_CHECKPOINTS, (t.op, key)
