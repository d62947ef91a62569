"""launch_testing tests of ``launch/detect.launch.py``: the real launch file, node and DDS.

The launch file (included by path: ``../launch/detect.launch.py``) starts ``vision_node`` with
backend:=onnx and autostart:=true; the tests publish bus.jpg and check, through the node's ROS
interfaces, that:

(a) the launch configures and activates the node by itself and a Detection2DArray with a bus
    (class_id '5') and at least three people (class_id '0') arrives; label_info maps
    0 -> person and 5 -> bus;
(b) confidence_threshold set through the parameter service (0.25 -> 0.5) applies to the next
    frame: fewer detections, all scores above 0.5;
(c) a reload parameter (backend) is refused while active, with a reason that says to
    deactivate and clean up;
(d) deactivate stops the detections, activate resumes them;
(e) the README's ``ros2 param set`` lines through the real ``ros2`` CLI: the threshold applies,
    ``backend`` is refused while active;
(f) ``ros2 lifecycle set`` deactivates and activates it, ``ros2 lifecycle get`` says so;
and that the node exits cleanly when the launch shuts down.

How to run: the launch file starts the node as ``Node(package='vision_nodes',
executable='vision_node')``, which needs the package installed in an ament prefix
(``lib/vision_nodes/vision_node``) plus the ROS 2 ``launch_testing`` / ``launch_ros`` packages
(on no registry). In the project's venv ``scripts/setup_env.sh`` gives both: it installs the
launch stack from ``../shared/ros2-launch-stack`` when that folder is there (as in CI) and
links the editable package into the venv, which test/conftest.py puts on
``AMENT_PREFIX_PATH`` (``scripts/dev test`` runs these tests then). With a ROS install::

    colcon build --packages-select vision_nodes && source install/setup.bash
    export VISION_NODES_MODEL_DIR=/path/to/folder/with/yolov8n.pt
    python -m pytest test/launch/test_launch_detect.py      # launch_testing's pytest plugin
    launch_test test/launch/test_launch_detect.py           # or launch_testing's runner
    colcon test --packages-select vision_nodes       # or through colcon

Rebuild after changing the package: the node runs the installed copy. Optional:
``VISION_NODES_CACHE_DIR`` (engine cache; the first configure exports yolov8n to ONNX).
The tests pick a random ROS_DOMAIN_ID and keep discovery on localhost. Without launch_testing
the module is skipped, saying where the stack comes from; without the ament install or the
weights the launch test is skipped with the reason.
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
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile,  # noqa: E402
                       ReliabilityPolicy)
from sensor_msgs.msg import Image  # noqa: E402
from vision_msgs.msg import Detection2DArray, LabelInfo  # noqa: E402

from launch_skip import isolate_ros_graph, ros2, skip_reason  # noqa: E402
from vision_nodes.tools.client import VisionNodeClient, wait_for  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[2] / 'launch' / 'detect.launch.py'
NODE = '/vision_node'
PERSON, BUS = '0', '5'
#: One random DDS domain per test module (set when the launch test starts).
DOMAIN_ID = random.SystemRandom().randint(1, 101)
#: The first configure may export yolov8n to ONNX (tens of seconds on a slow machine).
ACTIVE_TIMEOUT = 240.0
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                     reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


SKIP_REASON = skip_reason()


@pytest.mark.launch_test
@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@unittest.skipIf(SKIP_REASON is not None, str(SKIP_REASON))  # for the launch_test runner
def generate_test_description():
    """detect.launch.py with backend:=onnx and autostart, ready to test at once."""
    isolate_ros_graph(DOMAIN_ID)
    detect = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={'backend': 'onnx', 'autostart': 'true'}.items())
    return launch.LaunchDescription([detect, launch_testing.actions.ReadyToTest()])


def bus_image() -> Image:
    """bus.jpg (bundled with ultralytics) as a bgr8 sensor_msgs/Image."""
    import cv2
    import ultralytics

    from vision_nodes.ros.inputs.conversion import numpy_to_image

    path = Path(ultralytics.__file__).parent / 'assets' / 'bus.jpg'
    bgr = cv2.imread(str(path))
    assert bgr is not None, f'cannot read {path}'
    return numpy_to_image(bgr, 'bgr8')


def class_ids(msg: Detection2DArray) -> list[str]:
    return [det.results[0].hypothesis.class_id for det in msg.detections]


def seq_of(msg: Detection2DArray) -> int:
    """Sequence number of the image a result answers (carried in frame_id)."""
    return int(msg.header.frame_id.removeprefix('seq'))


class TestDetectLaunch(unittest.TestCase):
    """The tests run in name order against one launched node (a, b, c, d)."""

    @classmethod
    def setUpClass(cls):
        cls.client = VisionNodeClient(NODE, 'test_launch_detect_client')
        cls.image = bus_image()
        cls.image_pub = cls.client.publisher(Image, 'image', 10)
        cls.detections = cls.client.subscribe(Detection2DArray, 'detections', 10)
        cls.labels = cls.client.subscribe(LabelInfo, 'label_info', LATCHED)
        cls.seq = 0

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rclpy.try_shutdown()

    # ------------------------------------------------------------------ helpers
    def publish(self) -> int:
        """Publish bus.jpg with the next sequence number; return it."""
        type(self).seq += 1
        self.image.header.frame_id = f'seq{self.seq}'
        self.image.header.stamp = self.client.node.get_clock().now().to_msg()
        self.image_pub.publish(self.image)
        return self.seq

    def next_result(self, timeout: float = 60.0) -> Detection2DArray:
        """Publish images (5 Hz) until a result for an image published from now arrives.

        The first match of a new image subscription (after activate) can take seconds of
        DDS discovery, hence the long timeout.
        """
        mark = self.seq
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.publish()
            msg = self.detections.get(0.2, lambda m: seq_of(m) > mark)
            if msg is not None:
                return msg
        self.fail(f'no detections within {timeout} s')

    def wait_until_active(self, timeout: float = ACTIVE_TIMEOUT) -> None:
        def active() -> bool:
            try:  # services answer during the first configure's export too
                return self.client.get_state(timeout=30.0) == 'active'
            except TimeoutError:
                return False

        self.assertTrue(wait_for(active, timeout, interval=0.5),
                        f'node not active within {timeout} s')

    # ------------------------------------------------------------------ tests
    def test_a_autostart_detects_bus_and_people(self):
        self.wait_until_active()
        ids = class_ids(self.next_result())
        self.assertGreaterEqual(ids.count(BUS), 1, ids)
        self.assertGreaterEqual(ids.count(PERSON), 3, ids)

        info = self.labels.get(timeout=30.0)
        self.assertIsNotNone(info, 'no label_info')
        names = {c.class_id: c.class_name for c in info.class_map}
        self.assertEqual(names[0], 'person')
        self.assertEqual(names[5], 'bus')

    def test_b_confidence_threshold_applies_live(self):
        self.wait_until_active()
        self.assertEqual(self.client.get_parameters('confidence_threshold'),
                         {'confidence_threshold': 0.25})
        before = self.next_result()
        result = self.client.set_parameters(confidence_threshold=0.5)[0]
        try:
            self.assertTrue(result.successful, result.reason)
            after = self.next_result()
            self.assertLess(len(after.detections), len(before.detections))
            scores = [d.results[0].hypothesis.score for d in after.detections]
            self.assertTrue(scores, 'no detections at 0.5')
            self.assertTrue(all(s > 0.5 for s in scores), scores)
        finally:
            self.assertTrue(
                self.client.set_parameters(confidence_threshold=0.25)[0].successful)

    def test_c_reload_parameter_refused_while_active(self):
        self.wait_until_active()
        result = self.client.set_parameters(backend='cpu')[0]
        self.assertFalse(result.successful)
        self.assertIn('deactivate', result.reason)
        self.assertIn('clean up', result.reason)
        self.assertEqual(self.client.get_parameters('backend'), {'backend': 'onnx'})

    def test_d_deactivate_stops_and_activate_resumes(self):
        self.wait_until_active()
        self.next_result()
        self.assertTrue(self.client.change_state('deactivate'))
        self.assertEqual(self.client.get_state(), 'inactive')
        mark = self.seq
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            self.publish()
            time.sleep(0.1)
        self.assertIsNone(self.detections.get(0.5, lambda m: seq_of(m) > mark),
                          'detections while inactive')

        self.assertTrue(self.client.change_state('activate'))
        self.assertEqual(self.client.get_state(), 'active')
        ids = class_ids(self.next_result())
        self.assertIn(BUS, ids)

    def test_e_ros2_param_set(self):
        """The README's ``ros2 param set`` lines through the real CLI: one applies, the
        reload parameter is refused with the node's reason."""
        self.wait_until_active()
        run = ros2('param', 'set', NODE, 'confidence_threshold', '0.5')
        try:
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertIn('Set parameter successful', run.stdout)
            self.assertEqual(self.client.get_parameters('confidence_threshold'),
                             {'confidence_threshold': 0.5})
            self.assertTrue(all(d.results[0].hypothesis.score > 0.5
                                for d in self.next_result().detections))
        finally:
            self.assertTrue(
                self.client.set_parameters(confidence_threshold=0.25)[0].successful)
        refused = ros2('param', 'set', NODE, 'backend', 'cpu')
        self.assertIn('Setting parameter failed', refused.stdout + refused.stderr)
        self.assertIn('deactivate', refused.stdout + refused.stderr)

    def test_f_ros2_lifecycle_set(self):
        """``ros2 lifecycle set`` deactivates and activates the node; ``get`` tells."""
        self.wait_until_active()
        for transition, state in (('deactivate', 'inactive'), ('activate', 'active')):
            run = ros2('lifecycle', 'set', NODE, transition)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertIn('Transitioning successful', run.stdout)
            self.assertEqual(self.client.get_state(), state)
        self.assertTrue(ros2('lifecycle', 'get', NODE).stdout.startswith('active'))
        self.assertIn(BUS, class_ids(self.next_result()))


@launch_testing.post_shutdown_test()
class TestDetectLaunchShutdown(unittest.TestCase):

    def test_node_exits_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
