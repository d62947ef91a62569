"""launch_testing tests of ``launch/multi_camera.launch.py``: one node, three cameras.

The launch file starts ``vision_node`` with backend:=onnx, autostart:=true and
image_topics:=/front/image_raw,/rear/image_raw,/left/image_raw; the tests publish bus.jpg on
every camera at once and check that (a) each camera's detections arrive on its own
``/<camera>/detections`` with its own frame_id, and none on another camera's topic; (b)
``output_namespaces`` and ``max_batch`` are the launch's values; and that the node exits
cleanly when the launch shuts down.

How to run: as test_launch_detect.py (the package built with colcon and sourced, ROS 2
``launch_testing`` / ``launch_ros``, ``VISION_NODES_MODEL_DIR`` holding yolov8n.pt). Without
launch_testing the module is skipped; without the colcon install or the weights the launch
test is skipped with the reason.
"""

from __future__ import annotations

import time
import unittest

import launch_testing
from sensor_msgs.msg import Image
from vision_msgs.msg import Detection2DArray

from launch_helpers import ExitsCleanly, NodeTest, bus_image, launch_description
from launch_skip import skip_reason

CAMERAS = ('front', 'rear', 'left')


generate_test_description = launch_description(
    'multi_camera.launch.py', skip_reason(), backend='onnx', autostart='true',
    image_topics=','.join(f'/{c}/image_raw' for c in CAMERAS), max_batch='2')


class TestMultiCameraLaunch(NodeTest):
    """The tests run in name order against one launched node."""

    IMAGE_TOPIC = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.image = bus_image()
        cls.pubs = {c: cls.client.publisher(Image, f'/{c}/image_raw', 10) for c in CAMERAS}
        cls.answers = {c: cls.client.subscribe(Detection2DArray, f'/{c}/detections', 50)
                       for c in CAMERAS}

    def test_a_each_camera_answers_on_its_own_topic(self):
        self.wait_until_active()
        deadline = time.monotonic() + 60.0
        got = {}
        seq = 0
        while len(got) < len(CAMERAS) and time.monotonic() < deadline:
            seq += 1
            for camera in CAMERAS:
                self.image.header.frame_id = f'{camera}_{seq}'
                self.pubs[camera].publish(self.image)
            for camera in CAMERAS:
                msg = self.answers[camera].get(0.3)
                while msg is not None:
                    self.assertTrue(msg.header.frame_id.startswith(camera),
                                    (camera, msg.header.frame_id))
                    self.assertGreaterEqual(len(msg.detections), 4)
                    got[camera] = msg
                    msg = self.answers[camera].get(0.05)
        self.assertEqual(sorted(got), sorted(CAMERAS))

    def test_b_launch_arguments_reach_the_node(self):
        self.wait_until_active()
        values = self.client.get_parameters('image_topics', 'max_batch')
        self.assertEqual(list(values['image_topics']), [f'/{c}/image_raw' for c in CAMERAS])
        self.assertEqual(values['max_batch'], 2)


@launch_testing.post_shutdown_test()
class TestMultiCameraLaunchShutdown(ExitsCleanly, unittest.TestCase):
    """After the launch: the node exited cleanly."""
