"""launch_testing test of an oriented-box model through ``detect.launch.py``.

The launch file (``model:=yolov8n_obb``, backend:=onnx, autostart) starts one ``vision_node``
running the OBB test model; the test publishes bus.jpg and checks, through the node's topics,
that the Detection2DArray holds rotated boxes: each with ``theta`` in radians and a size, the
bus (class_id '5') among them, the ids the indices, ``label_info`` naming the 80 classes; that
the corners OpenCV makes of a published box (``cv2.boxPoints`` of centre, size and
``degrees(theta)``) lie inside the image around the box's centre; and that the node exits
cleanly when the launch shuts down.

How to run: as ``test_launch_detect.py`` (an ament prefix with vision_nodes, launch_testing,
``VISION_NODES_MODEL_DIR`` holding yolov8n-obb.pt).
"""

from __future__ import annotations

import math
import os
import random
import time
import unittest
from pathlib import Path

import numpy as np
import pytest

try:
    import launch
    import launch_ros  # noqa: F401
    import launch_testing
    import launch_testing.actions
    import launch_testing.asserts
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource
except ImportError:
    pytest.skip('launch_testing is not installed (it is not on PyPI); install ROS 2 '
                'launch_testing to run these tests', allow_module_level=True)

import rclpy  # noqa: E402
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile,  # noqa: E402
                       ReliabilityPolicy)
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray, LabelInfo  # noqa: E402

from launch_skip import isolate_ros_graph, skip_reason  # noqa: E402
from vision_nodes.tools.client import VisionNodeClient, wait_for  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[2] / 'launch' / 'detect.launch.py'
NODE = '/vision_node'
BUS = '5'
DOMAIN_ID = random.SystemRandom().randint(1, 101)
#: The first configure exports the model to ONNX (a minute on a slow machine).
ACTIVE_TIMEOUT = 600.0
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
SKIP_REASON = skip_reason()
if SKIP_REASON is None and not os.path.isfile(
        os.path.join(os.environ.get('VISION_NODES_MODEL_DIR', ''), 'yolov8n-obb.pt')):
    SKIP_REASON = 'yolov8n-obb.pt not found: set VISION_NODES_MODEL_DIR to ../shared/models'


@pytest.mark.launch_test
@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@unittest.skipIf(SKIP_REASON is not None, str(SKIP_REASON))  # for the launch_test runner
def generate_test_description():
    """detect.launch.py with the OBB test model, backend:=onnx and autostart."""
    isolate_ros_graph(DOMAIN_ID)
    included = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={'model': 'yolov8n_obb', 'backend': 'onnx',
                          'autostart': 'true'}.items())
    return launch.LaunchDescription([included, launch_testing.actions.ReadyToTest()])


class TestObbLaunch(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import cv2
        import ultralytics

        from vision_nodes.ros.inputs.conversion import numpy_to_image

        cls.client = VisionNodeClient(NODE, 'test_launch_obb_client')
        cls.bgr = cv2.imread(str(Path(ultralytics.__file__).parent / 'assets' / 'bus.jpg'))
        cls.image = numpy_to_image(cls.bgr, 'bgr8')
        cls.image_pub = cls.client.publisher(Image, 'image', 10)
        cls.detections = cls.client.subscribe(Detection2DArray, 'detections', 10)
        cls.labels = cls.client.subscribe(LabelInfo, 'label_info', LATCHED)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rclpy.try_shutdown()

    def frame(self, timeout: float = 120.0) -> Detection2DArray:
        """Publish bus.jpg (2 Hz) until its Detection2DArray arrives; return it."""
        deadline = time.monotonic() + timeout
        seq = 0
        while time.monotonic() < deadline:
            seq += 1
            self.image.header.frame_id = f'seq{seq}'
            self.image_pub.publish(self.image)
            time.sleep(0.5)
            got = self.detections.get(0.5, lambda m, f=self.image.header.frame_id:
                                      m.header.frame_id == f)
            if got is not None:
                return got
        self.fail(f'no detections within {timeout} s')

    def test_rotated_boxes_with_theta_and_labels(self):
        import cv2

        def active() -> bool:
            try:
                return self.client.get_state(timeout=30.0) == 'active'
            except TimeoutError:
                return False

        self.assertTrue(wait_for(active, ACTIVE_TIMEOUT, interval=1.0), 'node not active')
        got = self.frame()
        ids = [d.id for d in got.detections]
        self.assertEqual(ids, [str(i) for i in range(len(ids))])
        self.assertGreaterEqual(len(ids), 4)
        classes = [d.results[0].hypothesis.class_id for d in got.detections]
        self.assertIn(BUS, classes)
        thetas = [d.bbox.center.theta for d in got.detections]
        self.assertTrue(all(-math.pi / 4 <= t <= 3 * math.pi / 4 for t in thetas), thetas)
        self.assertTrue(any(abs(t) > 0.1 for t in thetas), thetas)
        height, width = self.bgr.shape[:2]
        for det in got.detections:
            box = det.bbox
            self.assertGreater(box.size_x * box.size_y, 0.0)
            centre = (box.center.position.x, box.center.position.y)
            points = cv2.boxPoints((centre, (box.size_x, box.size_y),
                                    math.degrees(box.center.theta)))
            np.testing.assert_allclose(points.mean(axis=0), centre, atol=1e-3)
            reach = math.hypot(box.size_x, box.size_y) / 2
            self.assertTrue(np.all(np.hypot(*(points - centre).T) <= reach + 1e-3))
            self.assertTrue(-reach <= centre[0] <= width + reach)
            self.assertTrue(-reach <= centre[1] <= height + reach)
        info = self.labels.get(10.0)
        self.assertIsNotNone(info)
        self.assertEqual(len(info.class_map), 80)
        self.assertEqual(info.class_map[5].class_name, 'bus')


@launch_testing.post_shutdown_test()
class TestObbLaunchShutdown(unittest.TestCase):

    def test_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
