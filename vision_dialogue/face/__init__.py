"""The robot's face without ROS: what a line expresses, the gestures that show it, gaze aversion.

affect (a line -> valence, arousal and a ROS4HRI expression name; the robot's reaction),
gestures (Furhat-style gestures: ranges, clamping, generated frames per expression), gaze
(when the eyes look away while the robot speaks) and controller (the face that follows the
conversation: the speech node's turn events in, expressions, gestures and gaze out, never
blocking speech).

May import: nothing else of vision_dialogue.
"""
