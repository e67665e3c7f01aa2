"""Names of the topics and actions between our nodes and for applications (relative, remappable).

The skills (`skill/say`, `skill/ask`, `skill/chat`) keep ROS4HRI's names, so a robot in the root
namespace serves `/skill/say` as communication_skills does; `intents` is hri_actions_msgs'.
"""

SAY_ACTION = "skill/say"
ASK_ACTION = "skill/ask"
CHAT_ACTION = "skill/chat"
INTENTS_TOPIC = "intents"
SPOKEN_TOPIC = "dialogue/spoken"            # speech node -> anyone: a reply turn began, ended
CANCEL_REPLY_TOPIC = "dialogue/cancel_reply"  # manager -> speech node: stop saying turn N
REPLY_TOPIC = "dialogue/reply"
PARTIAL_TOPIC = "dialogue/partial"          # speech node -> manager: the words so far of a line
HEARING_TOPIC = "dialogue/hearing"          # speech node -> manager: the person speaks (Bool)
FACE_EXPRESSION_TOPIC = "robot_face/expression"   # hri_msgs/Expression: the robot's face
FACE_GESTURE_TOPIC = "robot_face/gesture"         # std_msgs/String: a Furhat-style gesture, JSON
FACE_GAZE_TOPIC = "robot_face/gaze_target"        # geometry_msgs/PointStamped: where eyes look
FACE_RECORDS_TOPIC = "dialogue/face"              # speech node -> manager: face records, JSON
DIAGNOSTICS_TOPIC = "/diagnostics"                # diagnostic_msgs/DiagnosticArray, every node
VISUAL_EVENTS_TOPIC = "camera/events"       # events node -> manager: what was seen between frames
RECORDS_TOPIC = "dialogue/events"           # manager -> monitor: its transcript records (JSON)
