#!/usr/bin/env python3
"""The ``cpu`` (PyTorch) backend's node path under two OpenMP settings, quiet and busy.

Two ``vision_node`` processes run YOLOv8n on ``--backend`` (default ``cpu``: PyTorch, whose
kernels use GNU OpenMP) side by side: one with the OpenMP setting ``vision_node`` makes
itself (``GOMP_SPINCOUNT=10000``, :mod:`vision_nodes.platform.openmp`; neither variable set
in its environment), the other with ``--other``, ``NAME=VALUE`` words (default
``GOMP_SPINCOUNT=300000``: libgomp's own default count, which a node keeps when given).
Frames (bus.jpg) go to each node in interleaved rounds, shuffled each round, as
``bench_detect.py`` does; the ratio is the per-round ratio of medians (``vision_node``'s
setting over the other), its median over rounds with a 95 % bootstrap interval. With
``--busy`` another process keeps one core busy throughout (``while True: pass``), as a
robot's other work does. ``--json PATH`` writes the medians and the ratio. Not a test:
nothing is asserted.

    .venv/bin/python benchmarks/bench_openmp.py
    .venv/bin/python benchmarks/bench_openmp.py --busy
    .venv/bin/python benchmarks/bench_openmp.py --other OMP_WAIT_POLICY=PASSIVE --busy
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

import cv2

from bench_detect import bench_environment, paired_ratio, time_node_frame
from bench_report import machine_facts

OPENMP_VARIABLES = ('GOMP_SPINCOUNT', 'OMP_WAIT_POLICY')


def main(argv: list[str] | None = None) -> int:
    """Run both nodes, print the medians and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--backend', default='cpu')
    parser.add_argument('--other', nargs='+', default=['GOMP_SPINCOUNT=300000'],
                        help="the other node's OpenMP setting: NAME=VALUE words")
    parser.add_argument('--busy', action='store_true', help='keep one core busy meanwhile')
    parser.add_argument('--rounds', type=int, default=12)
    parser.add_argument('--frames', type=int, default=5, help='frames per round and node')
    parser.add_argument('--dds-profile', default='large-images')
    parser.add_argument('--json', type=Path, default=None)
    args = parser.parse_args(argv)
    bench_environment(args.dds_profile)
    for key in OPENMP_VARIABLES:  # the nodes inherit this process's environment
        os.environ.pop(key, None)

    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.platform.openmp import OPENMP_SPIN_COUNT
    from vision_nodes.tools.client import NodeProcess, VisionNodeClient, wait_for
    from vision_nodes.tools.demo import bundled_images

    settings = {'vision_node': {}, 'other': dict(word.split('=', 1) for word in args.other)}
    msg = numpy_to_image(cv2.imread(str(next(p for p in bundled_images()
                                             if p.name == 'bus.jpg'))), 'bgr8')
    nodes, clients, pubs, queues = {}, {}, {}, {}
    for name, env in settings.items():
        nodes[name] = NodeProcess({'model': 'yolov8n', 'backend': args.backend},
                                  node_name=name, namespace=f'/{name}', env=env)
        client = clients[name] = VisionNodeClient(f'/{name}/{name}', f'{name}_client')
        client.wait_for_node(60)
        if not (client.change_state('configure', 900) and client.change_state('activate')):
            print(nodes[name].output())
            return 1
        queues[name] = client.subscribe(Detection2DArray, f'/{name}/detections', 10)
        pubs[name] = client.publisher(Image, f'/{name}/image', QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE))
    for pub in pubs.values():
        if not wait_for(lambda pub=pub: pub.get_subscription_count() > 0, 60.0):
            raise RuntimeError('a node did not subscribe to its image topic')
    hog = subprocess.Popen([sys.executable, '-c', 'while True: pass']) if args.busy else None
    by_round = {name: [[] for _ in range(args.rounds)] for name in nodes}
    seq = 0
    try:
        for round_index in range(args.rounds + 1):  # round 0 warms up, unrecorded
            order = list(nodes)
            random.Random(round_index).shuffle(order)
            for name in order:
                for frame in range(1 + args.frames):
                    seq += 1
                    seconds = time_node_frame(pubs[name], queues[name], msg,
                                              f'{name}_{seq}', 120.0)[0]
                    if round_index and frame:
                        by_round[name][round_index - 1].append(seconds)
    finally:
        if hog is not None:
            hog.kill()
        for name in nodes:
            clients[name].change_state('deactivate')
            clients[name].close()
            nodes[name].stop()
    medians = {name: statistics.median(x for r in rounds for x in r) * 1000.0
               for name, rounds in by_round.items()}
    ratio = paired_ratio(by_round['vision_node'], by_round['other'])
    print(f"{'busy' if args.busy else 'quiet'}, backend {args.backend}: vision_node "
          f'(GOMP_SPINCOUNT={OPENMP_SPIN_COUNT}) {medians["vision_node"]:.1f} ms, other '
          f"({' '.join(args.other)}) {medians['other']:.1f} ms; vision_node / other = {ratio}")
    if args.json:
        args.json.write_text(json.dumps({
            'machine': machine_facts(), 'busy': args.busy, 'backend': args.backend,
            'vision_node': {'GOMP_SPINCOUNT': OPENMP_SPIN_COUNT}, 'other': settings['other'],
            'node_ms': medians,
            'ratio': {'median': ratio.value, 'low': ratio.low, 'high': ratio.high}}, indent=2))
        print(f'wrote {args.json}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
