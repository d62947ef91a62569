"""launch_testing test of ``launch/detect_depth.launch.py``: a detector and a depth model in one
node, started, configured and activated by the real launch file.

The launch runs ``models:=[yolov8n, <a tiny Depth Anything, metric, random weights>]`` with
backend:=onnx and autostart. The tests check that one frame gives both ``yolov8n/detections``
(a bus and people in bus.jpg) and ``da_launch/depth/image`` (32FC1 metres, the image's header
and size), that each model's parameters live under its name, and that the node exits cleanly
when the launch shuts down.

How to run: see ``test_launch_detect.py``. Needs transformers (the depth model) and the
yolov8n weights; skipped with the reason otherwise.
"""

from __future__ import annotations

import random
import tempfile
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
pytest.importorskip('transformers', reason='transformers is not installed (depth model)')

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from depth_weights import depth_anything_folder, tiny_manifest  # noqa: E402
from launch_skip import isolate_ros_graph, skip_reason  # noqa: E402
from vision_nodes.tools.client import VisionNodeClient, wait_for  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[2] / 'launch' / 'detect_depth.launch.py'
NODE = '/vision_node'
DOMAIN_ID = random.SystemRandom().randint(1, 101)
ACTIVE_TIMEOUT = 300.0


SKIP_REASON = skip_reason()


def _depth_manifest() -> str:
    """A tiny metric Depth Anything with random weights, as a user's manifest and folder."""
    folder = Path(tempfile.mkdtemp(prefix='vision_nodes_launch_depth_'))
    weights = depth_anything_folder(folder / 'da_launch', metric=True, max_depth=20)
    return tiny_manifest(weights, folder / 'da_launch.yaml', 'da_launch')


@pytest.mark.launch_test
@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@unittest.skipIf(SKIP_REASON is not None, str(SKIP_REASON))  # for the launch_test runner
def generate_test_description():
    """detect_depth.launch.py with yolov8n and a depth model, backend onnx, autostart."""
    isolate_ros_graph(DOMAIN_ID)
    models = f'[yolov8n, {_depth_manifest()}]'
    both = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={'models': models, 'backend': 'onnx', 'autostart': 'true'}.items())
    return launch.LaunchDescription([both, launch_testing.actions.ReadyToTest()])


class TestDetectDepthLaunch(unittest.TestCase):
    """One launched node running both models."""

    @classmethod
    def setUpClass(cls):
        import cv2
        import ultralytics

        from vision_nodes.ros.inputs.conversion import numpy_to_image

        cls.client = VisionNodeClient(NODE, 'test_launch_depth_client')
        bgr = cv2.imread(str(Path(ultralytics.__file__).parent / 'assets' / 'bus.jpg'))
        cls.image = numpy_to_image(bgr, 'bgr8')
        cls.images = cls.client.publisher(Image, 'image', 10)
        cls.detections = cls.client.subscribe(Detection2DArray, 'yolov8n/detections', 10)
        cls.depth = cls.client.subscribe(Image, 'da_launch/depth/image', 10)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rclpy.try_shutdown()

    def test_one_frame_gives_detections_and_metric_depth(self):
        self.assertTrue(wait_for(lambda: self.client.get_state(timeout=30.0) == 'active',
                                 ACTIVE_TIMEOUT, interval=0.5), 'node not active')
        deadline = time.monotonic() + 60.0
        dets = None
        while dets is None and time.monotonic() < deadline:
            self.image.header.frame_id = f'f{time.monotonic_ns()}'
            self.image.header.stamp = self.client.node.get_clock().now().to_msg()
            self.images.publish(self.image)
            dets = self.detections.get(
                0.5, lambda m: m.header.frame_id == self.image.header.frame_id)
        self.assertIsNotNone(dets, 'no detections')
        ids = [d.results[0].hypothesis.class_id for d in dets.detections]
        self.assertIn('5', ids)
        depth = self.depth.get(30.0, lambda m: m.header == dets.header)
        self.assertIsNotNone(depth, 'no depth image for the same frame')
        self.assertEqual((depth.encoding, depth.height, depth.width),
                         ('32FC1', self.image.height, self.image.width))
        values = np.frombuffer(bytes(depth.data), '<f4')
        finite = values[np.isfinite(values)]
        self.assertTrue(finite.size > 0 and (finite > 0).all())
        names = self.client.get_parameters('yolov8n.confidence_threshold',
                                           'da_launch.depth_colormap', 'backend_in_use')
        self.assertEqual(names, {'yolov8n.confidence_threshold': 0.25,
                                 'da_launch.depth_colormap': 'turbo',
                                 'backend_in_use': 'onnx'})


@launch_testing.post_shutdown_test()
class TestDetectDepthLaunchShutdown(unittest.TestCase):

    def test_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
