"""The camera tool (``vision_nodes.tools.image_publisher``) sends one frame_id, as a camera does.

It gave each frame a new one (``frame_4``, ``frame_5``, ...), and a node's tracker starts
afresh whenever the frame_id changes: with this tool as the camera, every frame restarted it
(#37). Every frame now carries ``--frame-id``, ``camera`` by default.
"""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from node_harness import node_in_own_context, start_camera  # noqa: E402
from vision_nodes.tools.client import wait_for  # noqa: E402


def _frame_ids(assets, topic: str, *extra: str) -> list[str]:
    """Run the tool on ``topic`` until 4 of its frames arrive; return their frame_ids."""
    with node_in_own_context('publisher_test') as node:
        got: list[str] = []
        node.create_subscription(Image, topic, lambda m: got.append(m.header.frame_id),
                                 QoSProfile(depth=10))
        executor = SingleThreadedExecutor(context=node.context)
        executor.add_node(node)
        camera = start_camera(assets / 'bus.jpg', 60.0, 20.0, topic, *extra)
        try:
            def four() -> bool:
                executor.spin_once(timeout_sec=0.05)
                return len(got) >= 4
            assert wait_for(four, 60.0), camera.poll()
        finally:
            camera.terminate()
            camera.communicate(timeout=20)
            executor.shutdown()
        return got


def test_every_frame_has_the_same_frame_id(assets):
    ids = _frame_ids(assets, '/publisher_test/default')
    assert set(ids) == {'camera'}, ids


def test_the_frame_id_is_an_option(assets):
    ids = _frame_ids(assets, '/publisher_test/named', '--frame-id', 'front_optical')
    assert set(ids) == {'front_optical'}, ids
