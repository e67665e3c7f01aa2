"""Offline voice demo: the demo video, the demo script spoken, the manager.

The demo video as camera + the demo script spoken into the local voice + the manager; the
robot speaks into WAV files.

    ros2 launch vision_dialogue voice_demo.launch.py [log_level:=debug]
        [video_path:=/my/video.mp4] [params_file:=/path/to/my_voice_demo_setup.yaml]

Everything runs offline on the embedded local model (config/voice_demo_setup.yaml): the demo
script is synthesised once into WAV files that play through the microphone path, and the
robot's sentences are written to runs/voice/. When the script is over, the speech node exits
and the whole launch shuts down. A microphone and speaker instead: a params_file with
audio_in: mic and audio_out_dir: "".

The arguments: `--show-args`. Mirrors `bringup voice_demo`
(both read vision_dialogue/ros/setups.py; the description is
vision_dialogue/ros/launch_description.py).
"""
from vision_dialogue.ros.launch_description import setup_launch_description


def generate_launch_description():
    return setup_launch_description('voice_demo')
