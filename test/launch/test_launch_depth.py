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

import tempfile
import unittest
from pathlib import Path

import launch_testing
import pytest

from launch_helpers import ExitsCleanly, NodeTest, launch_test, node_launch
from launch_skip import skip_reason

pytest.importorskip('transformers', reason='transformers is not installed (depth model)')

import numpy as np  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from depth_weights import depth_anything_folder, tiny_manifest  # noqa: E402


def _depth_manifest() -> str:
    """A tiny metric Depth Anything with random weights, as a user's manifest and folder."""
    folder = Path(tempfile.mkdtemp(prefix='vision_nodes_launch_depth_'))
    weights = depth_anything_folder(folder / 'da_launch', metric=True, max_depth=20)
    return tiny_manifest(weights, folder / 'da_launch.yaml', 'da_launch')


@launch_test(skip_reason())
def generate_test_description():
    """detect_depth.launch.py with yolov8n and a depth model, backend onnx, autostart."""
    return node_launch('detect_depth.launch.py', models=f'[yolov8n, {_depth_manifest()}]',
                       backend='onnx', autostart='true')


class TestDetectDepthLaunch(NodeTest):
    """One launched node running both models."""

    ACTIVE_TIMEOUT = 300.0

    OUTPUTS = {'detections': (Detection2DArray, 'yolov8n/detections', 10),
               'depth': (Image, 'da_launch/depth/image', 10)}

    def test_one_frame_gives_detections_and_metric_depth(self):
        self.wait_until_active()
        dets = self.answer_to_frame(self.detections, timeout=60.0)
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
class TestDetectDepthLaunchShutdown(ExitsCleanly, unittest.TestCase):
    """After the launch: the node exited cleanly."""
