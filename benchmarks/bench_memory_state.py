#!/usr/bin/env python3
"""The bare network in the memory state a camera frame leaves: why node path / bare > 1.

``bench_detect.py``'s *bare runner* calls the network back to back on one tensor, so its
weights and buffers stay in the caches between calls. In the node a frame arrives first: the
middleware and rclpy copy the 2.6 MB image (the sender's serialization, the take into rmw's
buffer, rclpy's ``bytes``), the letterbox reads it. This measures the same network, timing
only ``Runner.infer``, in three states, in interleaved shuffled rounds, as ratios paired by
round (see ``bench_detect.py``):

* ``back to back``: the bare runner's loop;
* ``after a frame's copies``: each inference follows ``--copies`` copies of the image's bytes
  (what reaches the node per frame, without DDS);
* ``after an idle frame``: each inference follows ``--idle`` seconds of sleep (a 30 Hz camera's
  gap between frames, the threads of the runtime idle).

    .venv/bin/python benchmarks/bench_memory_state.py --backends auto openvino:int8 onnx \
        --json benchmarks/results/bench_memory_state.json
"""

from __future__ import annotations

import argparse
import atexit
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_detect import (_bench_manifests, _default_calibration, paired_ratio,  # noqa: E402
                          parse_config)

STATES = ('back to back', "after a frame's copies", 'after an idle frame')


def main(argv: list[str] | None = None) -> int:
    """Measure each configuration's inference in each state; print and write the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--backends', nargs='+', default=['auto', 'openvino:int8', 'onnx'],
                        help='configurations, BACKEND[:PRECISION] (see bench_detect.py)')
    parser.add_argument('--rounds', type=int, default=10)
    parser.add_argument('--frames', type=int, default=5)
    parser.add_argument('--copies', type=int, default=3,
                        help="copies of the image's bytes before each inference")
    parser.add_argument('--idle', type=float, default=1 / 30, help='seconds idle before each')
    parser.add_argument('--json', type=Path, default=None)
    args = parser.parse_args(argv)
    configs = [parse_config(spec) for spec in dict.fromkeys(args.backends)]

    from bench_report import machine_facts

    from vision_nodes.manifest import use_default_model_dir
    from vision_nodes.tasks import load_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tools.demo import bundled_images

    use_default_model_dir()
    images = bundled_images()
    bgr = cv2.imread(str(next(p for p in images if p.name == 'bus.jpg')))
    work = Path(tempfile.mkdtemp(prefix='bench_memory_'))
    atexit.register(shutil.rmtree, work, True)
    calibration = _default_calibration(work / 'calibration', images)
    rect_file, square_file = _bench_manifests('yolov8n', calibration, work)
    manifests = {True: load_manifest(rect_file), False: load_manifest(square_file)}
    machine = machine_facts()
    runs = {}
    for cfg in configs:
        pipeline = build_pipeline(manifests[cfg.rect], cfg.backend, precision=cfg.precision,
                                  calibration_dir=str(calibration))
        shape = pipeline.input_shape(bgr.shape[:2])
        pipeline.runner.prepare_shape(shape)
        runs[cfg.spec] = (pipeline, pipeline.task.preprocess(bgr, 'bgr8', shape)[0])
        print(f'  {cfg.spec}: {pipeline.runner.config.backend} at '
              f'{pipeline.runner.config.precision}, input {shape[1]}x{shape[0]}', flush=True)
    print(f"{machine['cpu']}, {machine['logical_cores']} cores; image {bgr.shape[1]}x"
          f'{bgr.shape[0]} ({bgr.nbytes / 2**20:.1f} MiB, {args.copies} copies a frame); '
          f'{args.rounds} rounds x {args.frames} frames', flush=True)

    message = bgr.tobytes()

    def before(state: str) -> None:
        if state == STATES[1]:
            data = message
            for _ in range(args.copies):
                data = bytearray(data)
        elif state == STATES[2]:
            time.sleep(args.idle)

    by_round = {(spec, state): [[] for _ in range(args.rounds)]
                for spec in runs for state in STATES}
    order = list(by_round)
    shuffle = random.Random(0).shuffle
    for round_index in range(args.rounds + 1):  # round 0 warms up, unrecorded
        shuffle(order)
        for spec, state in order:
            pipeline, tensor = runs[spec]
            for frame in range(1 + args.frames):
                before(state)
                start = time.perf_counter()
                pipeline.runner.infer(tensor)
                if round_index and frame:
                    by_round[spec, state][round_index - 1].append(time.perf_counter() - start)
    for pipeline, _ in runs.values():
        pipeline.close()

    report: dict = {'machine': machine, 'copies': args.copies, 'idle_s': args.idle,
                    'configs': {}}
    print(f"\n{'configuration':<16} {'state':<24} median ms   / back to back [95 %]")
    for spec in runs:
        entry = report['configs'][spec] = {}
        for state in STATES:
            rounds = by_round[spec, state]
            median = statistics.median(x for r in rounds for x in r) * 1000
            ratio = paired_ratio(rounds, by_round[spec, STATES[0]])
            entry[state] = {'median_ms': median, 'ratio': {
                'median': ratio.value, 'low': ratio.low, 'high': ratio.high}}
            print(f'{spec:<16} {state:<24} {median:9.2f}   {ratio}')
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + '\n')
        print(f'wrote {args.json}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
