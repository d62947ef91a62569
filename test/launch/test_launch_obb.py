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
import unittest

import launch_testing
import numpy as np
from vision_msgs.msg import Detection2DArray, LabelInfo

from launch_helpers import ExitsCleanly, NodeTest, bus_bgr, launch_description
from launch_skip import skip_reason
from node_harness import LATCHED

BUS = '5'


generate_test_description = launch_description(
    'detect.launch.py', skip_reason(weights=('yolov8n.pt', 'yolov8n-obb.pt')),
    model='yolov8n_obb', backend='onnx', autostart='true')


class TestObbLaunch(NodeTest):

    #: The first configure exports the model to ONNX (a minute on a slow machine).
    ACTIVE_TIMEOUT = 600.0

    OUTPUTS = {'detections': (Detection2DArray, 'detections', 10),
               'labels': (LabelInfo, 'label_info', LATCHED)}

    def test_rotated_boxes_with_theta_and_labels(self):
        import cv2

        self.wait_until_active()
        got = self.answer_to_frame(self.detections)
        ids = [d.id for d in got.detections]
        self.assertEqual(ids, [str(i) for i in range(len(ids))])
        self.assertGreaterEqual(len(ids), 4)
        classes = [d.results[0].hypothesis.class_id for d in got.detections]
        self.assertIn(BUS, classes)
        thetas = [d.bbox.center.theta for d in got.detections]
        self.assertTrue(all(-math.pi / 4 <= t <= 3 * math.pi / 4 for t in thetas), thetas)
        self.assertTrue(any(abs(t) > 0.1 for t in thetas), thetas)
        height, width = bus_bgr().shape[:2]
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
class TestObbLaunchShutdown(ExitsCleanly, unittest.TestCase):
    """After the launch: the node exited cleanly."""
