"""launch_testing test of ``respawn``, ``use_sim_time``, ``dds_profile`` (detect.launch.py).

The launch runs yolov8n on ONNX Runtime with ``respawn:=true respawn_delay:=0.5
use_sim_time:=true autostart:=true dds_profile:=large_images``. The tests check that:

(a) the node is configured and activated by the launch, and its ``use_sim_time`` parameter is
    true (no ``/clock`` is published: the node's diagnostics still come, below);
(b) when its process is killed (SIGKILL, as a crash), the launch starts a new one, which
    autostart configures and activates again, and it detects the bus in bus.jpg;
(c) that process runs with the package's large-images Fast DDS profile in its environment
    (``FASTDDS_DEFAULT_PROFILES_FILE``), says so in its diagnostics (``middleware``), and the
    launch's own environment is left as it was.

How to run: see ``test_launch_detect.py``.
"""

from __future__ import annotations

import os
import signal
import unittest
from pathlib import Path

import launch_testing
from diagnostic_msgs.msg import DiagnosticArray
from vision_msgs.msg import Detection2DArray

from launch_helpers import NodeTest, launch_description
from launch_skip import skip_reason

BUS = '5'
ROOT = Path(__file__).resolve().parents[2]


generate_test_description = launch_description(
    'detect.launch.py', skip_reason(), backend='onnx', autostart='true', respawn='true',
    respawn_delay='0.5', use_sim_time='true', dds_profile='large_images')


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


class TestRespawn(NodeTest):
    """The tests run in name order against one launch."""

    OUTPUTS = {'detections': (Detection2DArray, 'detections', 10),
               'diagnostics': (DiagnosticArray, '/diagnostics', 10)}

    def wait_until_active(self) -> None:
        """Wait for 'active'; no answer while the process is down or starting."""
        super().wait_until_active(answer_within=10.0)

    def test_a_active_with_simulated_time(self):
        self.wait_until_active()
        self.assertEqual(self.client.get_parameters('use_sim_time'), {'use_sim_time': True})

    def test_b_a_killed_node_is_started_and_activated_again(self):
        self.wait_until_active()
        (first,) = node_pids()
        os.kill(first, signal.SIGKILL)
        self.wait(lambda: node_pids() not in ([], [first]), 60.0, 'a new node process', 0.2)
        self.wait_until_active()
        self.assertNotIn(first, node_pids())

        def bus_seen() -> bool:
            self.image_pub.publish(self.image)
            msg = self.detections.get(0.5)
            return msg is not None and any(
                d.results[0].hypothesis.class_id == BUS for d in msg.detections)

        self.wait(bus_seen, 60.0, 'a bus after the respawn', 0.0)

    def test_c_the_node_process_runs_with_the_dds_profile(self):
        self.wait_until_active()
        (pid,) = node_pids()
        variables = dict(item.split(b'=', 1) for item in
                         Path(f'/proc/{pid}/environ').read_bytes().split(b'\0') if b'=' in item)
        profile = Path(variables[b'FASTDDS_DEFAULT_PROFILES_FILE'].decode())
        self.assertEqual(profile.name, 'fastdds_large_images.xml')
        self.assertEqual(profile.read_bytes(),
                         (ROOT / 'config/fastdds_large_images.xml').read_bytes())
        self.assertNotEqual(os.environ.get('FASTDDS_DEFAULT_PROFILES_FILE'), str(profile))

        def middleware() -> str:
            msg = self.diagnostics.get(2.0)
            values = {kv.key: kv.value for status in (msg.status if msg else ())
                      for kv in status.values}
            return values.get('middleware', '')

        self.wait(lambda: 'fastdds_large_images.xml' in middleware(), 30.0,
                  "the profile in the node's diagnostics", 0.0)


@launch_testing.post_shutdown_test()
class TestRespawnShutdown(unittest.TestCase):

    def test_the_last_node_exits_cleanly(self, proc_info):
        """The respawned process ends with the launch, cleanly (the killed one is not asked)."""
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
