"""vision_dialogue: vision-enabled dialogue for social robots on ROS 2.

When run from a source checkout, the generated interfaces (vision_dialogue.msg, .srv,
.action) live in the colcon install tree; extend_path merges that directory into this
package so `import vision_dialogue.msg` works from either place.
"""
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)
