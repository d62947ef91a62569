#!/usr/bin/env python3
"""How fast a busy node answers its services: idle, under 30 Hz images, during an export.

Starts ``vision_node`` in its own process and calls its parameter service
(``get_parameters``) and lifecycle service (``get_state``) again and again from this
process, in three situations:

* idle      - configured and active, no images;
* loaded    - a camera process (``vision_nodes.tools.image_publisher``) sends bus.jpg at
              ``--rate`` Hz into the model, faster than it can process;
* exporting - the first configure into an empty engine cache (a .pt exported to ONNX, and
              for OpenVINO converted; seconds to minutes of work on the transition thread).

Prints p50/p95/max per situation and service, and whether p95 meets the 100 ms target.
Not a test: nothing is asserted.

    .venv/bin/python benchmarks/bench_services.py --backend onnx
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TARGET_S = 0.100


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def _measure(calls: dict, until: threading.Event, interval: float = 0.02
             ) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in calls}
    while not until.is_set():
        for name, call in calls.items():
            start = time.monotonic()
            call()
            out[name].append(time.monotonic() - start)
        time.sleep(interval)
    return out


def _report(situation: str, samples: dict[str, list[float]]) -> None:
    for name, values in samples.items():
        if not values:
            print(f'{situation:10s} {name:15s} no samples')
            continue
        p95 = _percentile(values, 95)
        verdict = 'met' if p95 <= TARGET_S else 'MISSED'
        print(f'{situation:10s} {name:15s} n={len(values):4d}  p50 '
              f'{statistics.median(values) * 1e3:6.1f} ms  p95 {p95 * 1e3:6.1f} ms  max '
              f'{max(values) * 1e3:7.1f} ms  (p95 <= 100 ms: {verdict})')


def main() -> int:
    """Run the three situations; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--backend', default='onnx')
    parser.add_argument('--rate', type=float, default=30.0)
    parser.add_argument('--seconds', type=float, default=8.0, help='per situation')
    parser.add_argument('--image', type=Path, default=None, help='default: bus.jpg')
    args = parser.parse_args()

    from vision_nodes.manifest import use_default_model_dir
    from vision_nodes.platform.allocator import keep_freed_buffers
    from vision_nodes.tools.client import NodeProcess, VisionNodeClient
    from vision_nodes.tools.demo import bundled_images

    use_default_model_dir()

    keep_freed_buffers()
    image = args.image or next(p for p in bundled_images() if p.name == 'bus.jpg')
    cache = tempfile.mkdtemp(prefix='bench_services_cache_')
    node = NodeProcess({'backend': args.backend, 'engine_cache_dir': cache},
                       node_name='bench_services_node')
    client = VisionNodeClient('/bench_services_node', 'bench_services_client')
    calls = {
        'get_parameters': lambda: client.get_parameters('confidence_threshold', timeout=60.0),
        'get_state': lambda: client.get_state(timeout=60.0)}
    try:
        client.wait_for_node(30.0)
        done = threading.Event()
        result = {}

        def configure():
            result['ok'] = client.change_state('configure', timeout=900)
            done.set()

        started = time.monotonic()
        threading.Thread(target=configure, daemon=True).start()
        exporting = _measure(calls, done)
        print(f'first configure (export into an empty cache) took '
              f'{time.monotonic() - started:.1f} s; ok={result.get("ok")}')
        if not result.get('ok'):
            print(node.output()[-2000:])
            return 1
        client.change_state('activate')
        stop = threading.Event()
        threading.Timer(args.seconds, stop.set).start()
        idle = _measure(calls, stop)
        env = {**os.environ, 'FASTDDS_DEFAULT_PROFILES_FILE': str(
            Path(__file__).resolve().parent.parent / 'config' / 'fastdds_large_images.xml')}
        camera = subprocess.Popen(
            [sys.executable, '-m', 'vision_nodes.tools.image_publisher', str(image),
             '--topic', '/image', '--rate', str(args.rate),
             '--seconds', str(args.seconds + 2)], env=env, stdout=subprocess.DEVNULL)
        time.sleep(1.0)
        stop = threading.Event()
        threading.Timer(args.seconds, stop.set).start()
        loaded = _measure(calls, stop)
        camera.wait()
        print(f'backend {args.backend}; camera at {args.rate:g} Hz; target p95 <= 100 ms')
        _report('idle', idle)
        _report('loaded', loaded)
        _report('exporting', exporting)
        return 0
    finally:
        client.close()
        node.stop()


if __name__ == '__main__':
    sys.exit(main())
