#!/usr/bin/env python3
"""Soak test: a real vision_node fed images at a fixed rate for minutes; report as it goes.

Starts ``vision_node`` in its own process, configures and activates it, then publishes one
image (``bus.jpg`` by default) at ``--rate`` Hz for ``--duration`` seconds, each with a fresh
stamp. Every ``--interval`` seconds it prints the frames sent and answered, the answer rate,
the frame age of the answers (when DDS delivered the detections here minus the image's stamp)
at p50 and p95, and the node's resident memory; at the end, the totals and whether memory
grew. A node that keeps up answers every frame; one that does not answers the newest frame
each time it is free (the subscription keeps one), so frames are dropped, never queued, and
the age stays bounded. Not part of the test suite::

    python scripts/soak.py                       # 10 minutes at 30 Hz, backend onnx
    python scripts/soak.py --duration 60 --rate 15 --backend cpu

``--lifecycle`` runs the lifecycle soak instead (:func:`lifecycle_soak`): ``--cycles`` (100)
configure/activate/deactivate/cleanup cycles of one node with three cameras
(``image_topics``), a tracker (bytetrack), 3D from an aligned depth topic (a 3 m plane and
camera_info beside the first camera) and the annotated images subscribed. Every active phase
publishes frames until each camera has answered ``--frames`` of them, the first camera's
``detections_3d`` and every camera's ``annotated`` included. After each activate and each
cleanup it samples the node process's RSS, thread count and open fds and the node's
publishers and subscriptions in the ROS graph; it prints one line a cycle and a summary,
writes the samples as JSON (``--json PATH``) and exits 1 unless: RSS after the last cycle is
within ``--rss-tolerance`` MB (50) of cycle ``--rss-from`` (20), and threads, fds and
endpoints are the same after every activate and after every cleanup (cycle 1's)::

    python scripts/soak.py --lifecycle                       # 100 cycles, backend auto
    python scripts/soak.py --lifecycle --cycles 30 --json /tmp/soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--duration', type=float, default=600.0, help='seconds (default 600)')
    parser.add_argument('--rate', type=float, default=30.0, help='images per second (30)')
    parser.add_argument('--backend', default='',
                        help='node backend (default onnx; auto with --lifecycle)')
    parser.add_argument('--model', default='yolov8n', help='manifest name or path')
    parser.add_argument('--model-dir', default='', help='folder for relative weights paths')
    parser.add_argument('--engine-cache-dir', default='', help='engine cache (node default)')
    parser.add_argument('--image', type=Path, default=None, help='default: bus.jpg')
    parser.add_argument('--interval', type=float, default=10.0, help='seconds per report')
    parser.add_argument('--dds-profile', default='default',
                        help="'default', 'large-images' (config/fastdds_large_images.xml) or a "
                             'profile XML path, for this process and the node alike')
    parser.add_argument('--configure-timeout', type=float, default=300.0)
    lifecycle = parser.add_argument_group('lifecycle soak')
    lifecycle.add_argument('--lifecycle', action='store_true',
                           help='run the lifecycle soak instead of the fixed-rate one')
    lifecycle.add_argument('--cycles', type=int, default=100, help='lifecycle cycles (100)')
    lifecycle.add_argument('--frames', type=int, default=3,
                           help='frames each camera answers in each active phase (3)')
    lifecycle.add_argument('--json', type=Path, default=None, help='write the samples here')
    lifecycle.add_argument('--rss-from', type=int, default=20,
                           help='cycle whose RSS the last one is held to (20)')
    lifecycle.add_argument('--rss-tolerance', type=float, default=50.0,
                           help='MB the last cycle\'s RSS may differ from it (50)')
    return parser.parse_args(argv)


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (Linux /proc)."""
    try:
        for line in Path(f'/proc/{pid}/status').read_text().splitlines():
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float('nan')


def percentile(values: list[float], q: float) -> float:
    """Return the ``q`` quantile (0..1) of ``values``, nan when empty."""
    if not values:
        return float('nan')
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method='inclusive')[round(q * 100) - 1]


class Publisher(threading.Thread):
    """Publishes the image at a fixed rate, each time with a new stamp and sequence number."""

    def __init__(self, client, msg, rate: float, duration: float) -> None:
        super().__init__(daemon=True)
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image

        self.client, self.msg, self.period, self.duration = client, msg, 1.0 / rate, duration
        self.pub = client.publisher(Image, 'image', QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE))
        self.sent = 0
        self.late = 0  # ticks that came more than one period late (this process was busy)
        self.stop_event = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        tick = 0
        while not self.stop_event.is_set():
            due = start + tick * self.period
            now = time.monotonic()
            if due - start >= self.duration:
                return
            if due > now:
                time.sleep(due - now)
            elif now - due > self.period:
                self.late += 1
            self.msg.header.stamp = self.client.node.get_clock().now().to_msg()
            self.msg.header.frame_id = f'soak_{tick}'
            self.pub.publish(self.msg)
            self.sent += 1
            tick += 1


def setup_environment(args: argparse.Namespace) -> None:
    """DDS profile, domain, offline Ultralytics and the model folder, for both soaks."""
    if args.dds_profile != 'default':
        profile = ROOT / 'config' / 'fastdds_large_images.xml' \
            if args.dds_profile == 'large-images' else Path(args.dds_profile)
        os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = str(profile)
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 50))
    os.environ.setdefault('YOLO_OFFLINE', '1')
    from vision_nodes.manifest import use_default_model_dir

    use_default_model_dir()


def main(argv: list[str] | None = None) -> int:
    """Run the soak; return the process exit code."""
    args = parse_args(argv)
    setup_environment(args)
    if args.lifecycle:
        return lifecycle_main(args)
    args.backend = args.backend or 'onnx'

    import cv2
    from vision_msgs.msg import Detection2DArray

    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.tools.client import NodeProcess, VisionNodeClient
    from vision_nodes.tools.demo import bundled_images

    image_path = args.image or next(p for p in bundled_images() if p.name == 'bus.jpg')
    bgr = cv2.imread(str(image_path))
    if bgr is None:
        print(f'{image_path}: cannot read the image')
        return 2
    params = {'model': args.model, 'backend': args.backend, 'model_dir': args.model_dir,
              'engine_cache_dir': args.engine_cache_dir}
    log_path = Path(tempfile.mkstemp(prefix='soak_node_', suffix='.log')[1])
    node = NodeProcess(params, node_name='vision_node', log_path=log_path)
    client = VisionNodeClient('/vision_node', 'vision_nodes_soak')
    publisher = None
    try:
        client.wait_for_node(30.0)
        started = time.monotonic()
        if not client.change_state('configure', timeout=args.configure_timeout):
            print('configure FAILED; node log:\n' + node.output()[-3000:])
            return 1
        print(f'configured {args.model} on {args.backend} in '
              f'{time.monotonic() - started:.1f} s', flush=True)
        answers = client.subscribe(Detection2DArray, 'detections', 50)
        msg = numpy_to_image(bgr, 'bgr8')
        publisher = Publisher(client, msg, args.rate, args.duration)
        if not client.change_state('activate'):
            print('activate FAILED; node log:\n' + node.output()[-3000:])
            return 1
        time.sleep(1.0)  # discovery: the first frames would otherwise go nowhere
        pid = node.process.pid
        rss_start = rss_mb(pid)
        print(f'image {image_path.name} {bgr.shape[1]}x{bgr.shape[0]} at {args.rate:g} Hz '
              f'for {args.duration:g} s; node pid {pid}, RSS {rss_start:.0f} MiB', flush=True)
        print(f"{'t s':>6} {'sent':>6} {'answered':>8} {'rate Hz':>8} {'age p50 ms':>10} "
              f"{'age p95 ms':>10} {'RSS MiB':>8}", flush=True)
        publisher.start()
        begin = time.monotonic()
        all_ages: list[float] = []
        answered = sent_before = 0
        rss_max = rss_start
        next_report = begin + args.interval
        while publisher.is_alive() or answers.count():
            time.sleep(max(0.0, min(next_report - time.monotonic(), 0.2)))
            if time.monotonic() < next_report and publisher.is_alive():
                continue
            ages = []
            while answers.count():
                stamped = answers.get_stamped(timeout=0.01)
                if stamped is None:
                    break
                arrival, det = stamped
                stamp_ns = det.header.stamp.sec * 1_000_000_000 + det.header.stamp.nanosec
                ages.append((arrival.received_ns - stamp_ns) / 1e6)
            all_ages += ages
            answered += len(ages)
            elapsed = time.monotonic() - begin
            window = max(time.monotonic() - (next_report - args.interval), 1e-3)
            rss = rss_mb(pid)
            rss_max = max(rss_max, rss)
            print(f'{elapsed:6.0f} {publisher.sent - sent_before:6d} {len(ages):8d} '
                  f'{len(ages) / window:8.1f} {percentile(ages, 0.5):10.1f} '
                  f'{percentile(ages, 0.95):10.1f} {rss:8.0f}', flush=True)
            sent_before = publisher.sent
            next_report += args.interval
            if not node.alive():
                print('the node process exited; its log:\n' + node.output()[-3000:])
                return 1
            if not publisher.is_alive():
                time.sleep(0.5)  # the last answers
                if not answers.count():
                    break
        total = time.monotonic() - begin
        rss_end = rss_mb(pid)
        print(f'total: sent {publisher.sent} ({publisher.sent / total:.1f} Hz, '
              f'{publisher.late} ticks late), answered {answered} '
              f'({answered / total:.1f} Hz, {answered / max(publisher.sent, 1):.0%}), '
              f'frame age p50 {percentile(all_ages, 0.5):.1f} ms, '
              f'p95 {percentile(all_ages, 0.95):.1f} ms, max {max(all_ages, default=0):.1f} ms; '
              f'node RSS {rss_start:.0f} -> {rss_end:.0f} MiB (max {rss_max:.0f})', flush=True)
        errors = [ln for ln in node.output().splitlines() if 'ERROR' in ln]
        if errors:
            print(f'{len(errors)} error lines in the node log, last: {errors[-1][:300]}')
        client.change_state('deactivate')
        client.change_state('cleanup')
        return 0 if answered else 1
    finally:
        if publisher is not None:
            publisher.stop_event.set()
        client.close()
        node.stop()
        print(f'node log: {log_path}')


# ----------------------------------------------------------------------------- lifecycle soak
#: The lifecycle soak's cameras (image topics /<name>/image_raw); the first has depth.
CAMERAS = ('front', 'rear', 'side')
#: Distance (m) of the depth plane the first camera sees.
PLANE_M = 3.0
#: What must be the same after every activate and after every cleanup.
CONSTANT_KEYS = ('threads', 'fds', 'publishers', 'subscriptions')


class SoakFailure(RuntimeError):
    """A transition failed or an active phase got no answers in time."""


def process_stats(pid: int) -> dict[str, Any]:
    """RSS (MiB), thread count and open file descriptors of process ``pid`` (Linux /proc)."""
    threads = -1
    try:
        for line in Path(f'/proc/{pid}/status').read_text().splitlines():
            if line.startswith('Threads:'):
                threads = int(line.split()[1])
        fds = len(os.listdir(f'/proc/{pid}/fd'))
    except OSError:
        fds = -1
    return {'rss_mb': round(rss_mb(pid), 1), 'threads': threads, 'fds': fds}


def node_endpoints(graph: Any, name: str, namespace: str = '/') -> dict[str, int]:
    """Topics the node publishes and subscribes to, as the ROS graph sees them (-1: unseen)."""
    try:
        return {'publishers': len(graph.get_publisher_names_and_types_by_node(name, namespace)),
                'subscriptions': len(graph.get_subscriber_names_and_types_by_node(
                    name, namespace))}
    except Exception:  # noqa: BLE001 - the node not (yet) in the graph
        return {'publishers': -1, 'subscriptions': -1}


def settle(sample: Callable[[], dict], expected: dict | None, timeout: float) -> dict:
    """Sample until the value equals ``expected`` or, without one, has held for a second.

    The graph learns of new and removed endpoints a little later, and threads end a little
    after they were told to; the last sample is returned when ``timeout`` passes.
    """
    deadline = time.monotonic() + timeout
    last, since = sample(), time.monotonic()
    while time.monotonic() < deadline:
        if last == expected or (expected is None and time.monotonic() - since >= 1.0):
            break
        time.sleep(0.1)
        now = sample()
        if now != last:
            last, since = now, time.monotonic()
    return last


@dataclass
class Camera:
    """One camera of the soak: its frame, its image publisher and the answers it gets."""

    name: str
    msg: Any
    image: Any
    detections: Any
    annotated: Any


@dataclass
class LifecycleRig:
    """The node, the client and the cameras the lifecycle soak drives."""

    node: Any
    name: str
    client: Any
    cameras: list[Camera]
    depth: Any  # (depth publisher, depth message, camera_info publisher, camera_info)
    detections_3d: Any
    expected: dict[str, dict | None] = field(
        default_factory=lambda: {'active': None, 'clean': None})


def lifecycle_params(args: argparse.Namespace) -> dict[str, Any]:
    """Return the node's parameters: three cameras, bytetrack, 3D from a depth topic, annotated."""
    return {'model': args.model, 'backend': args.backend or 'auto',
            'model_dir': args.model_dir, 'engine_cache_dir': args.engine_cache_dir,
            'image_topics': [f'/{n}/image_raw' for n in CAMERAS], 'tracker': 'bytetrack',
            'depth_source': 'topic', 'depth_topic': 'aligned_depth',
            'publish_annotated': True}


def soak_images(image_path: Path | None) -> dict[str, Any]:
    """Three frames of three sizes: the image, zidane.jpg, and the image cut to 640 x 480."""
    import cv2
    import numpy as np

    from vision_nodes.tools.demo import bundled_images

    bundled = {p.name: p for p in bundled_images()}
    first = cv2.imread(str(image_path or bundled['bus.jpg']))
    second = cv2.imread(str(bundled['zidane.jpg']))
    if first is None or second is None:
        raise SoakFailure(f'{image_path}: cannot read the image')
    height, width = first.shape[:2]
    cut = np.ascontiguousarray(first[max(0, height - 480) // 2:][:480, :640])
    return dict(zip(CAMERAS, (first, second, cut)))


def make_rig(node: Any, name: str, client: Any, images: dict[str, Any]) -> LifecycleRig:
    """Make the publishers of the frames, depth and camera_info, and subscribe to every answer."""
    import numpy as np
    from sensor_msgs.msg import CameraInfo, Image
    from vision_msgs.msg import Detection2DArray, Detection3DArray

    from vision_nodes.ros.inputs.conversion import numpy_to_image

    cameras = []
    for camera, array in images.items():
        msg = numpy_to_image(array, 'bgr8')
        msg.header.frame_id = f'{camera}_optical'
        cameras.append(Camera(camera, msg, client.publisher(Image, f'/{camera}/image_raw', 5),
                              client.subscribe(Detection2DArray, f'/{camera}/detections', 50),
                              client.subscribe(Image, f'/{camera}/annotated', 5)))
    first = cameras[0]
    height, width = first.msg.height, first.msg.width
    depth = numpy_to_image(np.full((height, width, 1), PLANE_M, np.float32), '32FC1')
    info = CameraInfo(width=width, height=height, distortion_model='plumb_bob')
    info.k = [900.0, 0.0, width / 2 - 0.5, 0.0, 900.0, height / 2 - 0.5, 0.0, 0.0, 1.0]
    info.header.frame_id = first.msg.header.frame_id
    depth.header.frame_id = first.msg.header.frame_id
    pubs = (client.publisher(Image, f'/{first.name}/aligned_depth', 5), depth,
            client.publisher(CameraInfo, f'/{first.name}/camera_info', 5), info)
    answers_3d = client.subscribe(Detection3DArray, f'/{first.name}/detections_3d', 20)
    return LifecycleRig(node, name, client, cameras, pubs, answers_3d)


def send_round(rig: LifecycleRig) -> None:
    """One frame from each camera, the first one's camera_info and depth with its stamp."""
    stamp = rig.client.node.get_clock().now().to_msg()
    depth_pub, depth, info_pub, info = rig.depth
    depth.header.stamp = info.header.stamp = stamp
    info_pub.publish(info)
    depth_pub.publish(depth)
    for camera in rig.cameras:
        camera.msg.header.stamp = stamp
        camera.image.publish(camera.msg)


def stamp_ns(msg: Any) -> int:
    """Return a message's header stamp in nanoseconds."""
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def drain(rig: LifecycleRig, since_ns: int, counts: dict[str, int]) -> None:
    """Count the answers stamped at or after ``since_ns`` (older ones: an earlier phase's)."""
    queues = [(f'{c.name}/detections', c.detections) for c in rig.cameras]
    queues += [(f'{c.name}/annotated', c.annotated) for c in rig.cameras]
    queues.append((f'{rig.cameras[0].name}/detections_3d', rig.detections_3d))
    for key, answers in queues:
        while answers.count():
            msg = answers.get(0.01)
            if msg is not None and stamp_ns(msg) >= since_ns:
                counts[key] = counts.get(key, 0) + 1


def phase_done(counts: dict[str, int], rig: LifecycleRig, frames: int) -> bool:
    """Each camera answered ``frames`` frames and one annotated image; the first, one 3D."""
    return all(counts.get(f'{c.name}/detections', 0) >= frames
               and counts.get(f'{c.name}/annotated', 0) >= 1 for c in rig.cameras) \
        and counts.get(f'{rig.cameras[0].name}/detections_3d', 0) >= 1


def wait_for_matches(rig: LifecycleRig, timeout: float) -> None:
    """Wait until the node subscribes to every camera, the depth and the camera_info."""
    from vision_nodes.tools.client import wait_for

    pubs = [c.image for c in rig.cameras] + [rig.depth[0], rig.depth[2]]
    if not wait_for(lambda: all(p.get_subscription_count() > 0 for p in pubs), timeout):
        raise SoakFailure(f'the node did not subscribe to every input in {timeout:g} s')


def active_phase(rig: LifecycleRig, frames: int, timeout: float) -> dict[str, int]:
    """Send rounds of frames, each once the last was answered (or after 1 s), until done."""
    since_ns = rig.client.node.get_clock().now().nanoseconds
    wait_for_matches(rig, timeout)
    counts: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while not phase_done(counts, rig, frames):
        if time.monotonic() > deadline:
            raise SoakFailure(f'active phase: not every answer came in {timeout:g} s: {counts}')
        before = [counts.get(f'{c.name}/detections', 0) for c in rig.cameras]
        send_round(rig)
        round_end = time.monotonic() + 1.0
        while time.monotonic() < round_end:
            time.sleep(0.02)
            drain(rig, since_ns, counts)
            if all(counts.get(f'{c.name}/detections', 0) > b
                   for c, b in zip(rig.cameras, before)):
                break
    return counts


def sample(rig: LifecycleRig, phase: str, timeout: float = 10.0) -> dict[str, Any]:
    """Return the node's threads, fds and endpoints once settled (to cycle 1's), and its RSS."""
    pid, graph = rig.node.process.pid, rig.client.node
    expected = rig.expected[phase]

    def now() -> dict[str, Any]:
        stats = process_stats(pid)
        return {'threads': stats['threads'], 'fds': stats['fds'],
                **node_endpoints(graph, rig.name)}
    settled = settle(now, expected, timeout)
    if expected is None:
        rig.expected[phase] = settled
    return {'rss_mb': process_stats(pid)['rss_mb'], **settled}


def transition(rig: LifecycleRig, name: str, timeout: float = 120.0) -> None:
    """Run one lifecycle transition; SoakFailure with the node's log tail when it fails."""
    if not rig.client.change_state(name, timeout=timeout):
        raise SoakFailure(f'{name} failed; node log:\n' + rig.node.output()[-3000:])


def one_cycle(rig: LifecycleRig, cycle: int, args: argparse.Namespace) -> dict[str, Any]:
    """configure, activate, frames, deactivate, cleanup; the samples after activate and cleanup."""
    started = time.monotonic()
    transition(rig, 'configure', args.configure_timeout)
    transition(rig, 'activate')
    answered = active_phase(rig, args.frames, 120.0)
    active = sample(rig, 'active')
    transition(rig, 'deactivate')
    transition(rig, 'cleanup')
    clean = sample(rig, 'clean')
    return {'cycle': cycle, 'seconds': round(time.monotonic() - started, 2),
            'answered': answered, 'active': active, 'clean': clean}


def spread(values: list[Any]) -> str:
    """'21' when all equal, else 'min..max (first differs at cycle k)'."""
    if len(set(values)) <= 1:
        return str(values[0]) if values else '-'
    first = next(i for i, v in enumerate(values) if v != values[0])
    return f'{min(values)}..{max(values)} (first differs at cycle {first + 1})'


def judge(cycles: list[dict], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Return the pass criteria, each with whether it held and what was measured."""
    out = []
    if len(cycles) > args.rss_from:
        base, last = cycles[args.rss_from - 1]['clean']['rss_mb'], cycles[-1]['clean']['rss_mb']
        out.append({'criterion': f'RSS after cycle {len(cycles)} within '
                                 f'{args.rss_tolerance:g} MB of cycle {args.rss_from}',
                    'passed': abs(last - base) <= args.rss_tolerance * 1e6 / 2**20,
                    'measured': f'{base:.0f} -> {last:.0f} MiB ({last - base:+.1f})'})
    for phase, when in (('active', 'activate'), ('clean', 'cleanup')):
        for key in CONSTANT_KEYS:
            values = [c[phase][key] for c in cycles]
            out.append({'criterion': f'{key} the same after every {when}',
                        'passed': len(set(values)) == 1, 'measured': spread(values)})
    return out


def print_cycle(row: dict[str, Any]) -> None:
    """One line a cycle: RSS, threads, fds, publishers and subscriptions, active / clean."""
    a, c = row['active'], row['clean']
    print(f"{row['cycle']:5d} {row['seconds']:6.1f} {a['rss_mb']:9.0f} {c['rss_mb']:9.0f} "
          + ' '.join(f'{a[k]:>5}/{c[k]:<5}' for k in CONSTANT_KEYS), flush=True)


def run_lifecycle(args: argparse.Namespace, log_path: Path | None = None,
                  name: str = 'vision_node') -> dict[str, Any]:
    """Run the lifecycle soak on a node called ``name``; return the report.

    The report holds the samples, the criteria and whether they passed.
    """
    from vision_nodes.platform.cpu import cpu_info
    from vision_nodes.tools.client import NodeProcess, VisionNodeClient

    images = soak_images(args.image)
    node = NodeProcess(lifecycle_params(args), node_name=name, log_path=log_path)
    client = VisionNodeClient(f'/{name}', f'{name}_soak_client')
    report: dict[str, Any] = {'cpu': cpu_info().describe(), 'params': lifecycle_params(args),
                              'cycles': [], 'error': None}
    try:
        client.wait_for_node(30.0)
        rig = make_rig(node, name, client, images)
        report['initial'] = sample(rig, 'clean')
        rig.expected['clean'] = None
        print(f"{'cycle':>5} {'s':>6} {'RSS act':>9} {'RSS cln':>9} "
              + ' '.join(f'{k[:11]:>11}' for k in CONSTANT_KEYS) + '   (active/clean)',
              flush=True)
        for cycle in range(1, args.cycles + 1):
            report['cycles'].append(one_cycle(rig, cycle, args))
            print_cycle(report['cycles'][-1])
    except (SoakFailure, TimeoutError) as exc:
        report['error'] = f'{exc}; node log:\n' + node.output()[-3000:] \
            if isinstance(exc, TimeoutError) else str(exc)
    finally:
        client.close()
        node.stop()
    report['criteria'] = judge(report['cycles'], args) if report['cycles'] else []
    report['passed'] = report['error'] is None and all(c['passed'] for c in report['criteria'])
    return report


def print_summary(report: dict[str, Any], args: argparse.Namespace) -> None:
    """RSS at a few cycles, then each criterion with PASS or FAIL."""
    cycles = report['cycles']
    marks = sorted({1, args.rss_from, len(cycles) // 2, len(cycles)}
                   & set(range(1, len(cycles) + 1)))
    print(f"CPU {report['cpu']['cpu']} ({report['cpu']['logical_cores']} cores, "
          f"AMX {report['cpu']['amx']}); RSS after cleanup: "
          + ', '.join(f"cycle {k} {cycles[k - 1]['clean']['rss_mb']:.0f} MiB" for k in marks))
    if report['error']:
        print(f"FAILED at cycle {len(cycles) + 1}: {report['error']}")
    for item in report['criteria']:
        print(f"{'PASS' if item['passed'] else 'FAIL'}  {item['criterion']}: {item['measured']}")
    print('lifecycle soak ' + ('passed' if report['passed'] else 'FAILED'), flush=True)


def lifecycle_main(args: argparse.Namespace) -> int:
    """Run the lifecycle soak, print its summary, write the JSON; exit code 0 when it passed."""
    log_path = Path(tempfile.mkstemp(prefix='soak_lifecycle_node_', suffix='.log')[1])
    report = run_lifecycle(args, log_path)
    print_summary(report, args)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
        print(f'samples: {args.json}')
    print(f'node log: {log_path}')
    return 0 if report['passed'] else 1


if __name__ == '__main__':
    sys.exit(main())
