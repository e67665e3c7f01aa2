"""Every topic, service and action name the package uses, defined once, with what it carries.

Names without a leading `/` are relative (they follow the namespace and remappings). The
skills (`skill/say`, `skill/ask`, `skill/chat`) keep ROS4HRI's names, so a robot in the root
namespace serves `/skill/say` as communication_skills does; `intents` is hri_actions_msgs'.
`ENDPOINTS` is the table the documentation's reference page is generated from; QoS profiles
themselves live in ros/qos.py.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Endpoint:
    """One topic, service or action: its name, type, who talks to whom, QoS, and what it is."""

    name: str
    kind: str           # "topic", "service" or "action"
    type: str
    flow: str
    qos: str
    what: str


# --- camera --------------------------------------------------------------------------------
INTERFACES = "vision_dialogue_interfaces"
"""The package of our messages, services and actions (interfaces/vision_dialogue_interfaces)."""

IMAGE_TOPIC = "camera/image_raw"
STREAM_TOPIC = "camera/stream/image_raw"
USERS_TOPIC = "camera/users"
VISUAL_EVENTS_TOPIC = "camera/events"       # events node -> manager: what was seen between frames
# --- dialogue ------------------------------------------------------------------------------
UTTERANCE_TOPIC = "dialogue/utterance"
REPLY_TOPIC = "dialogue/reply"
PARTIAL_TOPIC = "dialogue/partial"          # speech node -> manager: the words so far of a line
HEARING_TOPIC = "dialogue/hearing"          # speech node -> manager: the person speaks (Bool)
SPOKEN_TOPIC = "dialogue/spoken"            # speech node -> anyone: a reply turn began, ended
CANCEL_REPLY_TOPIC = "dialogue/cancel_reply"  # manager -> speech node: stop saying turn N
PROMPT_STATE_TOPIC = "dialogue/prompt_state"
SPEECH_STATE_TOPIC = "dialogue/speech_state"
RECORDS_TOPIC = "dialogue/events"           # manager -> monitor: its transcript records (JSON)
FACE_RECORDS_TOPIC = "dialogue/face"        # speech node -> manager: face records, JSON
TOOL_IMAGE_TOPIC = "dialogue/tool_image"
SHARED_IMAGE_TOPIC = "dialogue/shared_image"
AUDIO_INPUT_TOPIC = "audio/input"
AUDIO_OUTPUT_TOPIC = "audio/output"
# --- the robot's face ----------------------------------------------------------------------
FACE_EXPRESSION_TOPIC = "robot_face/expression"   # hri_msgs/Expression: the robot's face
FACE_GESTURE_TOPIC = "robot_face/gesture"         # std_msgs/String: a Furhat-style gesture, JSON
FACE_GAZE_TOPIC = "robot_face/gaze_target"        # geometry_msgs/PointStamped: where eyes look
# --- the application -----------------------------------------------------------------------
SAY_ACTION = "skill/say"
ASK_ACTION = "skill/ask"
CHAT_ACTION = "skill/chat"
INTENTS_TOPIC = "intents"
# --- visual tools --------------------------------------------------------------------------
LIST_TOOLS_SERVICE = "vfm/list_tools"
VFM_ACTIONS = ("vfm/image_to_text", "vfm/image_to_image", "vfm/text_to_image")
# --- standard interfaces (vision_msgs, ROS4HRI / REP-155) ---------------------------------
DETECTIONS_TOPIC = "detections"
LABEL_INFO_TOPIC = "label_info"
ROBOT_SPEAKING_TOPIC = "/robot_speaking"
VOICES_TRACKED_TOPIC = "/humans/voices/tracked"
PERSONS_TRACKED_TOPIC = "/humans/persons/tracked"
BODIES_TRACKED_TOPIC = "/humans/bodies/tracked"
FACES_TRACKED_TOPIC = "/humans/faces/tracked"
PERSONS_KNOWN_TOPIC = "/humans/persons/known"
CANDIDATE_MATCHES_TOPIC = "/humans/candidate_matches"
HRI_KINDS = ("faces", "bodies", "voices", "persons")  # each id has its own topics: hri_topic
PEOPLE_ENROL_SERVICE = "people/enrol"
PEOPLE_FORGET_SERVICE = "people/forget"
PEOPLE_LIST_SERVICE = "people/list"
PEOPLE_STATE_TOPIC = "people/state"     # std_msgs/String JSON: who is in view, for the monitor
PEOPLE_FORGOTTEN_TOPIC = "people/forgotten"
PEOPLE_SPEAKERS_TOPIC = "people/speakers"
# --- ROS-wide ------------------------------------------------------------------------------
DIAGNOSTICS_TOPIC = "/diagnostics"                # diagnostic_msgs/DiagnosticArray, every node
CLOCK_TOPIC = "/clock"

_RELIABLE = "reliable, depth 10"
_LATCHED = "reliable, transient local"

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(IMAGE_TOPIC, "topic", "sensor_msgs/Image", "camera → manager, detector",
             "reliable, depth 5 / the subscriber follows the publisher (`image_qos: auto`)",
             "a frame every `frame_period` s (bgr8; rgb8, mono8, bgra8, rgba8 read)"),
    Endpoint(IMAGE_TOPIC + "/compressed", "topic", "sensor_msgs/CompressedImage",
             "camera → manager, detector", "as the raw topic",
             "the same frame as JPEG; the name follows the resolved image topic "
             "(image_transport)"),
    Endpoint(STREAM_TOPIC, "topic", "sensor_msgs/Image (+ /compressed)", "camera → events node",
             "best effort, depth 5", "the fast stream at `publish_rate`, only while someone "
             "listens"),
    Endpoint(USERS_TOPIC, "topic", f"{INTERFACES}/DetectedUsers", "camera (Furhat) → manager",
             _RELIABLE, "the users the Furhat tracks"),
    Endpoint(VISUAL_EVENTS_TOPIC, "topic", f"{INTERFACES}/VisualEvent",
             "events node, any detector → manager", "reliable, depth 10 / depth 50",
             "waves, pointing, arrivals and scene changes between frames"),
    Endpoint(UTTERANCE_TOPIC, "topic", f"{INTERFACES}/Utterance", "speech → manager",
             "reliable, depth 10 / depth 50", "a line the person said"),
    Endpoint(PARTIAL_TOPIC, "topic", f"{INTERFACES}/Utterance", "speech → manager",
             _RELIABLE, "the words of a line so far (read ahead by a local model)"),
    Endpoint(HEARING_TOPIC, "topic", "std_msgs/Bool", "speech → manager", _RELIABLE,
             "true while the person speaks (summaries wait)"),
    Endpoint(REPLY_TOPIC, "topic", f"{INTERFACES}/Reply", "manager → speech",
             "reliable, depth 10 / depth 50", "the reply, streamed sentence by sentence"),
    Endpoint(SPOKEN_TOPIC, "topic", f"{INTERFACES}/Spoken", "speech → manager, anyone",
             _RELIABLE, "a reply turn began, a sentence was said, it ended or was interrupted"),
    Endpoint(CANCEL_REPLY_TOPIC, "topic", "std_msgs/UInt32", "manager → speech", _RELIABLE,
             "stop saying turn N (0: whatever is said)"),
    Endpoint(PROMPT_STATE_TOPIC, "topic", f"{INTERFACES}/PromptState", "manager → monitoring",
             _LATCHED + ", depth 1",
             "frames, summaries and lines in the prompt, rejects by cause"),
    Endpoint(SPEECH_STATE_TOPIC, "topic", f"{INTERFACES}/SpeechState", "speech → anyone",
             _LATCHED + ", depth 10", "IDLE, LISTENING, THINKING, SPEAKING"),
    Endpoint(RECORDS_TOPIC, "topic", "std_msgs/String", "manager → monitor, anyone",
             _LATCHED + ", depth 200", "every transcript record as JSON (frames with a "
             "thumbnail)"),
    Endpoint(FACE_RECORDS_TOPIC, "topic", "std_msgs/String", "speech → manager", _RELIABLE,
             "each expression the face showed, JSON"),
    Endpoint(TOOL_IMAGE_TOPIC, "topic", "sensor_msgs/Image", "manager → anyone", _RELIABLE,
             "the image a visual tool made"),
    Endpoint(SHARED_IMAGE_TOPIC, "topic", "sensor_msgs/Image", "anyone → manager", _RELIABLE,
             "an image the person shares (the tools can work on it)"),
    Endpoint(AUDIO_INPUT_TOPIC, "topic", f"{INTERFACES}/AudioChunk",
             "speech (local) → anyone; bags → speech with `audio_in: topic`",
             "reliable, depth 50", "the microphone's audio, 16-bit PCM"),
    Endpoint(AUDIO_OUTPUT_TOPIC, "topic", f"{INTERFACES}/AudioChunk", "speech (local) → anyone",
             _RELIABLE, "the robot's voice with the sentence's text"),
    Endpoint(FACE_EXPRESSION_TOPIC, "topic", "hri_msgs/Expression", "speech → a robot's face",
             _LATCHED + ", depth 1", "the robot's own expression"),
    Endpoint(FACE_GESTURE_TOPIC, "topic", "std_msgs/String", "speech → a robot's face",
             _RELIABLE, "a Furhat-style gesture, JSON"),
    Endpoint(FACE_GAZE_TOPIC, "topic", "geometry_msgs/PointStamped",
             "speech → a head or eye controller", _RELIABLE, "where the eyes look"),
    Endpoint(INTENTS_TOPIC, "topic", f"{INTERFACES}/Intent", "manager → application",
             _RELIABLE, "what the person asks the robot to do (hri_actions_msgs/Intent's "
             "fields)"),
    Endpoint(DETECTIONS_TOPIC, "topic", "vision_msgs/Detection2DArray",
             "detector (ours or a robot's) → manager", "any publisher QoS",
             "objects, faces, hands and words in a frame"),
    Endpoint(LABEL_INFO_TOPIC, "topic", "vision_msgs/LabelInfo", "a robot's detector → manager",
             "latched", "names for detectors that send class indices"),
    Endpoint(ROBOT_SPEAKING_TOPIC, "topic", "std_msgs/Bool", "speech → a ROS4HRI recogniser",
             _RELIABLE, "true while the robot talks"),
    Endpoint(VOICES_TRACKED_TOPIC, "topic", "hri_msgs/IdsList", "speech, ROS4HRI → manager",
             "latched", "voices heard (REP-155); `/humans/voices/<id>/speech` carries their "
             "lines"),
    Endpoint(PERSONS_TRACKED_TOPIC, "topic", "hri_msgs/IdsList",
             "people node, ROS4HRI → manager", "latched",
             "persons; `/humans/persons/<id>/{name,alias,voice_id,face_id,anonymous,"
             "engagement_status}`"),
    Endpoint(BODIES_TRACKED_TOPIC, "topic", "hri_msgs/IdsList", "ROS4HRI → manager", "latched",
             "bodies; `/humans/bodies/<id>/gesture` carries their gestures"),
    Endpoint(FACES_TRACKED_TOPIC, "topic", "hri_msgs/IdsList",
             "detector, ROS4HRI → manager, people node", "latched",
             "faces; `/humans/faces/<id>/{roi,expression,cropped}`"),
    Endpoint(PERSONS_KNOWN_TOPIC, "topic", "hri_msgs/IdsList", "people node → anyone",
             "latched", "every person the robot knows (enrolled), tracked or not"),
    Endpoint(CANDIDATE_MATCHES_TOPIC, "topic", "hri_msgs/IdsMatch", "people node → ROS4HRI",
             _RELIABLE, "a face or voice is (probably) this person, with a confidence"),
    Endpoint(PEOPLE_ENROL_SERVICE, "service", f"{INTERFACES}/srv/Enrol",
             "application → people node", "services' default",
             "remember a person of this session (the application has their consent)"),
    Endpoint(PEOPLE_FORGET_SERVICE, "service", f"{INTERFACES}/srv/Forget",
             "application, operator → people node", "services' default",
             "forget a person: nothing of them left in the store"),
    Endpoint(PEOPLE_LIST_SERVICE, "service", f"{INTERFACES}/srv/ListPeople",
             "application, operator → people node", "services' default",
             "the people the robot knows and their consent records"),
    Endpoint(PEOPLE_FORGOTTEN_TOPIC, "topic", f"{INTERFACES}/Forgotten", "people node → manager",
             _RELIABLE, "persons just forgotten: their lines and frames leave the transcripts"),
    Endpoint(PEOPLE_SPEAKERS_TOPIC, "topic", f"{INTERFACES}/LineSpeaker", "people node → manager",
             _RELIABLE, "who said each line (a voice print's match): whose facts it holds"),
    Endpoint(DIAGNOSTICS_TOPIC, "topic", "diagnostic_msgs/DiagnosticArray", "every node → anyone",
             _RELIABLE, "each node's health at 1 Hz (REP-107 levels)"),
    Endpoint(CLOCK_TOPIC, "topic", "rosgraph_msgs/Clock", "bag_play → every node",
             _RELIABLE, "a bag's time, for `use_sim_time`"),
    Endpoint(LIST_TOOLS_SERVICE, "service", f"{INTERFACES}/srv/ListTools",
             "manager, monitor → vfm_server", "services' default",
             "the visual tools, where each is loaded and its memory"),
    *(Endpoint(name, "action", f"{INTERFACES}/action/{kind}", "manager → vfm_server",
               "actions' default", what) for name, kind, what in zip(
        VFM_ACTIONS, ("ImageToText", "ImageToImage", "TextToImage"),
        ("a caption, an answer, a count from an image", "an edited or analysed image",
         "an image from a prompt"))),
    Endpoint(SAY_ACTION, "action", f"{INTERFACES}/action/Say", "application → manager",
             "actions' default", "say a line (ROS4HRI communication_skills)"),
    Endpoint(ASK_ACTION, "action", f"{INTERFACES}/action/Ask", "application → manager",
             "actions' default", "ask and read the answers into a JSON schema"),
    Endpoint(CHAT_ACTION, "action", f"{INTERFACES}/action/Chat", "application → manager",
             "actions' default", "a conversation with a purpose and results"),
)


def hri_topic(kind: str, hri_id: str, part: str) -> str:
    """One of a REP-155 face's, body's, voice's or person's own topics.

    `/humans/<kind>/<id>/<part>`: a face's roi, expression, cropped; a body's gesture; a
    voice's speech, is_speaking; a person's name, alias, face_id, voice_id, engagement_status.
    """
    if kind not in HRI_KINDS:
        raise ValueError(f"no REP-155 kind {kind!r} (one of {', '.join(HRI_KINDS)})")
    return f"/humans/{kind}/{hri_id}/{part}"
