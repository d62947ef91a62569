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

import random
import time
import unittest
from pathlib import Path

import numpy as np
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

LAUNCH_FILE = Path(__file__).resolve().parents[2] / 'launch' / 'detect.launch.py'
NODE = '/vision_node'
DOMAIN_ID = random.SystemRandom().randint(1, 101)
#: The first configure exports both models to ONNX (minutes on a slow machine).
ACTIVE_TIMEOUT = 600.0
SKIP_REASON = skip_reason()
if SKIP_REASON is None:
    try:
        from vision_nodes_msgs.msg import Keypoints2DArray
    except ImportError:
        SKIP_REASON = 'vision_nodes_msgs is not built (scripts/setup_env.sh or colcon)'


@pytest.mark.launch_test
@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@unittest.skipIf(SKIP_REASON is not None, str(SKIP_REASON))  # for the launch_test runner
def generate_test_description():
    """detect.launch.py with both test models, backend:=onnx and autostart."""
    isolate_ros_graph(DOMAIN_ID)
    included = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={'models': '[yolov8n_seg,yolov8n_pose]', 'backend': 'onnx',
                          'autostart': 'true'}.items())
    return launch.LaunchDescription([included, launch_testing.actions.ReadyToTest()])


class TestSegmentPoseLaunch(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        import cv2
        import ultralytics

        from vision_nodes.ros.inputs.conversion import numpy_to_image

        cls.client = VisionNodeClient(NODE, 'test_launch_segment_pose_client')
        bgr = cv2.imread(str(Path(ultralytics.__file__).parent / 'assets' / 'bus.jpg'))
        cls.image = numpy_to_image(bgr, 'bgr8')
        cls.image_pub = cls.client.publisher(Image, 'image', 10)
        cls.queues = {
            'seg': cls.client.subscribe(Detection2DArray, 'yolov8n_seg/detections', 10),
            'mask': cls.client.subscribe(Image, 'yolov8n_seg/instance_mask', 10),
            'pose': cls.client.subscribe(Detection2DArray, 'yolov8n_pose/detections', 10),
            'keypoints': cls.client.subscribe(Keypoints2DArray, 'yolov8n_pose/keypoints', 10)}

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rclpy.try_shutdown()

    def frame(self, timeout: float = 120.0) -> dict:
        """Publish bus.jpg (2 Hz) until every output answered one frame; return the answers."""
        deadline = time.monotonic() + timeout
        seq = 0
        while time.monotonic() < deadline:
            seq += 1
            self.image.header.frame_id = f'seq{seq}'
            self.image_pub.publish(self.image)
            time.sleep(0.5)
            frame = self.image.header.frame_id
            got = {k: q.get(0.5, lambda m, f=frame: m.header.frame_id == f)
                   for k, q in self.queues.items()}
            if all(v is not None for v in got.values()):
                return got
        self.fail(f'no complete answer within {timeout} s')

    def test_ids_tie_masks_and_keypoints_to_detections(self):
        def active() -> bool:
            try:
                return self.client.get_state(timeout=30.0) == 'active'
            except TimeoutError:
                return False

        self.assertTrue(wait_for(active, ACTIVE_TIMEOUT, interval=1.0), 'node not active')
        got = self.frame()
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
class TestSegmentPoseLaunchShutdown(unittest.TestCase):

    def test_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
