"""vision_dialogue: vision-enabled dialogue for social robots on ROS 2.

When run from a source checkout, the generated interfaces (vision_dialogue.msg, .srv,
.action) live in the colcon install tree; extend_path merges that directory into this
package so `import vision_dialogue.msg` works from either place.

`plugin_class` reads the tables where variants plug in (camera sources, speech backends):
below every room, so any of them may use it.
"""
from pkgutil import extend_path, resolve_name

__path__ = extend_path(__path__, __name__)


def plugin_class(table: dict, name: str, what: str) -> type:
    """The class `table[name]` names ("module:Class"), imported now.

    ValueError naming the choices for an unknown name.
    """
    if name not in table:
        raise ValueError(f"unknown {what} {name!r}; one of {list(table)}")
    return resolve_name(table[name])
