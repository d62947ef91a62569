"""Frame statistics, the health rules and the DiagnosticArray built from them.

FrameStats takes its clock as an argument: the tests drive it with a settable clock so rates
and windows are exact; one test hammers it from real threads. Messages go through rclpy's
serialiser.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.serialization import deserialize_message, serialize_message
from builtin_interfaces.msg import Time

from vision_nodes.ros.process.diagnostics import (NodeFacts, diagnostic_array, diagnostic_status,
                                                  status_values)
from vision_nodes.stage_times import STAGES, FrameClock, StageTimes, mark, stage_key, timing
from vision_nodes.ros.inputs.qos import SLOW_DELIVERY_CAUSE, explain_slow_delivery, middleware
from vision_nodes.stats import (DELIVERY_MIN_FRAMES, ERROR, OK, SLOW_DELIVERY_S, WARN,
                                FrameStats, HealthLimits, assess, host_rss_bytes,
                                stamp_latency)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _stream(stats: FrameStats, clock: Clock, rate: float, seconds: float,
            process_every: int = 1, latency: float = 0.05, drop_every: int = 0,
            fail: bool = False) -> None:
    """Feed ``rate`` Hz of frames for ``seconds``.

    One in ``process_every`` is processed, or all but one in ``drop_every``; the rest are
    dropped. With ``fail`` every frame fails instead.
    """
    for i in range(int(round(rate * seconds))):
        stats.on_received()
        if fail:
            stats.on_error('inference failed on a frame')
        elif i % process_every == 0 and not (drop_every and i % drop_every == 0):
            stats.on_processed(latency, latency / 2)
        else:
            stats.on_dropped()
        clock.now += 1.0 / rate


# ----------------------------------------------------------------- FrameStats
def test_rates_counts_and_percentiles_over_the_window():
    clock = Clock()
    stats = FrameStats(window_s=10.0, clock=clock)
    for i in range(200):  # 20 Hz for 10 s, latencies 10..209 ms
        stats.on_received()
        stats.on_processed(0.010 + i / 1000, 0.004)
        clock.now += 0.05
    snap = stats.snapshot()
    assert snap.received == snap.processed == 200
    assert snap.input_rate_hz == pytest.approx(20.0, rel=0.02)
    assert snap.processed_rate_hz == pytest.approx(20.0, rel=0.02)
    window = np.array([0.010 + i / 1000 for i in range(200)])
    assert snap.latency_p50_s == pytest.approx(np.percentile(window, 50))
    assert snap.latency_p95_s == pytest.approx(np.percentile(window, 95))
    assert snap.processing_p50_s == pytest.approx(0.004)
    assert snap.since_last_image_s == pytest.approx(0.05)
    clock.now += 5.0  # half the window later, half the frames have left it
    snap = stats.snapshot()
    assert snap.received_in_window == 100 and snap.received == 200
    assert snap.input_rate_hz == pytest.approx(10.0, rel=0.03)
    assert snap.latency_p50_s == pytest.approx(np.percentile(window[100:], 50))


def test_rate_of_a_stream_that_began_inside_the_window():
    """A camera starting late is measured from its first frame, not from activation."""
    clock = Clock()
    stats = FrameStats(window_s=10.0, clock=clock)
    clock.now += 6.0  # activated, nothing for 6 s
    _stream(stats, clock, rate=15.0, seconds=2.0)
    snap = stats.snapshot()
    assert snap.input_rate_hz == pytest.approx(15.0, rel=0.05)
    assert snap.processed_rate_hz == pytest.approx(15.0, rel=0.05)
    assert snap.since_first_image_s == pytest.approx(2.0, rel=0.02)


def test_saturated_window_measures_over_the_kept_events():
    clock = Clock()
    stats = FrameStats(window_s=10.0, max_events=50, clock=clock)
    _stream(stats, clock, rate=100.0, seconds=5.0)  # 500 frames, 50 kept
    snap = stats.snapshot()
    assert snap.received == 500 and snap.received_in_window == 50
    assert snap.input_rate_hz == pytest.approx(100.0, rel=0.05)


def test_drops_errors_and_reset():
    clock = Clock()
    stats = FrameStats(window_s=10.0, clock=clock)
    _stream(stats, clock, rate=10.0, seconds=3.0, process_every=3)
    stats.on_error('inference failed: bad\nthing')
    snap = stats.snapshot()
    assert (snap.received, snap.processed, snap.dropped, snap.errors) == (30, 10, 20, 1)
    assert snap.last_error == 'inference failed: bad\\x0athing'
    stats.reset()
    snap = stats.snapshot()
    assert (snap.received, snap.processed, snap.dropped, snap.errors) == (0, 0, 0, 0)
    assert snap.since_last_image_s is None and snap.latency_p50_s is None
    assert snap.input_rate_hz == 0.0 and snap.last_error is None


def test_updates_from_many_threads_are_all_counted():
    stats = FrameStats(window_s=60.0)

    def work():
        for _ in range(2000):
            stats.on_received()
            stats.on_processed(0.01, 0.005)
            stats.on_dropped()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    reader_snaps = [stats.snapshot() for _ in range(50)]  # read while they write
    for thread in threads:
        thread.join()
    snap = stats.snapshot()
    assert (snap.received, snap.processed, snap.dropped) == (8000, 8000, 8000)
    assert all(s.received >= s.processed - 1 for s in reader_snaps)


def test_stamp_latency():
    assert stamp_latency(0, 0, 5_000_000_000) is None  # an unstamped image
    assert stamp_latency(4, 900_000_000, 5_000_000_000) == pytest.approx(0.1)


def test_host_rss_follows_memory_use():
    before = host_rss_bytes()
    assert before is not None and before > 10 << 20
    # Touched, so resident. Large against what other threads of this process (a runtime's
    # pool, a test before this one) may free meanwhile: about 20 MB was seen.
    block = np.ones(256 << 20, np.uint8)
    after = host_rss_bytes()
    assert after - before > 160 << 20, (before, after)
    del block


# ----------------------------------------------------------------- health rules
def _snap_after(rate: float, seconds: float = 12.0, process_every: int = 1,
                latency: float = 0.05, silent_for: float = 0.0, errors: int = 0):
    clock = Clock()
    stats = FrameStats(window_s=10.0, clock=clock)
    if rate:
        _stream(stats, clock, rate, seconds, process_every, latency)
    for _ in range(errors):
        stats.on_error('skipping image: unsupported encoding')
    clock.now += silent_for
    return stats.snapshot()


def test_healthy_stream_is_ok():
    health = assess(_snap_after(30.0), HealthLimits(expected_rate_hz=30.0, max_latency_s=0.1))
    assert health.level == OK and 'processing 30' in health.message


def test_inactive_node_is_ok_whatever_its_counters():
    health = assess(_snap_after(0.0, silent_for=60.0), HealthLimits(), state='inactive')
    assert health.level == OK and health.message.startswith('inactive')


def test_no_image_after_activation_is_an_error_with_its_cause():
    snap = _snap_after(0.0, silent_for=6.0)
    calls = []

    def cause():
        calls.append(1)
        return "no publisher on '/camera/image'"

    health = assess(snap, HealthLimits(no_image_timeout_s=5.0), explain_silence=cause)
    assert health.level == ERROR and calls == [1]
    assert 'no image for 6 s (since activation)' in health.message
    assert "no publisher on '/camera/image'" in health.message
    # Before the timeout the cause is not even looked up.
    health = assess(_snap_after(0.0, silent_for=4.0), HealthLimits(no_image_timeout_s=5.0),
                    explain_silence=cause)
    assert health.level == OK and calls == [1]


def test_images_that_stop_are_an_error():
    health = assess(_snap_after(10.0, silent_for=7.0), HealthLimits(no_image_timeout_s=5.0))
    assert health.level == ERROR and 'since the last one' in health.message
    assert assess(_snap_after(10.0, silent_for=7.0),
                  HealthLimits(no_image_timeout_s=0.0)).level == OK  # check off


@pytest.mark.parametrize('drop_every,process_every,level,dropped',
                         [(0, 1, OK, 0), (4, 1, WARN, 25), (0, 3, ERROR, 67)])
def test_model_slower_than_the_camera(drop_every, process_every, level, dropped):
    clock = Clock()
    stats = FrameStats(window_s=10.0, clock=clock)
    _stream(stats, clock, 30.0, 12.0, process_every=process_every, drop_every=drop_every)
    health = assess(stats.snapshot(), HealthLimits(expected_rate_hz=30.0))
    assert health.level == level
    if level != OK:
        assert 'the model is slower than the camera' in health.message
        assert f'{dropped}% are dropped' in health.message


def test_slightly_slow_processing_is_a_warning():
    snap = _snap_after(25.0)  # 25 Hz of an expected 30: between 50 % and 90 %
    health = assess(snap, HealthLimits(expected_rate_hz=30.0))
    assert health.level == WARN
    assert 'images arrive at only 25.0 Hz' in health.message  # the camera, not the model
    assert assess(snap, HealthLimits(expected_rate_hz=0.0)).level == OK  # check off


def test_rate_is_not_judged_before_the_stream_settles():
    snap = _snap_after(30.0, seconds=1.0, process_every=3)
    assert assess(snap, HealthLimits(expected_rate_hz=30.0)).level == OK


@pytest.mark.parametrize('latency,level', [(0.08, OK), (0.15, WARN), (0.25, ERROR)])
def test_latency_bound(latency, level):
    health = assess(_snap_after(10.0, latency=latency), HealthLimits(max_latency_s=0.1))
    assert health.level == level
    if level != OK:
        assert f'latency p95 {latency * 1e3:.0f} ms is above max_latency 100 ms' \
            in health.message


def test_errors_warn_and_all_failing_is_an_error():
    health = assess(_snap_after(10.0, errors=3), HealthLimits())
    assert health.level == WARN and '3 frames failed' in health.message
    assert 'unsupported encoding' in health.message
    clock = Clock()
    stats = FrameStats(window_s=10.0, clock=clock)
    _stream(stats, clock, 10.0, 12.0)
    _stream(stats, clock, 10.0, 11.0, fail=True)  # long enough to push every success out
    health = assess(stats.snapshot(), HealthLimits())
    assert health.level == ERROR
    assert health.message.startswith('every frame failed in the last 10 s: ')
    assert health.message.endswith(' errors (last: inference failed on a frame)')


def test_reasons_are_combined_worst_first():
    snap = _snap_after(30.0, process_every=3, latency=0.15)
    health = assess(snap, HealthLimits(expected_rate_hz=30.0, max_latency_s=0.1))
    assert health.level == ERROR
    first, second = health.message.split('; ')
    assert first.startswith('processing') and second.startswith('latency p95')


def test_images_delivered_late_are_a_warning_with_their_cause():
    snap, calls = _snap_after(30.0), []

    def cause():
        calls.append(1)
        return 'stock Fast DDS ...'

    late = SLOW_DELIVERY_S * 1.5
    health = assess(snap, HealthLimits(), delivery=(late, DELIVERY_MIN_FRAMES),
                    explain_slow_delivery=cause)
    assert health.level == WARN and calls == [1]
    assert health.message == (f'images reach the node {late * 1e3:.0f} ms after DDS delivered '
                              'them (median): stock Fast DDS ...')
    # Too few frames to judge, quick delivery, or none measured: OK, the cause not looked up.
    for delivery in [(late, DELIVERY_MIN_FRAMES - 1), (SLOW_DELIVERY_S * 0.5, 200), None]:
        health = assess(snap, HealthLimits(), delivery=delivery, explain_slow_delivery=cause)
        assert health.level == OK and calls == [1]
    # With a worse reason, both are said, the worst first.
    health = assess(_snap_after(30.0, process_every=3), HealthLimits(expected_rate_hz=30.0),
                    delivery=(late, 100), explain_slow_delivery=cause)
    assert health.level == ERROR and health.message.split('; ')[1].startswith('images reach')


def test_the_cause_of_late_images_depends_on_the_middleware():
    assert explain_slow_delivery('rmw_fastrtps_cpp', {}) == SLOW_DELIVERY_CAUSE
    assert 'config/fastdds_large_images.xml' in SLOW_DELIVERY_CAUSE
    assert 'dds_profile:=large_images' in SLOW_DELIVERY_CAUSE
    profiled = {'FASTDDS_DEFAULT_PROFILES_FILE': '/share/config/fastdds_large_images.xml'}
    mine = explain_slow_delivery('rmw_fastrtps_cpp', profiled)
    assert mine.startswith("this node runs with the Fast DDS profile '/share/config/fastdds_")
    assert 'start the camera driver, the sender, with it too' in mine
    other = explain_slow_delivery('rmw_cyclonedds_cpp')
    assert 'Fast DDS' not in other and '(rmw_cyclonedds_cpp)' in other
    assert 'compressed' in other and '()' not in explain_slow_delivery('')


def test_the_middleware_is_named_with_its_profile_file():
    assert middleware('rmw_fastrtps_cpp', {}) == (
        "rmw_fastrtps_cpp, Fast DDS's default settings (no FASTDDS_DEFAULT_PROFILES_FILE)")
    assert middleware('rmw_fastrtps_cpp', {'FASTDDS_DEFAULT_PROFILES_FILE': ' /p/large.xml '}) \
        == "rmw_fastrtps_cpp, profile '/p/large.xml'"
    assert middleware('rmw_cyclonedds_cpp', {'FASTDDS_DEFAULT_PROFILES_FILE': '/p.xml'}) == \
        'rmw_cyclonedds_cpp'
    assert middleware('') == 'unknown'
    assert middleware().startswith('rmw_')  # this process's, from rclpy


# ----------------------------------------------------------------- the ROS message
FACTS = NodeFacts(node_name='/robot/vision_node', hardware_id='cpu (x86_64)',
                  models=('yolov8n',), backend='onnx', precision='fp32', device='cpu',
                  engine_cache='hit', image_topic='/robot/camera/image',
                  image_transport='raw', qos='reliable, depth 1 (auto)',
                  middleware='rmw_fastrtps_cpp, profile /p.xml')
KEYS = ['state', 'image topic', 'image transport', 'subscription QoS', 'middleware',
        'frames received', 'frames processed', 'frames dropped', 'errors', 'window (s)',
        'input rate (Hz)', 'processed rate (Hz)', 'expected rate (Hz)', 'frames dropped in window',
        'errors in window', 'latency p50 (ms)', 'latency p95 (ms)', 'max latency (ms)',
        'processing p50 (ms)', 'time since last image (s)', 'last error', 'models', 'backend',
        'precision', 'precision agreement', 'device', 'engine cache', 'host RSS (MiB)']


def _round_trip(msg: DiagnosticArray) -> DiagnosticArray:
    return deserialize_message(serialize_message(msg), DiagnosticArray)


def test_diagnostic_array_round_trips_with_every_key():
    snap = _snap_after(30.0, process_every=3)
    limits = HealthLimits(expected_rate_hz=30.0, max_latency_s=0.1)
    status = diagnostic_status(snap, FACTS, limits, device_memory_bytes=512 << 20)
    msg = _round_trip(diagnostic_array(Time(sec=12, nanosec=5), status))
    assert msg.header.stamp.sec == 12 and len(msg.status) == 1
    got = msg.status[0]
    assert got.level == DiagnosticStatus.ERROR
    assert got.name == '/robot/vision_node' and got.hardware_id == 'cpu (x86_64)'
    assert 'the model is slower than the camera' in got.message
    values = {kv.key: kv.value for kv in got.values}
    assert [kv.key for kv in got.values] == KEYS + ['device memory (MiB)']
    assert values['device memory (MiB)'] == '512'
    assert values['frames received'] == '360' and values['frames processed'] == '120'
    assert float(values['processed rate (Hz)']) == pytest.approx(10.0, rel=0.05)
    assert values['latency p50 (ms)'] == '50.0' and values['expected rate (Hz)'] == '30'
    assert values['models'] == 'yolov8n' and values['engine cache'] == 'hit'
    assert int(values['host RSS (MiB)']) > 10


@pytest.mark.parametrize('state,level', [('active', DiagnosticStatus.ERROR),
                                         ('inactive', DiagnosticStatus.OK),
                                         ('unconfigured', DiagnosticStatus.OK)])
def test_levels_reach_the_message(state, level):
    snap = _snap_after(0.0, silent_for=30.0)
    status = diagnostic_status(snap, FACTS, HealthLimits(), state=state,
                               explain_silence=lambda: 'QoS mismatch: /cam (best effort)')
    got = _round_trip(diagnostic_array(Time(), status)).status[0]
    assert got.level == level
    values = {kv.key: kv.value for kv in got.values}
    assert values['state'] == state and values['time since last image (s)'] == 'never'
    assert values['latency p95 (ms)'] == 'n/a' and values['max latency (ms)'] == 'not checked'
    if state == 'active':
        assert 'QoS mismatch: /cam (best effort)' in got.message


def test_untrusted_text_is_clipped_in_the_message():
    snap = _snap_after(0.0, silent_for=30.0)
    status = diagnostic_status(snap, FACTS, HealthLimits(),
                               explain_silence=lambda: 'x' * 5000 + '\n',
                               extra={'camera': 'evil\nvalue'})
    got = _round_trip(diagnostic_array(Time(), status)).status[0]
    assert len(got.message) < 700 and '\n' not in got.message
    assert {kv.key: kv.value for kv in got.values}['camera'] == 'evil\\x0avalue'


def test_status_values_without_device_memory_or_rss():
    pairs = status_values(_snap_after(5.0), FACTS, HealthLimits(), 'active')
    assert [k for k, _ in pairs] == KEYS and dict(pairs)['host RSS (MiB)'] == 'n/a'


# ----------------------------------------------------------------- stage times


def test_frame_clock_marks_end_the_stage_begun_at_the_last_mark():
    clock = FrameClock(start=0.0)
    clock.add('dds_in', 0.002)
    with timing(clock):
        mark('convert')
        mark('preprocess')
        mark('convert')  # a stage met twice adds up
    mark('publish')  # outside the block: no current clock, nothing counted
    assert set(clock.spent) == {'dds_in', 'convert', 'preprocess'}
    assert clock.spent['dds_in'] == 0.002
    assert clock.spent['convert'] > clock.spent['preprocess'] >= 0.0


def test_stage_medians_over_the_last_frames_and_their_diagnostic_values():
    times = StageTimes(window=3)
    assert times.medians() == {} and len(times) == 0
    assert set(times.diagnostic_values().values()) == {'n/a'}
    for inference in (0.010, 0.020, 0.030, 0.040):  # the first falls out of the window
        times.add({'inference': inference, 'convert': 0.001, 'receive': -1e-6})
    medians = times.medians()
    assert list(medians) == list(STAGES) and len(times) == 3
    assert medians['inference'] == pytest.approx(0.030)
    assert medians['receive'] == 0.0 and medians['publish'] == 0.0  # negative skew, absent
    values = times.diagnostic_values()
    assert values[stage_key('inference')] == '30.000' and values[stage_key('convert')] == '1.000'
    assert times.diagnostic_values(medians) == values  # medians taken once, formatted alike
    status = diagnostic_status(_snap_after(5.0), FACTS, HealthLimits(), extra=values)
    got = {kv.key: kv.value for kv in _round_trip(diagnostic_array(Time(), status)).status[0]
           .values}
    assert [k for k in got if k.startswith('stage ')] == [stage_key(s) for s in STAGES]
    # The median receive stage reaches the health rules.
    slow = StageTimes()
    for _ in range(DELIVERY_MIN_FRAMES):
        slow.add({'receive': 0.020})
    values, delivery = slow.report()
    assert values == slow.diagnostic_values()
    assert delivery == (slow.medians()['receive'], len(slow)) == (0.020, DELIVERY_MIN_FRAMES)
    status = diagnostic_status(_snap_after(5.0), FACTS, HealthLimits(), delivery=delivery,
                               explain_slow_delivery=lambda: 'why')
    assert status.level == bytes([WARN])
    assert status.message.endswith('20 ms after DDS delivered them (median): why')


def test_stage_clocks_of_threads_do_not_mix():
    clocks = [FrameClock() for _ in range(4)]

    def work(clock: FrameClock, stage: str) -> None:
        with timing(clock):
            for _ in range(200):
                mark(stage)

    threads = [threading.Thread(target=work, args=(c, f's{i}')) for i, c in enumerate(clocks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [list(c.spent) for c in clocks] == [[f's{i}'] for i in range(4)]


def test_each_camera_says_when_its_own_frames_reach_the_node_late():
    """Several cameras: each camera's entry has its own stage medians, and the slow-delivery
    warning goes on the entry of the camera whose frames come late, not on the others'."""
    from node_harness import node_in_own_context
    from vision_nodes.ros.inputs.cameras import CameraInputs
    from vision_nodes.ros.inputs.frame_path import FramePath

    params = {'image_transport': 'raw', 'max_batch': 0, 'batch_window': 5.0,
              'qos_reliability': 'auto', 'qos_depth': 1, 'lazy': False}
    with node_in_own_context('camera_statuses') as node:
        frames = FramePath(node, lambda _: None, lambda: False)
        inputs = CameraInputs(node, frames, params.get, lambda _: None, ['/a/image', '/b/image'])
        late, quick = inputs.batcher.cameras
        for _ in range(DELIVERY_MIN_FRAMES):
            late.stages.add({'receive': SLOW_DELIVERY_S * 2, 'inference': 0.02})
            quick.stages.add({'receive': SLOW_DELIVERY_S / 4, 'inference': 0.02})
        statuses = inputs.statuses(NodeFacts('/n'), HealthLimits(no_image_timeout_s=0.0),
                                   'active')
    assert [s.name for s in statuses] == ['/n: /a/image', '/n: /b/image']
    values = [{kv.key: kv.value for kv in s.values} for s in statuses]
    assert [v[stage_key('receive')] for v in values] == [
        f'{SLOW_DELIVERY_S * 2e3:.3f}', f'{SLOW_DELIVERY_S * 1e3 / 4:.3f}']
    assert statuses[0].level == bytes([WARN]) and 'reach the node' in statuses[0].message
    assert statuses[1].level == bytes([OK]) and 'reach the node' not in statuses[1].message
