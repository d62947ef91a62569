"""Lifecycle cycles leave nothing behind: the short form of ``scripts/soak.py --lifecycle``.

* Six configure/activate/deactivate/cleanup cycles of a node process with three cameras
  (``image_topics``), bytetrack, 3D from an aligned depth topic and the annotated images
  subscribed: every active phase gets each camera's detections (and the first camera's
  ``detections_3d``, every camera's ``annotated``) back, and the node's threads, open fds,
  publishers and subscriptions are the same after every activate and after every cleanup.
  Its memory is judged by the soak script over 100 cycles, not here (too noisy for six).
* In this process: cycles leave no entry behind in the node's callback groups (rclpy kept a
  weak reference to every subscription, timer, guard condition and event handler ever
  destroyed: dozens a cycle, for good).
* The ``vision_node`` program (``ros/main.py``) applies the allocator settings before rclpy
  is imported: its worker threads then share one glibc arena, and what they freed is given
  back by cleanup's release. Applied after the import, as ``node.main`` did, rclpy's native
  threads had made two arenas already; workers took turns on them and kept what they freed
  there (the lifecycle soak's memory grew again after ~50 cycles).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')

from rclpy.parameter import Parameter  # noqa: E402

from vision_nodes.ros.process.compat import lifecycle_state  # noqa: E402
from vision_nodes.ros.node import VisionNode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'scripts'))
import soak  # noqa: E402

CYCLES = 6


def test_cycles_keep_threads_fds_and_endpoints_and_every_active_phase_answers(
        model_dir, engine_cache_dir):
    args = soak.parse_args(['--lifecycle', '--cycles', str(CYCLES), '--model-dir',
                            str(model_dir), '--engine-cache-dir', str(engine_cache_dir)])
    report = soak.run_lifecycle(args, name='vn_lifecycle_soak')
    assert report['error'] is None, report['error']
    assert len(report['cycles']) == CYCLES
    for row in report['cycles']:
        for camera in soak.CAMERAS:
            assert row['answered'].get(f'{camera}/detections', 0) >= args.frames, row
            assert row['answered'].get(f'{camera}/annotated', 0) >= 1, row
        assert row['answered'].get(f'{soak.CAMERAS[0]}/detections_3d', 0) >= 1, row
    criteria = {c['criterion']: c for c in report['criteria']}
    for phase in ('activate', 'cleanup'):
        for key in soak.CONSTANT_KEYS:
            item = criteria[f'{key} the same after every {phase}']
            assert item['passed'], item
    assert report['cycles'][0]['active']['subscriptions'] > 0
    assert report['cycles'][0]['clean']['subscriptions'] == 0


def _group_entries(node: VisionNode) -> int:
    """Entries of the node's default callback group (its timers, guard conditions, event
    handlers and the depth and camera_info subscriptions are there)."""
    return len(node.default_callback_group.entities)


def test_cycles_leave_no_callback_group_entries(model_dir, engine_cache_dir):
    context = rclpy.Context()
    rclpy.init(context=context)
    overrides = [Parameter('engine_cache_dir', value=str(engine_cache_dir)),
                 Parameter('model_dir', value=str(model_dir)),
                 Parameter('image_topics', value=['/a/image_raw', '/b/image_raw']),
                 Parameter('depth_source', value='topic'),
                 Parameter('publish_annotated', value=True)]
    node = VisionNode('vn_group_entries', context=context, parameter_overrides=overrides)
    try:
        counts = []
        for _ in range(3):
            for step, state in (('configure', 'inactive'), ('activate', 'active'),
                                ('deactivate', 'inactive'), ('cleanup', 'unconfigured')):
                getattr(node, f'trigger_{step}')()
                assert lifecycle_state(node) == state, step
            counts.append(_group_entries(node))
        assert counts[0] == counts[-1], counts
    finally:
        node.release()
        node.destroy_node()
        rclpy.shutdown(context=context)


# The node module replaced by a stand-in that imports rclpy (whose native threads start then),
# lets worker threads come and go with 60 MB of frame buffers each, releases what they freed
# as cleanup does, and reports the glibc arenas and the memory still held.
_PROGRAM_PROBE = r'''
import ctypes, json, os, sys, tempfile, types
sys.path.insert(0, sys.argv[1])

def stand_in(args=None):
    import rclpy  # noqa: F401
    from thread_churn import churn

    kept = churn()
    libc = ctypes.CDLL('libc.so.6')
    libc.fopen.restype = ctypes.c_void_p
    path = tempfile.mktemp()
    stream = ctypes.c_void_p(libc.fopen(path.encode(), b'w'))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    arenas = open(path).read().count('<heap nr=')
    os.unlink(path)
    print(json.dumps({'arenas': arenas, 'kept_mb': kept}))

sys.modules['vision_nodes.ros.node'] = types.SimpleNamespace(main=stand_in)
from vision_nodes.ros.main import main
main()
'''


def test_the_program_sets_the_allocator_before_rclpy_makes_threads():
    from thread_churn import PATH

    result = subprocess.run([sys.executable, '-c', _PROGRAM_PROBE, PATH], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report['arenas'] == 1, report
    assert report['kept_mb'] < 10, report
