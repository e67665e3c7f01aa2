"""Events between frames: the detector's timing logic, real photos, and the timeline."""
import cv2
import numpy as np
import pytest
import skimage.data

from vision_dialogue.core.entries import SeenEntry
from vision_dialogue.core.summariser import SummaryRule, bounded, merged_text
from vision_dialogue.core.timeline import EventItem, FrameItem, SummaryItem, Timeline
from vision_dialogue.perception.events import EventConfig, EventDetector, Glimpse
from vision_dialogue.perception.observer import OPEN_HAND, POINTING, THUMBS_UP, HandSeen

FPS = 8.0


def run(detector, glimpses):
    out = []
    for g in glimpses:
        out += detector.update(g)
    return out


def glimpses(n, people=1, hands=lambda i: [], start=0.0, **kw):
    return [Glimpse(start + i / FPS, people, hands(i), **kw) for i in range(n)]


def kinds(events):
    return [e.kind for e in events]


def test_a_hand_swinging_sideways_is_a_wave_on_its_side_of_the_image():
    d = EventDetector()
    swing = [0.20, 0.26, 0.32, 0.26, 0.20, 0.26, 0.32, 0.26]
    waving = glimpses(8, hands=lambda i: [HandSeen(OPEN_HAND, swing[i], 0.3)], start=1.0)
    events = run(d, glimpses(3) + waving)
    assert kinds(events) == ["arrived", "wave"]
    assert events[1].text == "someone on the left waved" and events[1].where == "on the left"


def test_an_open_hand_held_still_is_a_raised_hand_not_a_wave():
    events = run(EventDetector(), glimpses(3) + glimpses(
        12, hands=lambda i: [HandSeen(OPEN_HAND, 0.8 + 0.005 * (i % 2), 0.3)], start=1.0))
    assert kinds(events) == ["arrived", "raised_hand"]
    assert events[1].text == "someone on the right raised a hand"


def test_a_wave_judged_in_few_frames_is_not_a_raised_hand():
    """A wave sampled sparsely is neither a wave nor a raised hand.

    The hand where MediaPipe placed it in the people demo's frames that a loaded events node
    judged (2.5 a second): too few swings for a wave, and it moved, so not a raise either.
    """
    seen = [(5.0, 0.869), (5.5, 0.868), (5.625, 0.841), (6.0, 0.869)]
    events = run(EventDetector(), glimpses(3) + [
        Glimpse(t, 1, [HandSeen(OPEN_HAND, x, 0.3)]) for t, x in seen])
    assert kinds(events) == ["arrived"]


def test_a_wave_looked_at_one_and_a_half_times_a_second_is_a_wave():
    """A loaded events node sees the demo's wave (one swing a second) as a slower one.

    The hand where MediaPipe placed it in the people demo's frames 1.5 a second: two changes
    of direction take 3.3 s, longer than `wave_window_s`; a hand moved once is still no wave.
    """
    xs = [0.868, 0.840, 0.909, 0.841, 0.841, 0.908, 0.841, 0.841, 0.908, 0.841]
    looks = [Glimpse(5.0 + i / 1.5, 1, [HandSeen(OPEN_HAND, x, 0.3)]) for i, x in enumerate(xs)]
    events = run(EventDetector(), glimpses(3) + looks)
    assert kinds(events) == ["arrived", "wave"] and events[1].where == "on the right"
    assert 5.0 + 4 / 1.5 <= events[1].stamp <= 5.0 + 6 / 1.5
    once = run(EventDetector(EventConfig(hold_s=30)), glimpses(3) + [
        Glimpse(5.0 + i / 1.5, 1, [HandSeen(OPEN_HAND, x, 0.3)])
        for i, x in enumerate([0.84, 0.84, 0.91, 0.91, 0.91, 0.91])])
    assert kinds(once) == ["arrived"]


def test_a_raised_hand_needs_enough_frames_to_be_seen_still():
    hand = [HandSeen(OPEN_HAND, 0.8, 0.3)]
    two = run(EventDetector(), glimpses(3) + [Glimpse(1.0, 1, hand), Glimpse(2.5, 1, hand)])
    assert kinds(two) == ["arrived"]
    three = run(EventDetector(), glimpses(3) + [
        Glimpse(t, 1, hand) for t in (1.0, 1.6, 2.2)])
    assert kinds(three) == ["arrived", "raised_hand"]


def test_small_jitter_is_not_a_wave():
    jitter = [0.5, 0.51, 0.5, 0.51, 0.5, 0.51, 0.5, 0.51]
    events = run(EventDetector(EventConfig(hold_s=10)), glimpses(
        8, hands=lambda i: [HandSeen(OPEN_HAND, jitter[i], 0.3)]))
    assert "wave" not in kinds(events)


@pytest.mark.parametrize("gesture,kind,text", [
    (POINTING, "point", "someone in the middle pointed"),
    (THUMBS_UP, "thumbs_up", "someone in the middle gave a thumbs up")])
def test_held_gestures_need_confirming_frames_and_are_not_repeated(gesture, kind, text):
    d = EventDetector(EventConfig(confirm_frames=3, cooldown_s=5.0))
    hand = [HandSeen(gesture, 0.5, 0.4)]
    # one frame alone (a misdetection) is not an event
    flicker = glimpses(6, hands=lambda i: hand if i == 2 else [])
    assert kind not in kinds(run(d, flicker))
    held = run(d, glimpses(16, hands=lambda i: hand if i % 8 < 4 else [], start=2.0))
    assert [e.text for e in held if e.kind == kind] == [text]     # second hold: cooldown
    later = run(d, glimpses(4, hands=lambda i: hand, start=10.0))
    assert kinds(later) == [kind]


def test_arrivals_and_departures_need_the_count_to_settle():
    d = EventDetector(EventConfig(presence_frames=3))
    seq = [0, 0, 1, 0, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0]
    events = run(d, [Glimpse(i * 2.0, n) for i, n in enumerate(seq)])
    assert [e.text for e in events] == [
        "a person came into view (one person in view now)",
        "a person came into view (two people in view now)",
        "a person left (one person in view now)",
        "a person left (no one in view now)"]


def test_disabled_kinds_are_not_reported():
    d = EventDetector(EventConfig(kinds=("left",)))
    assert kinds(run(d, glimpses(4) + glimpses(4, people=0, start=1))) == ["left"]


@pytest.mark.parametrize("bad", [dict(confirm_frames=0), dict(cooldown_s=0),
                                 dict(kinds=("wave", "dance"))])
def test_bad_settings_name_themselves(bad):
    with pytest.raises(ValueError, match=list(bad)[0]):
        EventConfig(**bad)


@pytest.fixture(scope="module")
def detector_on_photos():
    d = EventDetector(EventConfig(confirm_frames=2, presence_frames=2, cooldown_s=0.5))
    yield d
    d.close()


def _bgr(rgb, size=(320, 240)):
    return cv2.resize(rgb[:, :, ::-1], size, interpolation=cv2.INTER_AREA)


def test_real_photos_arrival_departure_and_scene_change(detector_on_photos):
    coffee, astronaut = _bgr(skimage.data.coffee()), _bgr(skimage.data.astronaut())
    chelsea = _bgr(skimage.data.chelsea())
    stream = [coffee] * 3 + [astronaut] * 3 + [coffee] * 3 + [chelsea] * 3
    events = []
    for i, frame in enumerate(stream):
        events += detector_on_photos.observe(frame, i * 0.5)
    assert kinds(events) == ["arrived", "left", "scene_change"], events
    assert events[0].stamp == 2.0 and events[2].stamp == 5.0


# -- the timeline ------------------------------------------------------------------------------
def _frame(tl, obs=""):
    from vision_dialogue.common.images import Frame
    f = Frame(np.zeros((8, 8, 3), np.uint8))
    f.observation = obs
    return tl.add_frame(f)


def test_events_go_with_the_frames_a_summary_replaces():
    tl = Timeline()
    tl.add_line("user", "hi")
    tl.add_event("someone waved")           # right before the run: goes with it
    f1 = _frame(tl, "one person")
    tl.add_event("someone pointed")
    f2 = _frame(tl, "one person")
    f3 = _frame(tl, "no one")
    tl.add_event("a person left")          # after the run's last frame: stays
    f4 = _frame(tl, "no one")
    chosen = tl.take(SummaryRule(4, 3).due)
    assert chosen == [f1, f2, f3]
    span = tl.span(chosen)
    assert [getattr(i, "text", None) for i in span if isinstance(i, EventItem)] == [
        "someone waved", "someone pointed"]
    assert merged_text(span, "?") == "someone waved; then one person; then someone pointed; " \
                                     "then one person; then no one"
    tl.splice_summary(chosen, "they waved and pointed, then left")
    assert [type(i).__name__ for i in tl.snapshot()] == [
        "LineItem", "SummaryItem", "EventItem", "FrameItem"]
    assert tl.snapshot()[-1] is f4


def test_events_never_stop_the_bound_on_raw_frames():
    tl = Timeline()
    for i in range(9):
        _frame(tl, f"view {i}")
        tl.add_event(f"event {i}")
    items = bounded(tl.snapshot(), 3, "...")
    assert sum(isinstance(i, FrameItem) for i in items) == 3
    summaries = [i for i in items if isinstance(i, SummaryItem)]
    assert len(summaries) == 1 and "event 0" in summaries[0].text \
        and "view 5" in summaries[0].text
    assert isinstance(items[1], EventItem) and items[1].text == "event 5"


@pytest.mark.parametrize("vision", [True, False])
def test_events_reach_the_reply_prompt_in_arrival_order(vision):
    import json

    from fake_chat_backend import FakeChatBackend
    from vision_dialogue.core.conversation import Conversation, ConversationConfig
    from vision_dialogue.core.persona import load_persona
    be = FakeChatBackend(supports_images=vision)
    c = Conversation(be, load_persona(), ConversationConfig(n=4, m=3))
    seen = []
    c.add_listener(seen.append)
    try:
        c.add_frame(skimage.data.astronaut()[:, :, ::-1].copy())
        c.add_event("someone on the left waved", event="wave")
        c.set_people("user 3 in front of you", arrived=["3"])
        c.turn("What did I just do?")
        text = json.dumps(be.of_kind("reply")[-1][1])
        # a vision model reads each event as a note; a text-only one in the line of what it
        # saw since the last dialogue line ("Earlier you saw: ...; then someone ... waved")
        label = "You noticed: " if vision else "; then "
        waved, arrived = text.index(label + "someone on the left waved"), \
            text.index(label + "user 3 came into view")
        assert waved < arrived < text.index("What did I just do?")
        assert [e.text for e in seen if isinstance(e, SeenEntry)] == [
            "someone on the left waved", "user 3 came into view"]
        assert c.state()["events"] == 2
    finally:
        c.close()


def test_the_two_person_video_shows_arrivals_a_wave_and_departures(tmp_path):
    """The people demo's video, short, through the real detector (MediaPipe)."""
    from vision_dialogue.camera.people_video import PeopleSpec, build_people_video
    spec = PeopleSpec(seconds=20.0, anna=(1.0, 14.0), ben=(5.0, 18.0), wave=(8.0, 11.0))
    manifest = build_people_video(tmp_path / "people.avi", spec)
    assert manifest["frames"] == 160 and manifest["fps"] == 8.0
    cap = cv2.VideoCapture(str(tmp_path / "people.avi"))
    detector, events, i = EventDetector(), [], 0
    try:
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            if i % 2 == 0:                       # the events node's 4-5 frames a second
                events += detector.observe(frame, i / spec.fps)
            i += 1
    finally:
        detector.close()
    assert [(e.kind, e.where) for e in events] == [
        ("arrived", ""), ("arrived", ""), ("wave", "on the right"), ("left", ""), ("left", "")]
    wave = events[2]
    assert 8.0 < wave.stamp < 11.0
    assert 14.0 <= events[3].stamp < 15.0 and 18.0 <= events[4].stamp < 19.0


def test_events_a_history_fold_holds_stay_with_the_fold():
    tl = Timeline()
    tl.add_line("user", "hello " * 20)
    tl.add_event("someone waved")
    frames = [_frame(tl, f"view {i}") for i in range(4)]
    folded = tl.select_for_fold(budget_chars=10, keep_recent_lines=0)
    assert [type(i).__name__ for i in folded] == ["LineItem", "EventItem"]
    chosen = tl.take(SummaryRule(4, 3).due)
    assert tl.span(chosen) == chosen                    # the held event is not taken
    tl.splice_summary(chosen, "three views")
    tl.apply_fold(folded, "they said hello; someone waved")
    assert [type(i).__name__ for i in tl.snapshot()] == ["SummaryItem", "FrameItem"]
    assert tl.snapshot()[-1] is frames[-1]


def test_lights_off_is_a_scene_change_not_a_departure():
    d = EventDetector(EventConfig(presence_frames=2, confirm_frames=2))
    lit, dark = np.full((24, 32), 150, np.uint8), np.full((24, 32), 3, np.uint8)
    stream = [Glimpse(i, 1, thumbnail=lit) for i in range(3)]
    stream += [Glimpse(3 + i, 0, thumbnail=dark, dark=True) for i in range(3)]
    events = run(d, stream)
    assert kinds(events) == ["arrived", "scene_change"] and events[1].text == "it went dark"
