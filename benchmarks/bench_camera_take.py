#!/usr/bin/env python3
"""Several cameras' frames into the node: the executor's take against the frame taker's.

One process, ``--cameras`` N (default 4) publishers of a ``bgr8`` image (``--size``, default
640x480) and, for each of two modes, N raw subscriptions on topics of their own (Fast DDS, the
large-images profile by default), the allocator tuned as in the node:

* executor - the subscriptions in a callback group of a ``SingleThreadedExecutor`` spinning
             on a thread: rclpy's take into new ``bytes``, then the callback (how a
             multi-camera node took its frames before ``FrameTaker``);
* taker    - :class:`vision_nodes.ros.inputs.frame_taker.FrameTaker`: one thread waiting on
             all N subscriptions, rcl's take into pooled buffers (what the node does now;
             ``VISION_NODES_RCL_TAKE=0`` makes it rclpy's take).

Each round publishes one frame on every camera of one mode, then of the other (the first mode
alternating), and waits until all N are delivered. Delivery runs what the node's image input
runs (:func:`vision_nodes.ros.wire.cdr_reader.read_image`) then lets go of the frame. Per mode:
the median milliseconds from a frame's DDS source timestamp to its delivery (every frame),
from the round's first publish to its last delivery, and the process CPU milliseconds per
round; their ratios taker / executor. ``--json PATH`` writes them in ``bench_report.py``'s
shape. Not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_camera_take.py [--cameras 4] [--rounds 300] [--json P]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cdr import start_ros  # noqa: E402

MODES = ('executor', 'taker')


class _Camera:
    """One camera's subscription as the taker sees an image input; counts its deliveries."""

    def __init__(self, rounds: '_Round') -> None:
        self.subscription = None
        self.on_change = None
        self.label = 'camera'
        self._round = rounds

    def deliver(self, data, info) -> None:
        from vision_nodes.ros.wire.cdr_reader import read_image

        read_image(data)
        self._round.delivered(info)


class _Round:
    """The deliveries of one round: the DDS-to-delivery times and when the last came."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.expected = 0
        self.latencies: list[float] = []
        self.done = threading.Event()
        self.last_ns = 0

    def start(self, expected: int) -> None:
        with self._lock:
            self.expected, self.latencies, self.last_ns = expected, [], 0
            self.done.clear()

    def delivered(self, info) -> None:
        now = time.time_ns()
        with self._lock:
            self.latencies.append((now - info['source_timestamp']) / 1e6)
            if len(self.latencies) == self.expected:
                self.last_ns = now
                self.done.set()


def run(cameras: int, size: tuple[int, int], rounds: int) -> dict[str, dict[str, float]]:
    """Measure both modes, round after round; return each one's medians."""
    import rclpy
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import Image

    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.ros.inputs.frame_path import _TakenElsewhere as TakenElsewhere
    from vision_nodes.ros.inputs.frame_taker import FrameTaker
    from vision_nodes.ros.process import compat

    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    node = rclpy.create_node('bench_camera_take')
    state = {mode: _Round() for mode in MODES}
    inputs = {mode: [_Camera(state[mode]) for _ in range(cameras)] for mode in MODES}
    group = MutuallyExclusiveCallbackGroup()
    for index, camera in enumerate(inputs['executor']):
        camera.subscription = node.create_subscription(
            Image, f'executor/cam{index}', compat.with_message_info(camera.deliver), qos,
            raw=True, callback_group=group)
    for index, camera in enumerate(inputs['taker']):
        camera.subscription = node.create_subscription(
            Image, f'taker/cam{index}', lambda *_: None, qos, raw=True,
            callback_group=TakenElsewhere())  # as the node's: the executor leaves them
    pubs = {mode: [node.create_publisher(Image, f'{mode}/cam{i}', qos) for i in range(cameras)]
            for mode in MODES}
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    taker = FrameTaker(node.context, inputs['taker'], [lambda: False] * cameras,
                       [print] * cameras, print)
    height, width = size
    data = serialize_message(numpy_to_image(
        np.random.default_rng(0).integers(0, 256, (height, width, 3), np.uint8), 'bgr8'))
    spent = {mode: {'latency': [], 'round': [], 'cpu': []} for mode in MODES}
    try:
        spinner.start()
        taker.start()
        deadline = time.monotonic() + 30.0
        while any(p.get_subscription_count() < 1 for ps in pubs.values() for p in ps):
            if time.monotonic() > deadline:
                raise RuntimeError('the subscriptions never matched their publishers')
            time.sleep(0.05)
        for index in range(rounds + 10):
            for mode in (MODES if index % 2 else MODES[::-1]):
                state[mode].start(cameras)
                cpu, start = time.process_time(), time.time_ns()
                for pub in pubs[mode]:
                    pub.publish(data)
                if not state[mode].done.wait(10.0):
                    raise RuntimeError(f'{mode}: a round lost a frame')
                if index >= 10:  # the first rounds warm up
                    spent[mode]['latency'] += state[mode].latencies
                    spent[mode]['round'].append((state[mode].last_ns - start) / 1e6)
                    spent[mode]['cpu'].append((time.process_time() - cpu) * 1e3)
    finally:
        taker.stop()
        executor.shutdown()
        spinner.join(10.0)
        node.destroy_node()
    return {mode: {f'{key}_ms': statistics.median(values) for key, values in spent[mode].items()}
            for mode in MODES}


def main(argv: list[str] | None = None) -> None:
    """Run both modes and print their medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--cameras', type=int, default=4)
    parser.add_argument('--size', default='640x480', help='WIDTHxHEIGHT')
    parser.add_argument('--rounds', type=int, default=300)
    parser.add_argument('--dds-profile', default='large-images',
                        help="'large-images' (config/fastdds_large_images.xml) or 'default'")
    parser.add_argument('--json', type=Path, help='write the medians and ratios here')
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split('x'))
    rclpy = start_ros(args.dds_profile)
    try:
        print(f'{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; DDS profile '
              f'{args.dds_profile}; {args.cameras} cameras {args.size}; {args.rounds} rounds',
              flush=True)
        found = run(args.cameras, (height, width), args.rounds)
        ratios = {}
        for key in found['executor']:
            a, b = found['executor'][key], found['taker'][key]
            ratios[key.removesuffix('_ms')] = b / a
            print(f'{key:12s} executor {a:8.3f}  taker {b:8.3f}  taker / executor {b / a:5.3f}',
                  flush=True)
        print(f'load average {os.getloadavg()[0]:.2f}')
        if args.json:
            from bench_report import machine_facts, write_json

            write_json(args.json, machine_facts(), found, None, ratios,
                       extra={'dds_profile': args.dds_profile, 'rounds': args.rounds,
                              'cameras': args.cameras, 'size': args.size})
            print(f'wrote {args.json}')
    finally:
        rclpy.shutdown()


if __name__ == '__main__':
    main()
