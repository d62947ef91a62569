"""launch_testing test of ``respawn`` and ``use_sim_time`` on ``launch/detect.launch.py``.

The launch runs yolov8n on ONNX Runtime with ``respawn:=true respawn_delay:=0.5
use_sim_time:=true autostart:=true``. The tests check that:

(a) the node is configured and activated by the launch, and its ``use_sim_time`` parameter is
    true;
(b) when its process is killed (SIGKILL, as a crash), the launch starts a new one, which
    autostart configures and activates again, and it detects the bus in bus.jpg.

How to run: see ``test_launch_detect.py``.
"""

from __future__ import annotations

import os
import random
import signal
import unittest
from pathlib import Path

import pytest

from launch_skip import NO_LAUNCH_STACK

try:
    import launch
    import launch_ros  # noqa: F401
    import launch_testing
    import launch_testing.actions
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
BUS = '5'
DOMAIN_ID = random.SystemRandom().randint(1, 101)
ACTIVE_TIMEOUT = 240.0
SKIP_REASON = skip_reason()


@pytest.mark.launch_test
@pytest.mark.skipif(SKIP_REASON is not None, reason=str(SKIP_REASON))
@unittest.skipIf(SKIP_REASON is not None, str(SKIP_REASON))
def generate_test_description():
    """detect.launch.py with respawn, a short respawn delay, simulated time and autostart."""
    isolate_ros_graph(DOMAIN_ID)
    detect = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
        launch_arguments={'backend': 'onnx', 'autostart': 'true', 'respawn': 'true',
                          'respawn_delay': '0.5', 'use_sim_time': 'true'}.items())
    return launch.LaunchDescription([detect, launch_testing.actions.ReadyToTest()])


def node_pids() -> list[int]:
    """Process ids of the vision_node processes this test process started (via the launch)."""
    me, pids = os.getpid(), []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f'/proc/{entry}/cmdline').read_bytes().split(b'\0')
        except OSError:
            continue
        if any(arg.endswith(b'lib/vision_nodes/vision_node') for arg in cmdline) and \
                me in _ancestors(int(entry)):
            pids.append(int(entry))
    return pids


def _ancestors(pid: int) -> list[int]:
    """The parent, grandparent... of ``pid`` (empty once one is gone)."""
    out = []
    while pid > 1:
        try:
            stat = Path(f'/proc/{pid}/stat').read_text()
        except OSError:
            return out
        pid = int(stat.rsplit(')', 1)[1].split()[1])  # the field after the state
        out.append(pid)
    return out


class TestRespawn(unittest.TestCase):
    """The tests run in name order against one launch."""

    @classmethod
    def setUpClass(cls):
        cls.client = VisionNodeClient(NODE, 'test_launch_respawn_client')
        cls.image_pub = cls.client.publisher(Image, 'image', 10)
        cls.detections = cls.client.subscribe(Detection2DArray, 'detections', 10)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        rclpy.try_shutdown()

    def wait_until_active(self) -> None:
        def active() -> bool:
            try:  # no answer while the process is down or starting
                return self.client.get_state(timeout=10.0) == 'active'
            except TimeoutError:
                return False

        self.assertTrue(wait_for(active, ACTIVE_TIMEOUT, interval=0.5),
                        f'node not active within {ACTIVE_TIMEOUT} s')

    def test_a_active_with_simulated_time(self):
        self.wait_until_active()
        self.assertEqual(self.client.get_parameters('use_sim_time'), {'use_sim_time': True})

    def test_b_a_killed_node_is_started_and_activated_again(self):
        from test_launch_detect import bus_image

        self.wait_until_active()
        (first,) = node_pids()
        os.kill(first, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: node_pids() not in ([], [first]), 60.0, interval=0.2),
                        'no new node process')
        self.wait_until_active()
        self.assertNotIn(first, node_pids())
        image = bus_image()

        def bus_seen() -> bool:
            self.image_pub.publish(image)
            msg = self.detections.get(0.5)
            return msg is not None and any(
                d.results[0].hypothesis.class_id == BUS for d in msg.detections)

        self.assertTrue(wait_for(bus_seen, 60.0, interval=0.0), 'no bus after the respawn')


@launch_testing.post_shutdown_test()
class TestRespawnShutdown(unittest.TestCase):

    def test_the_last_node_exits_cleanly(self, proc_info):
        """The respawned process ends with the launch, cleanly (the killed one is not asked)."""
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
