"""variants/choice.py: a file given chooses the variant that plays it (ROS-free)."""
import pytest

from vision_dialogue.variants import AUTO, choose_variant

FILES = {"video": ("video_path", ""), "folder": ("folder_path", "")}


def files(**given):
    return {k: (name, given.get(k, "")) for k, (name, _) in FILES.items()}


def test_auto_takes_the_variant_whose_file_is_given_else_the_fallback():
    assert choose_variant("source", AUTO, files(), "webcam") == "webcam"
    assert choose_variant("source", AUTO, files(video="/v.mp4"), "webcam") == "video"
    assert choose_variant("source", AUTO, files(folder="/imgs"), "webcam") == "folder"
    assert choose_variant("source", AUTO, files(video="  "), "webcam") == "webcam"   # blank


def test_an_explicit_kind_that_agrees_or_has_no_file_stands():
    assert choose_variant("source", "video", files(video="/v.mp4"), "webcam") == "video"
    assert choose_variant("source", "furhat", files(), "webcam") == "furhat"


def test_contradictions_name_both_parameters():
    with pytest.raises(ValueError) as e:
        choose_variant("source", "webcam", files(video="/v.mp4"), "webcam")
    msg = str(e.value)
    assert msg.startswith("video_path=") and "source=webcam" in msg and "source:=video" in msg
    with pytest.raises(ValueError) as e:
        choose_variant("source", AUTO, files(video="/v.mp4", folder="/imgs"), "webcam")
    assert str(e.value).startswith("source:") and "/v.mp4" in str(e.value) \
        and "/imgs" in str(e.value)
