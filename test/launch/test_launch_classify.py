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

import unittest

import launch_testing
from vision_msgs.msg import Classification, LabelInfo

from launch_helpers import ExitsCleanly, NodeTest, launch_description
from launch_skip import skip_reason
from node_harness import LATCHED


generate_test_description = launch_description(
    'detect.launch.py', skip_reason(weights=('yolov8n.pt', 'yolov8n-cls.pt')),
    model='yolov8n_cls', backend='onnx', autostart='true')


class TestClassifyLaunch(NodeTest):

    #: The first configure exports the model to ONNX (a minute on a slow machine).
    ACTIVE_TIMEOUT = 600.0

    OUTPUTS = {'classes': (Classification, 'classification', 10),
               'labels': (LabelInfo, 'label_info', LATCHED)}

    def test_top_classes_and_a_live_top_k(self):
        self.wait_until_active()
        got = self.answer_to_frame(self.classes)
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
        again = self.answer_to_frame(self.classes)
        self.assertEqual([r.class_id for r in again.results], first[:2])
        refused = self.client.set_parameters(classification_top_k=0)
        self.assertFalse(refused[0].successful)
        self.assertIn('classification_top_k', refused[0].reason)


@launch_testing.post_shutdown_test()
class TestClassifyLaunchShutdown(ExitsCleanly, unittest.TestCase):
    """After the launch: the node exited cleanly."""
