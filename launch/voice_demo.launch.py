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

Includes bringup.launch.py with setup:=voice_demo; every argument of that file applies (see
`--show-args`). Mirrors `bringup voice_demo` (both read vision_dialogue/cli/setups.py).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource


def generate_launch_description():
    launch_dir = os.path.join(get_package_share_directory('vision_dialogue'), 'launch')
    return LaunchDescription([IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(launch_dir, 'bringup.launch.py')),
        launch_arguments={"setup": "voice_demo"}.items())])
