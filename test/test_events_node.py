"""The events node as a ROS node: parameters refused by name, a stream nobody publishes."""
import pytest


@pytest.mark.parametrize("name,value", [("kinds", ["wave", "dance"]), ("max_rate", 0.0),
                                        ("wave_swings", 0)])
def test_events_node_refuses_bad_parameters_naming_them(ros_context, name, value):
    from rclpy.parameter import Parameter

    from vision_dialogue.events_node import EventsNode
    from vision_dialogue.ros.params import ParameterError
    with pytest.raises(ParameterError, match=f"^{name}"):
        EventsNode(context=ros_context, parameter_overrides=[Parameter(name, value=value)])


def test_events_node_says_when_nothing_publishes_the_stream(ros_context, monkeypatch, caplog):
    from rclpy.executors import SingleThreadedExecutor

    from conftest import spin_until
    from vision_dialogue import events_node
    monkeypatch.setattr(events_node, "STREAM_CHECK_S", 0.3)
    node = events_node.EventsNode(context=ros_context)
    warned = []
    node.get_logger().warning = lambda msg, **kw: warned.append(msg)
    ex = SingleThreadedExecutor(context=ros_context)
    ex.add_node(node)
    try:
        assert spin_until(ex, lambda: warned, timeout=5)
        assert "nothing publishes /camera/stream/image_raw" in warned[0]
        assert "publish_rate" in warned[0]
    finally:
        ex.shutdown()
        node.destroy_node()


def test_the_events_node_loads_its_models_before_the_first_frame(ros_context, monkeypatch):
    """Configured means ready: the first frame is analysed, not spent loading models.

    Loaded on the first frame, the models took the seconds of a short arrival on a busy
    machine, and the events node saw no one come or go (a fresh-clone suite run).
    """
    import numpy as np

    from vision_dialogue import events_node
    from vision_dialogue.perception import observer
    loads = []
    for name, load in list(observer._LOADERS.items()):
        monkeypatch.setitem(observer._LOADERS, name,
                            lambda obs, _name=name, _load=load: loads.append(_name) or _load(obs))
    node = events_node.EventsNode(context=ros_context)
    try:
        assert sorted(loads) == ["faces", "hands", "pose"]
        loads.clear()
        node.detector.observe(np.zeros((240, 320, 3), np.uint8), 0.0)
        assert loads == []
    finally:
        node.destroy_node()


def test_the_events_node_warns_when_it_drops_frames_at_too_few_a_second_for_a_wave(ros_context):
    """A busy CPU: frames dropped while the node looks at fewer than a wave needs.

    (A CI run of the people demo beside other tests missed the wave; the status says why.)
    """
    from rclpy.node import Node
    from sensor_msgs.msg import Image

    from vision_dialogue import events_node
    from vision_dialogue.common.health import OK, WARN

    class NoModels:
        def warm_up(self):
            return []

        def close(self):
            pass

    node = events_node.EventsNode(context=ros_context, detector=NoModels())
    camera = Node("camera_stub", context=ros_context)
    camera.create_publisher(Image, "camera/stream/image_raw", 1)
    try:
        node.work.add(0.6)                  # one frame analysed in the last 10 s
        assert node._health()[0].level == OK        # slow, but nothing was dropped
        node.intake.dropped += 4
        [health] = node._health()
        assert health.level == WARN and "too few to see a wave" in health.message, health
        assert "4 dropped" in health.message
        assert node._health()[0].level == OK        # no new drops since
    finally:
        camera.destroy_node()
        node.destroy_node()
