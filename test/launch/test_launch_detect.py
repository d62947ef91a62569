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
The tests run in the pytest worker's ROS_DOMAIN_ID (a random one under ``launch_test``) and
keep discovery on localhost; the test client has an rclpy context of its own
(test/launch_helpers.py). Without launch_testing the module is skipped, saying where the stack
comes from; without the ament install or the weights the launch test is skipped with the
reason.
"""

from __future__ import annotations

import time
import unittest

import launch_testing
from vision_msgs.msg import Detection2DArray, LabelInfo

from launch_helpers import NODE, ExitsCleanly, NodeTest, launch_description
from launch_skip import ros2, skip_reason
from node_harness import LATCHED

PERSON, BUS = '0', '5'


generate_test_description = launch_description(
    'detect.launch.py', skip_reason(), backend='onnx', autostart='true')


def class_ids(msg: Detection2DArray) -> list[str]:
    return [det.results[0].hypothesis.class_id for det in msg.detections]


def seq_of(msg: Detection2DArray) -> int:
    """Sequence number of the image a result answers (carried in frame_id)."""
    return int(msg.header.frame_id.removeprefix('seq'))


class TestDetectLaunch(NodeTest):
    """The tests run in name order against one launched node (a, b, c, d)."""

    OUTPUTS = {'detections': (Detection2DArray, 'detections', 10),
               'labels': (LabelInfo, 'label_info', LATCHED)}

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
            self.assert_launch_running('detections')
        self.fail(f'no detections within {timeout} s')

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
class TestDetectLaunchShutdown(ExitsCleanly, unittest.TestCase):
    """After the launch: the node exited cleanly."""
