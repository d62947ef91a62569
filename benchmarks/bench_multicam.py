#!/usr/bin/env python3
"""N cameras: one batched node (``image_topics``) against N single-camera nodes.

For each N of ``--cameras`` (default 1 2 4), N publishers send the same image (resized to
``--size``, default 640x480) at ``--rate`` Hz each (default 30) on ``/camK/image``; then

* batched - one ``vision_node`` with ``image_topics: [/cam0/image, ...]`` (one model, frames
            batched within ``batch_window``), results on ``/camK/detections``;
* single  - N ``vision_node`` processes, node K in namespace ``/camK`` (its ``image`` and
            ``detections``), each with its own copy of the model;

both on ``--backend`` (default onnx), measured one after the other on the same topics for
``--seconds`` after ``--warmup`` seconds; ``--repeats K`` measures K such pairs, alternating
which mode goes first, and adds the median ratios (``ratios_median``) and each pair's
(``repeats``) to the JSON. Per camera: delivered frames per second (answers
received / seconds), latency from the image's stamp to DDS delivery of its answer to this
process (p50, p95); per mode: total resident memory of the node processes (RSS, and PSS,
which splits shared pages between processes), sampled while running, the largest sample;
the CPU the node processes used (cores busy on average, and CPU ms per delivered frame) beside
the CPU this process's publishers used: with every camera saturated, the ratio of delivered
frames follows how the machine's cores are shared out as much as how much work a frame costs.
Each camera's last answer of the batched node is compared with the single-camera node's on
the same image (same objects: score >= 0.5, same class, IoU >= 0.9).

It also times, in this process, two cameras of different sizes (bus.jpg 810x1080 and
zidane.jpg 1280x720): run as two rect batches of one (each at its own aspect ratio, what
the node does) against one letterboxed square batch of two.

Targets (issue 18): 4 cameras, memory of the batched node <= 0.4x the single nodes', aggregate
throughput >= 1.0x at no worse p95. Results go to ``--json`` and ``--plot`` (PNG, needs
matplotlib). Not a test: nothing is asserted. The publishers, DDS and every node share this
machine's cores, so the numbers hold for this machine's load only. A ``--backend`` /
``--precision`` this machine cannot run is said in one line (and in the JSON's ``"skipped"``)
instead of measured (``bench_configs.py``).

    .venv/bin/python benchmarks/bench_multicam.py --cameras 1 2 4 --rate 30 --json mc.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_configs import cannot_run, runnable  # noqa: E402
from bench_detect import _message_arrays, bench_environment, same_objects  # noqa: E402


def _memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in KiB; zeros when it is gone."""
    rss = pss = 0
    try:
        for line in Path(f'/proc/{pid}/status').read_text().splitlines():
            if line.startswith('VmRSS:'):
                rss = int(line.split()[1])
        for line in Path(f'/proc/{pid}/smaps_rollup').read_text().splitlines():
            if line.startswith('Pss:'):
                pss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, pss


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process (all its threads) has used; 0 when it is gone."""
    try:
        fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Camera:
    """One camera: a publisher thread at a fixed rate, and the answers on its topic."""

    def __init__(self, client: Any, index: int, msg: Any, rate: float) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image
        from vision_msgs.msg import Detection2DArray

        self.index, self._msg, self._rate = index, msg, rate
        qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self._pub = client.publisher(Image, f'/cam{index}/image', qos)
        self.answers = client.subscribe(Detection2DArray, f'/cam{index}/detections', 100)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.seq = 0

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        period = 1.0 / self._rate
        # Cameras are not in phase: each starts at its own offset within the period.
        next_at = time.monotonic() + period * self.index / 4.0
        while not self._stop.is_set():
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            now = time.time_ns()
            self.seq += 1
            self._msg.header.stamp.sec, self._msg.header.stamp.nanosec = divmod(now, 10**9)
            self._msg.header.frame_id = f'cam{self.index}_{self.seq}'
            self._pub.publish(self._msg)
            next_at += period
            if next_at < time.monotonic() - period:  # fell behind: do not burst
                next_at = time.monotonic()

    def drain(self, window: tuple[int, int], wait: float) -> tuple[list[float], Any]:
        """Answers to frames stamped within ``window`` (ns): latencies (s) and the last one.

        Waits up to ``wait`` seconds for answers still in flight.
        """
        latencies, last = [], None
        while (got := self.answers.get_stamped(wait)) is not None:
            arrival, msg = got
            stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
            if window[0] <= stamp <= window[1]:
                latencies.append((arrival.received_ns - stamp) / 1e9)
                last = msg
        return latencies, last


def run_mode(mode: str, count: int, args: Any, cameras: list[Camera]) -> dict[str, Any]:
    """Start the node(s) of ``mode`` for ``count`` cameras, measure, stop them."""
    from vision_nodes.tools.client import NodeProcess, VisionNodeClient

    common = {'backend': args.backend, 'model': args.model, 'precision': args.precision}
    procs, clients = [], []
    if mode == 'batched':
        procs.append(NodeProcess({**common, 'image_topics': [f'/cam{i}/image'
                                                             for i in range(count)],
                                  'batch_window': args.batch_window,
                                  'max_batch': args.max_batch},
                                 node_name='mc_batched'))
        clients.append(VisionNodeClient('/mc_batched', 'mc_batched_client'))
    else:
        for i in range(count):
            procs.append(NodeProcess(common, node_name='mc_single', namespace=f'/cam{i}'))
            clients.append(VisionNodeClient(f'/cam{i}/mc_single', f'mc_single{i}_client'))
    try:
        for client, proc in zip(clients, procs):
            client.wait_for_node(60)
            if not (client.change_state('configure', 600) and client.change_state('activate')):
                raise RuntimeError(f'{mode}: a node did not start:\n{proc.output()[-3000:]}')
        for cam in cameras:
            cam.answers.clear()
            cam.start()
        time.sleep(args.warmup)
        for cam in cameras:
            cam.answers.clear()
        samples: list[tuple[int, int]] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                mem = [_memory_kib(p.process.pid) for p in procs]
                samples.append((sum(m[0] for m in mem), sum(m[1] for m in mem)))
                stop.wait(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        window = (time.time_ns(), time.time_ns() + int(args.seconds * 1e9))
        cpu_start = [_cpu_seconds(p.process.pid) for p in procs]
        own_start = time.process_time()
        time.sleep(args.seconds)
        measured = args.seconds
        cpu = sum(_cpu_seconds(p.process.pid) - s for p, s in zip(procs, cpu_start))
        own = time.process_time() - own_start
        stop.set()
        sampler.join()
        for cam in cameras:
            cam.stop()
        per_camera = []
        for cam in cameras:
            latencies, last = cam.drain(window, 2.0)
            per_camera.append({'fps': len(latencies) / measured,
                               'p50_ms': (_percentile(latencies, 0.5) or 0) * 1e3,
                               'p95_ms': (_percentile(latencies, 0.95) or 0) * 1e3,
                               'answers': len(latencies), 'last': last})
        answers = sum(c['answers'] for c in per_camera)
        return {'cameras': per_camera,
                'cpu_cores': cpu / measured, 'bench_cpu_cores': own / measured,
                'cpu_ms_per_frame': cpu * 1e3 / answers if answers else None,
                'rss_mib': max(s[0] for s in samples) / 1024 if samples else None,
                'pss_mib': max(s[1] for s in samples) / 1024 if samples else None,
                'seconds': measured}
    finally:
        for cam in cameras:
            cam.stop()
        for client in clients:
            client.close()
        for proc in procs:
            proc.stop()


def mixed_sizes(args: Any, images: dict[str, np.ndarray]) -> dict[str, float]:
    """Two cameras of different sizes: two rect runs of one vs one square batch of two (ms)."""
    from dataclasses import replace

    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks.detect import DetectionParams

    params = DetectionParams()
    frames = [(images['bus'], 'bgr8'), (images['zidane'], 'bgr8')]
    out = {}
    for rect in (True, False):
        manifest = replace(resolve_manifest(args.model), rect=rect)
        model = build_pipeline(manifest, args.backend, precision=args.precision, max_batch=2)
        try:
            for _ in range(3):
                model.process_batch(frames, params)
            times = []
            for _ in range(args.mixed_runs):
                start = time.perf_counter()
                model.process_batch(frames, params)
                times.append(time.perf_counter() - start)
            key = 'rect: two runs of one' if rect else 'letterboxed square: one run of two'
            out[key + ' (ms)'] = statistics.median(times) * 1e3
        finally:
            model.close()
    return out


def measure_pair(count: int, args: Any, cameras: list[Any], order: tuple[str, str]
                 ) -> dict[str, Any]:
    """Both modes on ``count`` cameras, in ``order``; their numbers and the ratios."""
    run: dict[str, Any] = {}
    for mode in order:
        run[mode] = run_mode(mode, count, args, cameras)
        cams = run[mode]['cameras']
        rates = ', '.join(f"{c['fps']:.1f}" for c in cams)
        print(f"  {count} cam {mode:>7}: fps/cam {rates}; p50 "
              f"{max(c['p50_ms'] for c in cams):.0f} ms, p95 "
              f"{max(c['p95_ms'] for c in cams):.0f} ms (worst camera); RSS "
              f"{run[mode]['rss_mib']:.0f} MiB, PSS {run[mode]['pss_mib']:.0f} MiB; "
              f"node CPU {run[mode]['cpu_cores']:.2f} cores "
              f"({run[mode]['cpu_ms_per_frame'] or 0:.0f} ms/frame), publishers "
              f"{run[mode]['bench_cpu_cores']:.2f} cores", flush=True)
    same = []
    for b, s in zip(run['batched']['cameras'], run['single']['cameras']):
        mine, theirs = b.pop('last'), s.pop('last')
        same.append('no answer to compare' if mine is None or theirs is None else
                    same_objects(_message_arrays(mine), _message_arrays(theirs)))
    run['same_objects'] = same
    batched, single = run['batched'], run['single']
    fps_b = sum(c['fps'] for c in batched['cameras'])
    fps_s = sum(c['fps'] for c in single['cameras'])
    run['ratios'] = {
        'memory_rss': batched['rss_mib'] / single['rss_mib'],
        'memory_pss': batched['pss_mib'] / single['pss_mib'],
        'throughput': fps_b / fps_s if fps_s else None,
        'p95': max(c['p95_ms'] for c in batched['cameras']) /
        max(c['p95_ms'] for c in single['cameras'])}
    r = run['ratios']
    print(f"  {count} cam ratios batched/single: memory RSS {r['memory_rss']:.2f}x "
          f"(target <= 0.4), PSS {r['memory_pss']:.2f}x; throughput "
          f"{r['throughput'] or 0:.2f}x (target >= 1.0); p95 {r['p95']:.2f}x "
          f"(target <= 1.0); results: {'; '.join(same)}", flush=True)
    for cam in cameras:
        cam.stop()
    return run


def _ratio_runs(pairs: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(throughput, p95) ratio of each pair."""
    return [(pair['ratios']['throughput'] or 0.0, pair['ratios']['p95']) for pair in pairs]


def plot(results: dict[str, Any], path: Path) -> None:
    """Delivered fps per camera, p95 latency and memory, batched vs single, per N."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    counts = sorted(results['runs'], key=int)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    width = 0.38
    x = np.arange(len(counts))
    for offset, mode in ((-width / 2, 'batched'), (width / 2, 'single')):
        runs = [results['runs'][n][mode] for n in counts]
        axes[0].bar(x + offset, [statistics.mean(c['fps'] for c in r['cameras'])
                                 for r in runs], width, label=mode)
        axes[1].bar(x + offset, [max(c['p95_ms'] for c in r['cameras']) for r in runs],
                    width, label=mode)
        axes[2].bar(x + offset, [r['rss_mib'] for r in runs], width, label=mode)
    for ax, title in zip(axes, ('delivered fps per camera', 'p95 latency (ms, worst camera)',
                                'resident memory, all nodes (MiB)')):
        ax.set_xticks(x, [f'{n} cam' for n in counts])
        ax.set_title(title)
        ax.legend()
    fig.suptitle(f"{results['backend']} {results['model']}, {results['rate']:g} Hz per camera, "
                 f"{results['cpus']} CPUs")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table and the ratios, write JSON and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cameras', type=int, nargs='+', default=[1, 2, 4])
    parser.add_argument('--rate', type=float, default=30.0, help='Hz per camera')
    parser.add_argument('--seconds', type=float, default=20.0, help='measured per mode')
    parser.add_argument('--warmup', type=float, default=5.0)
    parser.add_argument('--backend', default='onnx')
    parser.add_argument('--precision', default='fp32')
    parser.add_argument('--model', default='yolov8n')
    parser.add_argument('--size', default='640x480', help='camera image WIDTHxHEIGHT')
    parser.add_argument('--batch-window', type=float, default=5.0, help='ms (batched node)')
    parser.add_argument('--max-batch', type=int, default=0,
                        help='batched node: most frames a run (0: one per camera)')
    parser.add_argument('--mixed-runs', type=int, default=20, help='0: skip that part')
    parser.add_argument('--repeats', type=int, default=1,
                        help='pairs of runs per N, alternating which mode goes first; the '
                             'median ratios are printed and written too')
    parser.add_argument('--dds-profile', default='default')
    parser.add_argument('--json', type=Path, default=None)
    parser.add_argument('--plot', type=Path, default=None)
    args = parser.parse_args(argv)
    bench_environment(args.dds_profile)

    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.ros.inputs.conversion import numpy_to_image
    from vision_nodes.tools.client import VisionNodeClient
    from vision_nodes.tools.demo import bundled_images

    config = {'backend': args.backend, 'precision': args.precision, 'model': args.model}
    _, skipped = runnable([f'{args.backend}:{args.precision}'], lambda _: cannot_run(
        resolve_manifest(args.model), args.backend, args.precision))
    if skipped:
        if args.json:
            args.json.write_text(json.dumps({**config, 'skipped': skipped}, indent=2))
        return 1
    paths = {p.stem: p for p in bundled_images()}
    images = {name: cv2.imread(str(paths[name])) for name in ('bus', 'zidane')}
    width, height = (int(v) for v in args.size.split('x'))
    frame = cv2.resize(images['bus'], (width, height), interpolation=cv2.INTER_AREA)
    # Export into the engine cache first, single and batched, so no node pays for it.
    for batch in (1, args.max_batch or max(args.cameras)):
        build_pipeline(resolve_manifest(args.model), args.backend, precision=args.precision,
                       max_batch=batch).close()
    results: dict[str, Any] = {
        **config, 'skipped': {}, 'rate': args.rate, 'size': args.size, 'seconds': args.seconds,
        'batch_window_ms': args.batch_window, 'max_batch': args.max_batch,
        'cpus': os.cpu_count(), 'runs': {}}
    print(f'{args.model} on {args.backend} ({args.precision}), {args.size} frames at '
          f'{args.rate:g} Hz per camera, {args.seconds:g} s per mode, {os.cpu_count()} CPUs',
          flush=True)
    results['mixed_sizes'] = mixed_sizes(args, images) if args.mixed_runs else {}
    for key, value in results['mixed_sizes'].items():
        print(f'  two cameras of different sizes, {key}: {value:.1f}', flush=True)
    harness = VisionNodeClient('/mc_none', 'mc_bench')
    try:
        every = [Camera(harness, i, numpy_to_image(frame, 'bgr8'), args.rate)
                 for i in range(max(args.cameras))]
        for count in args.cameras:
            cameras = every[:count]
            pairs = []
            for repeat in range(max(1, args.repeats)):
                # Alternate which mode goes first, so neither always meets the warmer machine.
                order = ('batched', 'single') if repeat % 2 == 0 else ('single', 'batched')
                pairs.append(measure_pair(count, args, cameras, order))
            run = results['runs'][str(count)] = pairs[0]
            if len(pairs) > 1:
                run['repeats'] = [pair['ratios'] for pair in pairs]
                run['ratios_median'] = {
                    key: statistics.median(pair['ratios'][key] or 0 for pair in pairs)
                    for key in pairs[0]['ratios']}
                m = run['ratios_median']
                print(f"  {count} cam, median of {len(pairs)} pairs: memory RSS "
                      f"{m['memory_rss']:.2f}x, throughput {m['throughput']:.2f}x "
                      f"(runs {', '.join(f'{p[0]:.2f}' for p in _ratio_runs(pairs))}), "
                      f"p95 {m['p95']:.2f}x (runs "
                      f"{', '.join(f'{p[1]:.2f}' for p in _ratio_runs(pairs))})", flush=True)
    finally:
        harness.close()
    for run in results['runs'].values():
        for mode in ('batched', 'single'):
            for cam in run[mode]['cameras']:
                cam.pop('last', None)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        print(f'wrote {args.json}')
    if args.plot:
        try:
            plot(results, args.plot)
            print(f'wrote {args.plot}')
        except ImportError:
            print('no plot: matplotlib is not installed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
