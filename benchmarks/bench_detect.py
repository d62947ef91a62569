#!/usr/bin/env python3
"""Detection latency, measured side by side in one run, printed as a table and as ratios.

For each backend (default: onnx and cpu, i.e. ONNX Runtime and PyTorch on the CPU):

* bare runner   - ``runner.infer`` on an already-preprocessed tensor (the network alone);
* pipeline      - preprocess + infer + decode/NMS in this process (no ROS);
* node path     - a ``sensor_msgs/Image`` published to a ``vision_node`` running in its own
                  process, until its ``Detection2DArray`` for that frame comes back (DDS both
                  ways, conversion, pre/post-processing, message building). The clock starts
                  before ``publish()`` (so the sender's conversion and serialisation count)
                  and stops when DDS delivers the answer to this process's reader (its
                  ``received_timestamp``), before this harness's own Python executor wakes up
                  to run the callback; that wake-up (~1 ms here) is printed separately;

plus ``ultralytics.YOLO(<the same exported .onnx>).predict`` on the same image.

Configurations are measured in interleaved rounds, in a shuffled order each round (B A C,
C B A, ...), so that drift in machine load hits them alike. The table gives the medians of all
frames. A ratio is computed per round (median over median, the two measured seconds apart)
and reported as the median over rounds with a 95 % bootstrap interval over rounds; a target
counts as met or missed only when the whole interval is on one side of it, otherwise the run
could not tell at that machine's noise. Not a test: nothing is asserted, the numbers
are for reading.

    scripts/dev demo   # once, to build the environment; then:
    .venv/bin/python benchmarks/bench_detect.py --dds-profile large-images
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


@dataclass(frozen=True)
class Ratio:
    """A ratio of two configurations' latencies, paired by round."""

    value: float  # median over rounds of the per-round ratio
    low: float    # 95 % bootstrap interval of that median, resampling rounds
    high: float

    def __str__(self) -> str:
        return f'{self.value:5.3f} [{self.low:5.3f}, {self.high:5.3f}]'


def paired_ratio(numerator: list[list[float]], denominator: list[list[float]],
                 resamples: int = 4000, seed: int = 0) -> Ratio:
    """Per-round ratio of medians, its median over rounds and a bootstrap interval."""
    per_round = np.array([statistics.median(a) / statistics.median(b)
                          for a, b in zip(numerator, denominator) if a and b])
    picks = np.random.default_rng(seed).integers(
        0, per_round.size, size=(resamples, per_round.size))
    low, high = np.percentile(np.median(per_round[picks], axis=1), [2.5, 97.5])
    return Ratio(float(np.median(per_round)), float(low), float(high))


def verdict(ratio: Ratio, limit: float, strict: bool) -> str:
    """Whether ``ratio`` is below ``limit`` (``strict``: < , else <=), given its interval."""
    below = (ratio.high < limit) if strict else (ratio.high <= limit)
    above = (ratio.low >= limit) if strict else (ratio.low > limit)
    target = f"{'<' if strict else '<='} {limit:g}"
    if below:
        return f'target {target}: met'
    if above:
        return f'target {target}: missed'
    return f'target {target}: undecided (the interval spans {limit:g})'


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--backends', nargs='+', default=['onnx', 'cpu'])
    parser.add_argument('--frames', type=int, default=5, help='frames per round and config')
    parser.add_argument('--rounds', type=int, default=12)
    parser.add_argument('--seed', type=int, default=0, help='seed of the per-round order')
    parser.add_argument('--image', type=Path, default=None, help='default: ultralytics bus.jpg')
    parser.add_argument('--model', default='yolov8n')
    parser.add_argument('--no-ultralytics', action='store_true')
    parser.add_argument('--dds-profile', default='default',
                        help="'default' (Fast DDS built-in transports), 'large-images' "
                             '(config/fastdds_large_images.xml) or a profile XML path; used '
                             'by this process and the node processes alike')
    args = parser.parse_args(argv)
    if args.dds_profile != 'default':
        profile = Path(__file__).resolve().parent.parent / 'config' / \
            'fastdds_large_images.xml' if args.dds_profile == 'large-images' \
            else Path(args.dds_profile)
        os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = str(profile)

    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('ROS_DOMAIN_ID', str(150 + os.getpid() % 50))
    os.environ.setdefault('YOLO_OFFLINE', '1')
    os.environ.setdefault('YOLO_CONFIG_DIR', tempfile.mkdtemp(prefix='bench_yolo_'))

    from vision_nodes.platform.allocator import keep_freed_buffers
    # The same allocator settings as vision_node's, so the in-process configurations (bare
    # runner, pipeline, Ultralytics predict) get the same benefit as the node.
    keep_freed_buffers()

    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image
    from vision_msgs.msg import Detection2DArray

    from vision_nodes.tools.client import NodeProcess, VisionNodeClient, wait_for
    from vision_nodes.tools.demo import bundled_images
    from vision_nodes.ros.image_input import numpy_to_image
    from vision_nodes.manifest import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks.detect import DetectionParams

    image_path = args.image or next(p for p in bundled_images() if p.name == 'bus.jpg')
    bgr = cv2.imread(str(image_path))
    manifest = resolve_manifest(args.model)
    params = DetectionParams(manifest.thresholds.confidence, manifest.thresholds.iou,
                             manifest.thresholds.max_detections)
    print(f'image {image_path.name} {bgr.shape[1]}x{bgr.shape[0]}, model {manifest.name} '
          f'{manifest.input_size[1]}x{manifest.input_size[0]}, {os.cpu_count()} CPUs; '
          f'{args.rounds} rounds x {args.frames} frames per configuration; '
          f'DDS profile: {args.dds_profile}', flush=True)

    # ---- in-process pipelines (also export / warm the engine cache for the nodes)
    pipelines = {b: build_pipeline(manifest, b) for b in args.backends}
    # PyTorch's thread count is process-wide and Ultralytics changes it (see below): each
    # configuration runs with the count its own code would choose.
    torch_threads: dict[str, int] = {}
    default_threads = sys.modules['torch'].get_num_threads() if 'torch' in sys.modules else 0
    tensor, _ = pipelines[args.backends[0]].task.preprocess(bgr, 'bgr8')

    # ---- one node process per backend, each on its own topics
    reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    nodes, clients, pubs, queues = {}, {}, {}, {}
    for backend in args.backends:
        name = f'bench_{backend}'
        nodes[backend] = NodeProcess({'backend': backend, 'model': args.model},
                                     node_name=name, namespace=f'/{name}')
        clients[backend] = VisionNodeClient(f'/{name}/{name}', f'{name}_client')
    for backend in args.backends:
        client = clients[backend]
        client.wait_for_node(60)
        if not (client.change_state('configure', 600) and client.change_state('activate')):
            print(nodes[backend].output())
            return 1
        name = f'bench_{backend}'
        queues[backend] = client.subscribe(Detection2DArray, f'/{name}/detections', 10)
        pubs[backend] = client.publisher(Image, f'/{name}/image', reliable)
    msg = numpy_to_image(bgr, 'bgr8')
    # Harness latency after DDS delivered an answer: its reception → this process's callback.
    wakeups: list[float] = []

    def node_frame(backend: str, seq: int) -> float:
        msg.header.frame_id = f'{backend}_{seq}'
        start = time.time_ns()  # DDS reception timestamps are system-clock nanoseconds
        pubs[backend].publish(msg)
        got = queues[backend].get_stamped(
            timeout=30.0, predicate=lambda m: m.header.frame_id == msg.header.frame_id)
        if got is None:
            raise RuntimeError(f'node {backend} did not answer frame {seq}')
        arrival = got[0]
        wakeups.append((arrival.callback_ns - arrival.received_ns) / 1e9)
        return (arrival.received_ns - start) / 1e9

    ultra = ultra_proc = None
    if not args.no_ultralytics and 'onnx' in pipelines:
        import subprocess

        from vision_nodes.loaders.ultralytics import import_ultralytics

        onnx_path = str(pipelines['onnx'].runner.model_path)
        ultra = import_ultralytics().YOLO(onnx_path, task='detect')
        import torch

        default_threads = default_threads or torch.get_num_threads()
        ultra.predict(bgr, imgsz=manifest.input_size[0], verbose=False, device='cpu')
        # Ultralytics' CPU device setup calls torch.set_num_threads(cpu_count - 1).
        torch_threads['ultralytics predict (same .onnx)'] = torch.get_num_threads()
        # The same .onnx behind Ultralytics in a plain ROS node, on the same DDS path.
        ultra_proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name('ultralytics_reference_node.py')),
             onnx_path, '--ros-args', '-r', '__ns:=/bench_ultra'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = clients[args.backends[0]]
        queues['ultra'] = client.subscribe(Detection2DArray, '/bench_ultra/detections', 10)
        pubs['ultra'] = client.publisher(Image, '/bench_ultra/image', reliable)

    configs: dict[str, object] = {}
    for backend in args.backends:
        p = pipelines[backend]
        configs[f'{backend}: bare runner'] = lambda p=p: p.runner.infer(tensor)
        configs[f'{backend}: pipeline'] = lambda p=p: p.process(bgr, 'bgr8', params)
        configs[f'{backend}: node path'] = backend
    if ultra is not None:
        configs['ultralytics predict (same .onnx)'] = lambda: ultra.predict(
            bgr, imgsz=manifest.input_size[0], conf=params.confidence, iou=params.iou,
            verbose=False, device='cpu')
        configs['ultralytics in a ROS node (same .onnx)'] = 'ultra'

    for key, pub in pubs.items():
        if not wait_for(lambda pub=pub: pub.get_subscription_count() > 0, 60.0):
            raise RuntimeError(f'nothing subscribed to the {key} image topic')

    by_round: dict[str, list[list[float]]] = {k: [[] for _ in range(args.rounds)]
                                              for k in configs}
    seq = 0
    order = list(configs)
    shuffle = random.Random(args.seed).shuffle
    for round_index in range(args.rounds + 1):  # round 0 warms every path up, unrecorded
        # A fresh order each round, so no configuration always follows the same one (and
        # inherits its cache, thread and process state); the first frame of every block is
        # a warm-up: the numbers are steady-state per-frame latencies, as for a camera stream.
        shuffle(order)
        for label in order:
            fn = configs[label]
            if default_threads:
                sys.modules['torch'].set_num_threads(torch_threads.get(label, default_threads))
            for frame in range(1 + (args.frames if round_index else 2)):
                seq += 1
                if isinstance(fn, str):
                    elapsed = node_frame(fn, seq)
                else:
                    start = time.perf_counter()
                    fn()
                    elapsed = time.perf_counter() - start
                if round_index and frame:
                    by_round[label][round_index - 1].append(elapsed)

    for backend in args.backends:
        clients[backend].change_state('deactivate')
        clients[backend].close()
        nodes[backend].stop()
    for p in pipelines.values():
        p.close()
    if ultra_proc is not None:
        ultra_proc.terminate()
        ultra_proc.wait()

    samples = {k: [x for frames in rounds for x in frames] for k, rounds in by_round.items()}
    med = {k: _median_ms(v) for k, v in samples.items()}
    width = max(len(k) for k in med)
    print(f"\n{'configuration':<{width}}  median ms   p90 ms")
    for label, values in samples.items():
        p90 = sorted(values)[int(0.9 * (len(values) - 1))] * 1000
        print(f'{label:<{width}}  {med[label]:9.1f}  {p90:7.1f}')
    print(f'\nnode paths end at DDS delivery to this process; its executor then took '
          f'{_median_ms(wakeups):.2f} ms (median) more to run the callback, not counted')
    print(f'\nratios (paired by round: median of {args.rounds} rounds [95 % interval]):')

    def show(name: str, num: str, den: str, limit: float | None = None,
             strict: bool = False) -> None:
        ratio = paired_ratio(by_round[num], by_round[den])
        aim = f'   {verdict(ratio, limit, strict)}' if limit is not None else ''
        print(f'  {name:<38} = {ratio}{aim}')

    if args.rounds < 10:
        print('  (fewer than 10 rounds: the intervals are rough)')
    for backend in args.backends:
        # The 1.10 target is set for ONNX Runtime, the embedded default.
        show(f'{backend}: node path / bare runner', f'{backend}: node path',
             f'{backend}: bare runner', 1.10 if backend == 'onnx' else None)
        show(f'{backend}: pipeline / bare runner', f'{backend}: pipeline',
             f'{backend}: bare runner')
    if 'onnx' in args.backends and 'cpu' in args.backends:
        show('torch bare / onnx bare', 'cpu: bare runner', 'onnx: bare runner')
    if ultra is not None:
        show('onnx node path / ultralytics predict', 'onnx: node path',
             'ultralytics predict (same .onnx)', 1.0, strict=True)
        show('onnx node path / ultralytics node', 'onnx: node path',
             'ultralytics in a ROS node (same .onnx)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
