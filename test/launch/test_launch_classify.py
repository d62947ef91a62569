"""launch_testing test of a classification model through ``detect.launch.py``.

The launch file (``model:=yolov8n_cls``, backend:=onnx, autostart) starts one ``vision_node``
running the classification test model; the test publishes bus.jpg and checks, through the
node's topics, that a ``vision_msgs/Classification`` with the image's header lists five
classes, highest probability first, each a class index of the 80 that ``label_info`` names,
probabilities in (0, 1] summing to at most 1; that ``classification_top_k`` set through the
parameter service (5 -> 2) applies to the next frame and 0 is refused; and that the node
exits cleanly when the launch shuts down.

How to run: as ``test_launch_detect.py`` (an ament prefix with vision_nodes, launch_testing,
``VISION_NODES_MODEL_DIR`` holding yolov8n-cls.pt).
"""

from __future__ import annotations

import os
import random
import time
import unittest
from pathlib import Path

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
from vision_msgs.msg import Classification, LabelInfo  # noqa: E402

from launch_skip import isolate_ros_graph, skip_reason  # noqa: E402
from vision_nodes.tools.client import VisionNodeClient, wait_for  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[2] / 'launch' / 'detect.launch.py'
NODE = '/vision_node'
DOMAIN_ID = random.SystemRandom().randint(1, 101)
#: The first configure exports the model to ONNX (a minute on a slow machine).
ACTIVE_TIMEOUT = 600.0
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
SKIP_REASON = skip_reason()
if SKIP_REASON is None and not os.path.isfile(
        os.path.join(os.environ.get('VISION_NODES_MODEL_DIR', ''), 'yolov8n-cls.pt')):
    SKIP_REASON = 'yolov8n-cls.pt not found: set VISION_NODES_MODEL_DIR to ../shared/models'


@pytest.mark.launch_test
@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@unittest.skipIf(SKIP_REASON is not None, str(SKIP_REASON))  # for the launch_test runner
def generate_test_description():
    """detect.launch.py with the classification test model, backend:=onnx and autostart."""
    isolate_ros_graph(DOMAIN_ID)
    included = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={'model': 'yolov8n_cls', 'backend': 'onnx',
                          'autostart': 'true'}.items())
    return launch.LaunchDescription([included, launch_testing.actions.ReadyToTest()])


class TestClassifyLaunch(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import cv2
        import ultralytics

        from vision_nodes.ros.inputs.conversion import numpy_to_image

        cls.client = VisionNodeClient(NODE, 'test_launch_classify_client')
        bgr = cv2.imread(str(Path(ultralytics.__file__).parent / 'assets' / 'bus.jpg'))
        cls.image = numpy_to_image(bgr, 'bgr8')
        cls.image_pub = cls.client.publisher(Image, 'image', 10)
        cls.classes = cls.client.subscribe(Classification, 'classification', 10)
        cls.labels = cls.client.subscribe(LabelInfo, 'label_info', LATCHED)
        cls.seq = 0

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rclpy.try_shutdown()

    def frame(self, timeout: float = 120.0) -> Classification:
        """Publish bus.jpg (2 Hz) until its Classification arrives; return it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            type(self).seq += 1
            self.image.header.frame_id = f'seq{self.seq}'
            self.image_pub.publish(self.image)
            time.sleep(0.5)
            got = self.classes.get(0.5, lambda m, f=self.image.header.frame_id:
                                   m.header.frame_id == f)
            if got is not None:
                return got
        self.fail(f'no classification within {timeout} s')

    def test_top_classes_and_a_live_top_k(self):
        def active() -> bool:
            try:
                return self.client.get_state(timeout=30.0) == 'active'
            except TimeoutError:
                return False

        self.assertTrue(wait_for(active, ACTIVE_TIMEOUT, interval=1.0), 'node not active')
        got = self.frame()
        scores = [r.score for r in got.results]
        self.assertEqual(len(scores), 5)
        self.assertEqual(scores, sorted(scores, reverse=True))
        self.assertTrue(all(0.0 < s <= 1.0 for s in scores) and sum(scores) <= 1.0 + 1e-5)
        self.assertTrue(all(0 <= int(r.class_id) < 80 for r in got.results))
        info = self.labels.get(10.0)
        self.assertIsNotNone(info)
        self.assertEqual(len(info.class_map), 80)
        first = [r.class_id for r in got.results]
        results = self.client.set_parameters(classification_top_k=2)
        self.assertTrue(all(r.successful for r in results), results)
        again = self.frame()
        self.assertEqual([r.class_id for r in again.results], first[:2])
        refused = self.client.set_parameters(classification_top_k=0)
        self.assertFalse(refused[0].successful)
        self.assertIn('classification_top_k', refused[0].reason)


@launch_testing.post_shutdown_test()
class TestClassifyLaunchShutdown(unittest.TestCase):

    def test_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
