"""What the robot's speech tells a ROS4HRI stack (REP-155).

* ``/robot_speaking`` (std_msgs/Bool): true while the robot talks, false after, published on
  each change (and false at start), so ROS4HRI recognisers such as asr_vosk stop hearing the
  robot;
* what our recogniser heard as ``/humans/voices/<speaker>/speech`` (hri_msgs/LiveSpeech, the
  final result) and the voice in ``/humans/voices/tracked`` (hri_msgs/IdsList), where hri_msgs
  is installed. The voice id is the utterance's speaker made a ROS name (``anonymous_speaker``
  when there is none, as asr_vosk names it).
"""
from __future__ import annotations

import re

from sensor_msgs.msg import Image
from std_msgs.msg import Bool

from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.topics import hri_topic
from vision_dialogue.ros.image_msgs import to_image_msg
from vision_dialogue.ros.qos import LATCHED_QOS, RELIABLE_QOS, no_event_handlers

ANONYMOUS_VOICE = "anonymous_speaker"


def voice_id(speaker: str) -> str:
    """A speaker label as a ROS4HRI voice id (a valid topic name token)."""
    token = re.sub(r"[^A-Za-z0-9_]", "_", speaker.strip()).strip("_")
    if not token or token in ("visitor", "user"):
        return ANONYMOUS_VOICE
    return token if token[0].isalpha() else f"v_{token}"


class HriSpeechOutput:
    """Publishers of /robot_speaking and, with hri_msgs, of the voices heard.

    The expected speaker's voice (`speaker`, e.g. the speech node's speaker parameter) is
    announced from the start, and the tracked list every second, as ROS4HRI nodes do: a
    consumer then subscribes to the speech topic before the first utterance is on it.
    """

    def __init__(self, node, speaker: str = ""):
        self.node = node
        self.speaking_pub = node.create_publisher(Bool, pm.ROBOT_SPEAKING_TOPIC, RELIABLE_QOS)
        self._speaking: bool | None = None
        self._speech_pubs: dict[str, object] = {}
        self.tracked_pub = None
        if pm.IdsList is not None:
            # latched, as REP-155 publishers do: late and latched subscribers get the list
            self.tracked_pub = node.create_publisher(pm.IdsList, pm.VOICES_TRACKED_TOPIC,
                                                     LATCHED_QOS)
            self._voice(voice_id(speaker))
            node.create_timer(1.0, self._publish_tracked)
        self.robot_speaking(False)

    def _voice(self, vid: str):
        if vid not in self._speech_pubs:
            self._speech_pubs[vid] = self.node.create_publisher(
                pm.LiveSpeech, hri_topic("voices", vid, "speech"), RELIABLE_QOS)
            self._publish_tracked()
        return self._speech_pubs[vid]

    def _publish_tracked(self, header=None) -> None:
        msg = pm.IdsList(ids=sorted(self._speech_pubs))
        if header is not None:
            msg.header = header
        else:
            msg.header.stamp = self.node.get_clock().now().to_msg()
        self.tracked_pub.publish(msg)

    def robot_speaking(self, speaking: bool) -> None:
        if speaking != self._speaking:
            self._speaking = speaking
            self.speaking_pub.publish(Bool(data=speaking))

    def heard(self, utterance) -> None:
        """An utterance our recogniser published, as the speaker's LiveSpeech final."""
        self._live_speech(utterance, final=utterance.text)

    def hearing(self, utterance) -> None:
        """The words so far of a line still being said, as LiveSpeech incremental."""
        self._live_speech(utterance, incremental=utterance.text)

    def _live_speech(self, utterance, **text) -> None:
        if self.tracked_pub is None:
            return
        pub = self._voice(voice_id(utterance.speaker))
        pub.publish(pm.LiveSpeech(header=utterance.header, confidence=float(
            max(utterance.confidence, 0.0)), locale=utterance.language, **text))


class HriFacesOutput:
    """REP-155 faces: /humans/faces/tracked and, per face, ``roi``, ``expression``, ``cropped``.

    `publish(header, faces, bgr)` with faces as (id, (x, y, w, h) relative box, score, smiling
    or None); a face's topics go when it is no longer tracked. The crop (the box and a
    `CROP_MARGIN` around it, bgr8) is latched: a person manager subscribes when it reads the
    face's id in the list, and gets the crop of a face that one frame showed.
    """

    CROP_MARGIN = 0.25

    def __init__(self, node):
        self.node = node
        self.tracked_pub = node.create_publisher(pm.IdsList, pm.FACES_TRACKED_TOPIC,
                                                 LATCHED_QOS)
        self._pubs: dict[str, tuple] = {}

    def publish(self, header, faces, bgr=None) -> None:
        ids = [f[0] for f in faces]
        pm.follow_ids(self._pubs, ids, self._face_publishers,
                      lambda pubs: [self.node.destroy_publisher(p) for p in pubs])
        self.tracked_pub.publish(pm.IdsList(header=header, ids=ids))
        for fid, (x, y, w, h), score, smiling in faces:
            roi_pub, expression_pub, cropped_pub = self._pubs[fid]
            if bgr is not None:
                cropped_pub.publish(to_image_msg(self.crop(bgr, (x, y, w, h)),
                                                 stamp=header.stamp, frame_id=header.frame_id))
            roi_pub.publish(pm.NormalizedRegionOfInterest2D(
                header=header, xmin=float(x), ymin=float(y), xmax=float(x + w),
                ymax=float(y + h), c=float(score)))
            if smiling is not None:     # geometry, not an emotion model: happy or neutral
                expression_pub.publish(pm.Expression(
                    header=header, expression="happy" if smiling else "neutral",
                    valence=0.5 if smiling else 0.0, confidence=0.5))

    def _face_publishers(self, fid: str) -> tuple:
        quiet = no_event_handlers("publisher")         # destroyed when the face goes
        return tuple(self.node.create_publisher(kind, hri_topic("faces", fid, part), qos,
                                                **quiet)
                     for kind, part, qos in ((pm.NormalizedRegionOfInterest2D, "roi",
                                              RELIABLE_QOS),
                                             (pm.Expression, "expression", RELIABLE_QOS),
                                             (Image, "cropped", LATCHED_QOS)))

    @classmethod
    def crop(cls, bgr, box):
        """The face's box (relative x, y, w, h) and a margin around it, in pixels."""
        h, w = bgr.shape[:2]
        x, y, bw, bh = box
        mx, my = bw * cls.CROP_MARGIN, bh * cls.CROP_MARGIN
        x0, y0 = max(0, int((x - mx) * w)), max(0, int((y - my) * h))
        x1, y1 = min(w, int((x + bw + mx) * w) + 1), min(h, int((y + bh + my) * h) + 1)
        return bgr[y0:y1, x0:x1]
