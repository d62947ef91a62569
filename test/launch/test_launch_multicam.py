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

import random
import time
import unittest
from pathlib import Path

import pytest

from launch_skip import NO_LAUNCH_STACK

try:
    import launch
    import launch_ros  # noqa: F401
    import launch_testing
    import launch_testing.actions
    import launch_testing.asserts
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource
except ImportError:
    pytest.skip(NO_LAUNCH_STACK, allow_module_level=True)

import rclpy  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from launch_skip import isolate_ros_graph, skip_reason  # noqa: E402
from vision_nodes.tools.client import VisionNodeClient, wait_for  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[2] / 'launch' / 'multi_camera.launch.py'
NODE = '/vision_node'
CAMERAS = ('front', 'rear', 'left')
#: One random DDS domain per test module (set when the launch test starts).
DOMAIN_ID = random.SystemRandom().randint(1, 101)
#: The first configure may export yolov8n to ONNX (tens of seconds on a slow machine).
ACTIVE_TIMEOUT = 240.0

SKIP_REASON = skip_reason()


@pytest.mark.launch_test
@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@unittest.skipIf(SKIP_REASON is not None, str(SKIP_REASON))  # for the launch_test runner
def generate_test_description():
    """multi_camera.launch.py with three cameras, backend:=onnx and autostart."""
    isolate_ros_graph(DOMAIN_ID)
    topics = ','.join(f'/{c}/image_raw' for c in CAMERAS)
    cameras = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={'backend': 'onnx', 'autostart': 'true', 'image_topics': topics,
                          'max_batch': '2'}.items())
    return launch.LaunchDescription([cameras, launch_testing.actions.ReadyToTest()])


def bus_image() -> Image:
    """bus.jpg (bundled with ultralytics) as a bgr8 sensor_msgs/Image."""
    import cv2
    import ultralytics

    from vision_nodes.ros.inputs.conversion import numpy_to_image

    path = Path(ultralytics.__file__).parent / 'assets' / 'bus.jpg'
    bgr = cv2.imread(str(path))
    assert bgr is not None, f'cannot read {path}'
    return numpy_to_image(bgr, 'bgr8')


class TestMultiCameraLaunch(unittest.TestCase):
    """The tests run in name order against one launched node."""

    @classmethod
    def setUpClass(cls):
        cls.client = VisionNodeClient(NODE, 'test_launch_multicam_client')
        cls.image = bus_image()
        cls.pubs = {c: cls.client.publisher(Image, f'/{c}/image_raw', 10) for c in CAMERAS}
        cls.answers = {c: cls.client.subscribe(Detection2DArray, f'/{c}/detections', 50)
                       for c in CAMERAS}

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rclpy.try_shutdown()

    def wait_until_active(self, timeout: float = ACTIVE_TIMEOUT) -> None:
        def active() -> bool:
            try:
                return self.client.get_state(timeout=30.0) == 'active'
            except TimeoutError:
                return False

        self.assertTrue(wait_for(active, timeout, interval=0.5),
                        f'node not active within {timeout} s')

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
class TestMultiCameraLaunchShutdown(unittest.TestCase):

    def test_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
