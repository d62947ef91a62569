"""config/fastdds_large_images.xml: it loads cleanly and carries large best-effort frames.

Two separate processes (within one process Fast DDS bypasses the transports), both started
with the profile, exchange 1080p images over a best-effort topic: the case that stock Fast DDS
settings handle worst.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROFILE = ROOT / 'config' / 'fastdds_large_images.xml'

pytestmark = pytest.mark.skipif(
    os.environ.get('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp') != 'rmw_fastrtps_cpp',
    reason='the profile is for rmw_fastrtps_cpp (Fast DDS) only')

_COMMON = r'''
import sys, time
import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from vision_nodes.ros.inputs.conversion import numpy_to_image
rclpy.init()
node = rclpy.create_node(sys.argv[1])
qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
'''

_SENDER = _COMMON + r'''
pub = node.create_publisher(Image, 'profile_test_image', qos)
frame = numpy_to_image(np.random.default_rng(0).integers(0, 255, (1080, 810, 3), np.uint8),
                       'bgr8')
deadline = time.monotonic() + 40
while time.monotonic() < deadline:
    frame.header.frame_id = str(time.monotonic())
    pub.publish(frame)
    time.sleep(0.1)
'''

_RECEIVER = _COMMON + r'''
sizes = []
node.create_subscription(Image, 'profile_test_image', lambda m: sizes.append(len(m.data)), qos)
deadline = time.monotonic() + 30
while len(sizes) < 5 and time.monotonic() < deadline:
    rclpy.spin_once(node, timeout_sec=0.1)
print('RECEIVED', len(sizes), sorted(set(sizes)))
sys.exit(0 if len(sizes) >= 5 else 1)
'''


def test_profile_carries_large_best_effort_frames():
    env = {**os.environ, 'FASTDDS_DEFAULT_PROFILES_FILE': str(PROFILE)}
    sender = subprocess.Popen([sys.executable, '-c', _SENDER, 'profile_sender'], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        receiver = subprocess.run([sys.executable, '-c', _RECEIVER, 'profile_receiver'],
                                  env=env, capture_output=True, text=True, timeout=90)
    finally:
        sender.kill()
        sender_output = sender.communicate()[0]
    output = receiver.stdout + receiver.stderr
    # Fast DDS reports a bad profile on stderr and carries on with its defaults.
    assert 'XMLPARSER' not in output + sender_output, output + sender_output
    assert receiver.returncode == 0, output
    assert f'[{1080 * 810 * 3}]' in output, output
