#!/usr/bin/env python3
"""Segment, pose, obb, classify: the node path vs Ultralytics' ``predict`` on the same image.

For each task (``--tasks``; default segment and pose) a ``vision_node`` runs the task's
manifest (``yolov8n_seg``, ``yolov8n_pose``, ``yolov8n_obb``, ``yolov8n_cls``) in its own
process on ``--backend`` (default ``auto``, the node's default, at precision ``auto``). The
node path is timed from ``publish()`` of a ``sensor_msgs/Image`` until DDS delivers the task's
last output for that frame to this process (``instance_mask`` after ``detections`` for
segment, ``keypoints`` after ``detections`` for pose, ``detections`` for obb,
``classification`` for classify; the mask is built because this process subscribes to it).
The reference is ``ultralytics.YOLO('<the same .pt>').predict`` on the same image in this
process, with Ultralytics' own device and thread choice (masks at network resolution, as it
returns them).

Measured in interleaved rounds, shuffled each round, as ``bench_detect.py`` does; a ratio is
the median over rounds of the per-round ratio of medians, with a 95 % bootstrap interval; the
target (node path at most a third of predict, i.e. >= 3x faster; classify: half, >= 2x)
counts as met or missed only when the whole interval is on one side; ``--json PATH`` writes
the medians and ratios in ``bench_report.py``'s shape (``configs``: ``node_ms`` per task).
Not a test: nothing is asserted. A task whose model this machine cannot run on
``--backend`` at ``--precision`` is skipped with its reason in one line, and the others are
measured (``bench_configs.py``).

    .venv/bin/python benchmarks/bench_segpose.py
    .venv/bin/python benchmarks/bench_segpose.py --tasks pose --backend openvino --rounds 20
    .venv/bin/python benchmarks/bench_segpose.py --tasks obb classify
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import cv2

from bench_configs import cannot_run, runnable, with_ultralytics_opencv
from bench_detect import (bench_environment, node_stages, paired_ratio, time_node_frame,
                          verdict)
from bench_report import breakdown_lines, machine_facts, with_outside, write_json

#: task → (manifest, the topic published last for a frame, its message type's module, name).
#: ``detect`` (not run by default) is the baseline: the same measurement for detection.
TASKS = {'segment': ('yolov8n_seg', 'instance_mask', 'sensor_msgs.msg', 'Image'),
         'pose': ('yolov8n_pose', 'keypoints', 'vision_nodes_msgs.msg', 'Keypoints2DArray'),
         'obb': ('yolov8n_obb', 'detections', 'vision_msgs.msg', 'Detection2DArray'),
         'classify': ('yolov8n_cls', 'classification', 'vision_msgs.msg', 'Classification'),
         'detect': ('yolov8n', 'detections', 'vision_msgs.msg', 'Detection2DArray')}
#: The target of each task: the node path at most this share of Ultralytics' predict.
TARGETS = {'segment': 1 / 3, 'pose': 1 / 3, 'obb': 1 / 3, 'classify': 1 / 2, 'detect': 1 / 3}


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--tasks', nargs='+', choices=list(TASKS), default=['segment', 'pose'],
                        help='add detect for the same measurement of detection (a baseline)')
    parser.add_argument('--backend', default='auto')
    parser.add_argument('--precision', default='auto')
    parser.add_argument('--calibration-dir', type=Path, default=None,
                        help='int8 calibration images for the nodes (precision int8)')
    parser.add_argument('--frames', type=int, default=5, help='frames per round and config')
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--image', type=Path, default=None, help='default: ultralytics bus.jpg')
    parser.add_argument('--dds-profile', default='default')
    parser.add_argument('--json', type=Path, default=None, help='write the results here')
    args = parser.parse_args(argv)
    bench_environment(args.dds_profile)

    import importlib

    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image

    from vision_nodes.loaders.ultralytics import import_ultralytics
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.tools.client import NodeProcess, VisionNodeClient, wait_for
    from vision_nodes.tools.demo import bundled_images

    image_path = args.image or next(p for p in bundled_images() if p.name == 'bus.jpg')
    bgr = cv2.imread(str(image_path))
    msg = numpy_to_image(bgr, 'bgr8')
    reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    print(f'image {image_path.name} {bgr.shape[1]}x{bgr.shape[0]}; backend {args.backend}, '
          f'precision {args.precision}; {args.rounds} rounds x {args.frames} frames', flush=True)

    calibration = str(args.calibration_dir.resolve()) if args.calibration_dir else ''
    tasks, skipped = runnable(args.tasks, lambda task: cannot_run(
        resolve_manifest(TASKS[task][0]), args.backend, args.precision,
        calibration_dir=calibration), name=lambda task: f'{task} ({TASKS[task][0]})')
    if not tasks:
        print('no task can run on this machine with this backend and precision', flush=True)
        if args.json:
            write_json(args.json, machine_facts(), {}, None, {}, skipped)
        return 1
    nodes, clients, pubs, queues, predict = {}, {}, {}, {}, {}
    YOLO = import_ultralytics().YOLO
    for task in tasks:
        manifest_name, topic, module, type_name = TASKS[task]
        manifest = resolve_manifest(manifest_name)
        name = f'bench_{task}'
        params = {'model': manifest_name, 'backend': args.backend, 'precision': args.precision}
        if calibration:
            params['calibration_dir'] = calibration
        nodes[task] = NodeProcess(params, node_name=name, namespace=f'/{name}')
        client = clients[task] = VisionNodeClient(f'/{name}/{name}', f'{name}_client')
        client.wait_for_node(60)
        if not (client.change_state('configure', 900) and client.change_state('activate')):
            print(nodes[task].output())
            return 1
        queues[task] = client.subscribe(getattr(importlib.import_module(module), type_name),
                                        f'/{name}/{topic}', 10)
        pubs[task] = client.publisher(Image, f'/{name}/image', reliable)
        model = YOLO(str(manifest.weights_path()))
        thresholds = manifest.thresholds
        predict[task] = with_ultralytics_opencv(lambda model=model, t=thresholds: model.predict(
            bgr, conf=t.confidence, iou=t.iou, max_det=t.max_detections, verbose=False))
        predict[task]()  # Ultralytics sets itself up (device, threads) on the first call
    for task, pub in pubs.items():
        if not wait_for(lambda pub=pub: pub.get_subscription_count() > 0, 60.0):
            raise RuntimeError(f'nothing subscribed to the {task} image topic')

    def node_frame(task: str, seq: int) -> float:
        return time_node_frame(pubs[task], queues[task], msg, f'{task}_{seq}', 60.0)[0]

    diagnostics = clients[tasks[0]].subscribe(DiagnosticArray, '/diagnostics', 100)
    labels = {}
    for task in tasks:
        labels[f'{task}: node path'] = task
        labels[f'{task}: ultralytics .pt predict'] = predict[task]
    by_round = {label: [[] for _ in range(args.rounds)] for label in labels}
    order, seq = list(labels), 0
    for round_index in range(args.rounds + 1):  # round 0 warms every path up, unrecorded
        random.Random(args.seed + round_index).shuffle(order)
        for label in order:
            fn = labels[label]
            for frame in range(1 + args.frames):
                seq += 1
                if isinstance(fn, str):
                    elapsed = node_frame(fn, seq)
                else:
                    started = time.perf_counter()
                    fn()
                    elapsed = time.perf_counter() - started
                if round_index and frame:
                    by_round[label][round_index - 1].append(elapsed)

    # The nodes' own stage medians (their diagnostics values), read after the rounds.
    stages = node_stages(diagnostics, {task: f'/bench_{task}/bench_{task}' for task in tasks})
    chosen = {}
    for task in tasks:
        clients[task].change_state('deactivate')
        clients[task].close()
        nodes[task].stop()
        chosen[task] = [line.split(']: ', 1)[-1] for line in nodes[task].output().splitlines()
                        if 'auto: chose' in line or 'precision auto:' in line
                        or 'openvino: device' in line]

    medians = {label: _ms([x for r in rounds for x in r]) for label, rounds in by_round.items()}
    width = max(len(label) for label in labels)
    print(f"\n{'configuration':<{width}}  median ms")
    for label, median in medians.items():
        print(f'{label:<{width}}  {median:9.1f}')
    print('\nwhat the nodes ran (their log):')
    for task, lines in chosen.items():
        for line in lines:
            print(f'  {task}: {line}')
    report = {task: {'node_ms': medians[f'{task}: node path'],
                     'stages_ms': (with_outside(stages[task], medians[f'{task}: node path'])
                                   if stages.get(task) else None)} for task in tasks}
    print("\nthe node path by stage (ms, medians; the node's own timers; outside: the "
          "sender's publish() and the answer back):")
    for line in breakdown_lines(report):
        print('  ' + line)
    print(f'\nratios (paired by round: median of {args.rounds} rounds [95 % interval]):')
    ratios = {}
    for task in tasks:
        ratio = paired_ratio(by_round[f'{task}: node path'],
                             by_round[f'{task}: ultralytics .pt predict'])
        ratios[f'{task} node path / ultralytics .pt predict'] = {
            'median': ratio.value, 'low': ratio.low, 'high': ratio.high}
        print(f'  {task} node path / ultralytics .pt predict = {ratio}   '
              f'{verdict(ratio, TARGETS[task], False)}   (speed-up {1 / ratio.value:.2f}x)')
    if args.json:
        configs = {task: {'node_ms': medians[f'{task}: node path'],
                          'ultralytics_pt_ms': medians[f'{task}: ultralytics .pt predict'],
                          'stages_ms': report[task]['stages_ms'],
                          'backend': args.backend, 'precision': args.precision,
                          'ran': chosen.get(task, [])} for task in tasks}
        write_json(args.json, machine_facts(), configs, None, ratios, skipped)
        print(f'wrote {args.json}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
