"""launch_testing test of a segment and a pose model in one node, through ``detect.launch.py``.

The launch file (``models:=[yolov8n_seg,yolov8n_pose]``, backend:=onnx, autostart) starts one
``vision_node`` running both test models; the test publishes bus.jpg and checks, through the
node's topics (each under its model's name), that the segment model's ``instance_mask``
(mono16, the image's size and header) holds exactly the ids of its Detection2DArray (value =
1 + id) and that the pose model's Keypoints2DArray has one pose per detection with the same
ids and the COCO-17 names; and that the node exits cleanly when the launch shuts down.

How to run: as ``test_launch_detect.py`` (an ament prefix with vision_nodes, launch_testing,
``VISION_NODES_MODEL_DIR`` holding yolov8n-seg.pt and yolov8n-pose.pt).
"""

from __future__ import annotations

import unittest

import launch_testing
import numpy as np
from sensor_msgs.msg import Image
from vision_msgs.msg import Detection2DArray

from launch_helpers import ExitsCleanly, NodeTest, launch_description
from launch_skip import skip_reason

SKIP_REASON = skip_reason()
if SKIP_REASON is None:
    try:
        from vision_nodes_msgs.msg import Keypoints2DArray
    except ImportError:
        SKIP_REASON = 'vision_nodes_msgs is not built (scripts/setup_env.sh or colcon)'


generate_test_description = launch_description(
    'detect.launch.py', SKIP_REASON, models='[yolov8n_seg,yolov8n_pose]', backend='onnx',
    autostart='true')


class TestSegmentPoseLaunch(NodeTest):

    #: The first configure exports both models to ONNX (minutes on a slow machine).
    ACTIVE_TIMEOUT = 600.0

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.queues = {
            'seg': cls.client.subscribe(Detection2DArray, 'yolov8n_seg/detections', 10),
            'mask': cls.client.subscribe(Image, 'yolov8n_seg/instance_mask', 10),
            'pose': cls.client.subscribe(Detection2DArray, 'yolov8n_pose/detections', 10),
            'keypoints': cls.client.subscribe(Keypoints2DArray, 'yolov8n_pose/keypoints', 10)}

    def test_ids_tie_masks_and_keypoints_to_detections(self):
        self.wait_until_active()
        got = self.answers_to_frame(self.queues)
        seg_ids = [d.id for d in got['seg'].detections]
        self.assertEqual(seg_ids, [str(i) for i in range(len(seg_ids))])
        self.assertGreaterEqual(len(seg_ids), 4)
        mask = got['mask']
        self.assertEqual((mask.height, mask.width, mask.encoding),
                         (self.image.height, self.image.width, 'mono16'))
        labels = np.frombuffer(bytes(mask.data), '<u2')
        self.assertEqual(set(np.unique(labels)) - {0}, {int(i) + 1 for i in seg_ids})
        pose_ids = [d.id for d in got['pose'].detections]
        keypoints = got['keypoints']
        self.assertEqual([p.id for p in keypoints.poses], pose_ids)
        self.assertGreaterEqual(len(pose_ids), 3)
        self.assertEqual(len(keypoints.names), 17)
        self.assertEqual(keypoints.names[0], 'nose')
        self.assertTrue(all(len(p.keypoints) == 17 for p in keypoints.poses))


@launch_testing.post_shutdown_test()
class TestSegmentPoseLaunchShutdown(ExitsCleanly, unittest.TestCase):
    """After the launch: the node exited cleanly."""
