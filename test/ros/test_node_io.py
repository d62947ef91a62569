"""Field I/O of the node over real rclpy and DDS: QoS auto, compressed input, diagnostics,
dropped frames, and outputs that pair with their images by stamp.

Cameras are separate processes (``vision_nodes.tools.image_publisher``) sending with the
large-images Fast DDS profile, as the README tells camera drivers to.
"""

from __future__ import annotations

import array
import threading
import time
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')
pytest.importorskip('diagnostic_msgs.msg', reason='diagnostic_msgs is not installed')

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402
from vision_msgs.msg import Detection2DArray  # noqa: E402

from node_harness import Harness, start_camera  # noqa: E402
from sync_helpers import ApproximateTimeSynchronizer, stamp_ns  # noqa: E402
from vision_nodes.stage_times import STAGES, stage_key  # noqa: E402
from vision_nodes.tools.client import wait_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LARGE_IMAGES = {'FASTDDS_DEFAULT_PROFILES_FILE': str(ROOT / 'config' / 'fastdds_large_images.xml')}


def _params(model_dir, cache, **extra):
    return {'model_dir': str(model_dir), 'engine_cache_dir': str(cache), 'backend': 'onnx',
            **extra}


def _camera(assets, seconds, *extra, rate=15.0):
    return start_camera(assets / 'bus.jpg', seconds, rate, '/image', *extra,
                        env=LARGE_IMAGES)


def _stop(camera) -> str:
    camera.terminate()
    out, _ = camera.communicate(timeout=20)
    return out


def _status(diagnostics, node: str, predicate=lambda s: True, timeout: float = 30.0):
    """The next DiagnosticStatus of ``node`` matching ``predicate``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = diagnostics.get(max(0.0, deadline - time.monotonic()))
        if msg is None:
            return None
        for status in msg.status:
            if status.name == node and predicate(status):
                return status
    return None


def _values(status) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def test_qos_auto_hears_reliable_late_best_effort_and_best_effort_cameras(
        model_dir, engine_cache_dir, assets):
    """qos_reliability auto: a reliable camera, a best-effort camera that appears after
    activation (the node re-subscribes and says why, once), and a best-effort camera present
    at activation: detections come back in every case."""
    h = Harness(_params(model_dir, engine_cache_dir), 'vn_qos', env=LARGE_IMAGES)
    try:
        c = h.client
        answers = c.subscribe(Detection2DArray, '/detections', 50)
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        assert h.node.wait_for_output("QoS auto: no publisher on '/image' yet", 30.0)
        camera = _camera(assets, 30, '--reliability', 'reliable')
        assert answers.get(30.0) is not None, 'nothing from a reliable camera'
        _stop(camera)
        answers.clear()
        camera = _camera(assets, 30, '--reliability', 'best_effort')
        assert h.node.wait_for_output('re-subscribing: QoS auto: best effort', 30.0)
        assert answers.get(30.0) is not None, 'nothing from a late best-effort camera'
        assert h.node.output().count('re-subscribing') == 1
        assert c.change_state('deactivate')
        answers.clear()
        marker = len(h.node.output())
        assert c.change_state('activate')
        assert h.node.wait_for_output('QoS auto: best effort, as', 30.0)
        assert 're-subscribing' not in h.node.output()[marker:]
        assert answers.get(30.0) is not None, 'nothing from a best-effort camera'
        _stop(camera)
    finally:
        h.close()


def test_compressed_input_and_bad_compressed_data(model_dir, engine_cache_dir, assets):
    """image_transport compressed: JPEG frames on image/compressed give detections; garbage
    and a truncated JPEG are one throttled error each and the node goes on."""
    h = Harness(_params(model_dir, engine_cache_dir, image_transport='compressed'),
                'vn_jpeg', remaps={'image': '/camera/image_raw'})
    try:
        c = h.client
        answers = c.subscribe(Detection2DArray, '/detections', 50)
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        assert h.node.wait_for_output("'/camera/image_raw/compressed'", 30.0)
        bad = c.publisher(CompressedImage, '/camera/image_raw/compressed', 10)
        assert wait_for(lambda: bad.get_subscription_count() == 1, 30.0)
        good = (assets / 'bus.jpg').read_bytes()
        for data, text in ((b'not an image at all', 'skipping image'),
                           (good[:len(good) // 2], 'truncated')):
            msg = CompressedImage(format='jpeg')
            msg.data = array.array('B', data)
            bad.publish(msg)
            assert h.node.wait_for_output(text, 30.0), text
        camera = start_camera(assets / 'bus.jpg', 30, 10.0, '/camera/image_raw', '--compressed')
        got = answers.get(30.0)
        _stop(camera)
        assert got is not None and len(got.detections) >= 4
        assert h.node.alive()
    finally:
        h.close()


def test_malformed_image_bytes_are_one_line_and_the_node_goes_on(
        model_dir, engine_cache_dir, assets):
    """Serialized Image bytes cut short or with a forged data length (a broken or hostile
    publisher) are refused in one counted line naming the message, not dropped unseen; the
    next good frame gives detections."""
    from rclpy.serialization import serialize_message

    from vision_nodes.ros.inputs.conversion import numpy_to_image

    h = Harness(_params(model_dir, engine_cache_dir), 'vn_cdr')
    try:
        c = h.client
        answers = c.subscribe(Detection2DArray, '/detections', 50)
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        bad = c.publisher(Image, '/image', 10)
        assert wait_for(lambda: bad.get_subscription_count() == 1, 30.0)
        good = serialize_message(numpy_to_image(np.zeros((8, 8, 3), np.uint8), 'bgr8'))
        forged = good[:44] + (2 ** 31).to_bytes(4, 'little') + good[48:]
        for data, text in ((good[:30], 'encoding claims 5 B'), (forged, 'data claims')):
            bad.publish(data)
            assert h.node.wait_for_output(text, 30.0), text
        assert h.node.wait_for_output('malformed serialized sensor_msgs/Image', 1.0)
        camera = _camera(assets, 30, rate=10.0)
        got = answers.get(30.0)
        _stop(camera)
        assert got is not None and len(got.detections) >= 4
        assert h.node.alive()
    finally:
        h.close()


def test_diagnostics_report_rates_drops_and_silence(model_dir, engine_cache_dir, assets):
    """/diagnostics at about 1 Hz: unconfigured OK; active without a camera an ERROR naming the
    likely cause; at 30 Hz into a ~65 ms model frames are processed, stale ones dropped and
    counted, and the rate below expected_rate is a warning."""
    h = Harness(_params(model_dir, engine_cache_dir, no_image_timeout=1.0,
                        expected_rate=30.0), 'vn_diag')
    try:
        c = h.client
        diagnostics = c.subscribe(DiagnosticArray, '/diagnostics', 50)
        status = _status(diagnostics, '/vn_diag')
        assert status is not None and status.level == b'\x00'
        assert _values(status)['state'] == 'unconfigured'
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        silent = _status(diagnostics, '/vn_diag', lambda s: s.level == b'\x02')
        assert silent is not None
        assert "no publisher on '/image'" in silent.message
        camera = _camera(assets, 120, rate=30.0)
        # Waits for the rate warning itself: on a busy machine a status may first warn only
        # that images reach the node late (the rate is judged once it has settled).
        busy = _status(diagnostics, '/vn_diag',
                       lambda s: int(_values(s)['frames dropped']) > 5
                       and int(_values(s)['frames processed']) > 5
                       and 'expected 30 Hz' in s.message, timeout=90.0)
        _stop(camera)
        assert busy is not None and busy.level != b'\x00'
        values = _values(busy)
        assert values['backend'] == 'onnx' and values['models'] == 'yolov8n'
        assert float(values['latency p50 (ms)']) > 0
        # The node's own stage breakdown: every stage a number; the network's time counted.
        stages = {stage: float(values[stage_key(stage)]) for stage in STAGES}
        assert min(stages.values()) >= 0 and stages['inference'] > 0
        assert stages['dds_in'] > 0 and stages['receive'] > 0  # middleware timestamps read
        assert stages['handoff'] > 0
    finally:
        h.close()


def test_detections_pair_with_their_images_by_stamp(model_dir, engine_cache_dir, assets):
    """Every Detection2DArray carries its image's header: an approximate-time synchroniser
    (message_filters' policy) pairs images and detections with identical stamps."""
    h = Harness(_params(model_dir, engine_cache_dir), 'vn_sync')
    try:
        c = h.client
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        sync = ApproximateTimeSynchronizer(2, queue_size=30, slop=0.01)
        best_effort = QoSProfile(depth=5, history=HistoryPolicy.KEEP_LAST,
                                 reliability=ReliabilityPolicy.BEST_EFFORT)
        sync.connect(c.node, [(Image, '/image', best_effort),
                              (Detection2DArray, '/detections', 10)])
        camera = _camera(assets, 30, rate=10.0)
        assert wait_for(lambda: len(sync.sets) >= 3, 30.0), sync.pending()
        _stop(camera)
        for image, dets in sync.sets:
            assert stamp_ns(image) == stamp_ns(dets)
            assert image.header.frame_id == dets.header.frame_id
    finally:
        h.close()


def test_stale_frames_are_dropped_not_queued(model_dir, engine_cache_dir, assets):
    """At 30 Hz into a ~65 ms model the answers are about the newest frames: their age stays
    near one inference, not growing with a queue."""
    h = Harness(_params(model_dir, engine_cache_dir), 'vn_age')
    try:
        c = h.client
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        ages = []
        lock = threading.Lock()

        def on_detections(msg):
            with lock:
                ages.append(c.node.get_clock().now().nanoseconds - stamp_ns(msg))

        c.node.create_subscription(Detection2DArray, '/detections', on_detections, 50)
        camera = _camera(assets, 15, rate=30.0)
        camera.wait(60)
        with lock:
            assert len(ages) >= 20, len(ages)
            first, last = ages[3:10], ages[-7:]
        # A queue would make the last answers older than the first ones by seconds.
        assert sorted(last)[len(last) // 2] < sorted(first)[len(first) // 2] + 0.5e9
    finally:
        h.close()


def test_lazy_and_diagnostics_agree(model_dir, engine_cache_dir):
    """A lazy node with no subscriber is not in error for taking no images: every status it
    publishes after activation is OK, up to one stamped well past its ``no_image_timeout``."""
    timeout_s = 1.0
    h = Harness(_params(model_dir, engine_cache_dir, lazy=True, no_image_timeout=timeout_s),
                'vn_lazy_diag')
    try:
        c = h.client
        diagnostics = c.subscribe(DiagnosticArray, '/diagnostics', 50)
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        # The node stamps its diagnostics with its clock, the same system time as this one's;
        # waiting for a stamp, not for a fixed window, keeps the check true on a busy machine.
        activated = c.node.get_clock().now().nanoseconds
        late = activated + int(1.5 * timeout_s * 1e9)
        after = []  # the node's statuses since activation, up to one stamped late enough

        def past_the_timeout(msg) -> bool:
            mine = [s for s in msg.status if s.name == '/vn_lazy_diag']
            after.extend(mine if stamp_ns(msg) >= activated else [])
            return bool(mine) and stamp_ns(msg) >= late
        assert diagnostics.get(60.0, past_the_timeout) is not None, \
            f'no diagnostics stamped past the timeout; saw {len(after)} since activation'
        assert all(s.level == b'\x00' for s in after), [s.message for s in after]
        assert 'lazy' in _values(after[-1])['state']
    finally:
        h.close()


def test_simulated_time_without_a_clock_keeps_diagnostics_and_lazy_mode(model_dir,
                                                                        engine_cache_dir):
    """use_sim_time with no /clock (a bag not playing yet): the node's clock stands at 0, yet
    its diagnostics keep coming, stamped in that time, and lazy mode still subscribes once an
    output has a subscriber (both run on the steady clock)."""
    h = Harness(_params(model_dir, engine_cache_dir, lazy=True, use_sim_time=True),
                'vn_sim_time')
    try:
        c = h.client
        diagnostics = c.subscribe(DiagnosticArray, '/diagnostics', 50)
        first = _status(diagnostics, '/vn_sim_time')
        assert first is not None, 'no diagnostics under simulated time without /clock'
        assert _status(diagnostics, '/vn_sim_time') is not None  # and they go on
        assert c.change_state('configure', timeout=300) and c.change_state('activate')
        graph = c.node
        assert wait_for(lambda: _status(diagnostics, '/vn_sim_time', lambda s: 'lazy' in
                                        _values(s)['state'], 5.0) is not None, 30.0)
        assert graph.count_subscribers('/image') == 0  # lazy: nothing listens yet
        c.subscribe(Detection2DArray, '/detections', 10)
        assert wait_for(lambda: graph.count_subscribers('/image') == 1, 30.0)
        stamped = diagnostics.get(10.0)
        assert stamped is not None and stamped.header.stamp.sec == 0  # the node's time
    finally:
        h.close()
