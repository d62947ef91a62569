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
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--duration', type=float, default=600.0, help='seconds (default 600)')
    parser.add_argument('--rate', type=float, default=30.0, help='images per second (30)')
    parser.add_argument('--backend', default='onnx', help='node backend (default onnx)')
    parser.add_argument('--model', default='yolov8n', help='manifest name or path')
    parser.add_argument('--model-dir', default='', help='folder for relative weights paths')
    parser.add_argument('--engine-cache-dir', default='', help='engine cache (node default)')
    parser.add_argument('--image', type=Path, default=None, help='default: bus.jpg')
    parser.add_argument('--interval', type=float, default=10.0, help='seconds per report')
    parser.add_argument('--dds-profile', default='default',
                        help="'default', 'large-images' (config/fastdds_large_images.xml) or a "
                             'profile XML path, for this process and the node alike')
    parser.add_argument('--configure-timeout', type=float, default=300.0)
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


def main(argv: list[str] | None = None) -> int:
    """Run the soak; return the process exit code."""
    args = parse_args(argv)
    if args.dds_profile != 'default':
        profile = ROOT / 'config' / 'fastdds_large_images.xml' \
            if args.dds_profile == 'large-images' else Path(args.dds_profile)
        os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = str(profile)
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 50))
    os.environ.setdefault('YOLO_OFFLINE', '1')
    from vision_nodes.manifest import use_default_model_dir

    use_default_model_dir()

    import cv2
    from vision_msgs.msg import Detection2DArray

    from vision_nodes.ros.image_input import numpy_to_image
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


if __name__ == '__main__':
    sys.exit(main())
