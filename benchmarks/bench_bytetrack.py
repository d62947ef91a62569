#!/usr/bin/env python3
"""The package's ByteTrack against Ultralytics' BYTETracker: time per frame, same detections.

The detections are YOLOv8n's (Ultralytics' predict on the CPU, conf 0.05) on a camera panning
over bus.jpg and over zidane.jpg (``test/tracking_sequences.py``: the sequences the id-parity
test uses), computed once; then each tracker runs the whole sequence ``--repeats`` times,
turn about, a fresh tracker each time. Printed: the CPU (lscpu's model name), the median time
per frame of each, and Ultralytics' over ours (above 1: ours is faster). Both give the same
indices and ids, which is checked first. ``--crowd N`` times N boxes drifting over a
1920 x 1080 frame instead (100 frames, scores spread over every threshold).

Not a test: nothing is asserted about time; the numbers are for reading.

    .venv/bin/python benchmarks/bench_bytetrack.py
    .venv/bin/python benchmarks/bench_bytetrack.py --frames 96 --repeats 30 --json out.json
    .venv/bin/python benchmarks/bench_bytetrack.py --crowd 200
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / 'test'))

from tracking_sequences import detect, pan  # noqa: E402
from vision_nodes.bytetrack import DEFAULTS, ByteTrack  # noqa: E402

WEIGHTS = ROOT.parent / 'shared' / 'models' / 'yolov8n.pt'


def cpu_name() -> str:
    """Return lscpu's model name of this CPU ('' when lscpu cannot say)."""
    try:
        text = subprocess.run(['lscpu'], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ''
    return next((line.split(':', 1)[1].strip() for line in text.splitlines()
                 if line.startswith('Model name:')), '')


def sequence(frames: int) -> list:
    """Return YOLOv8n's detections on ``frames`` panned frames of bus.jpg, then zidane.jpg."""
    import cv2
    import ultralytics

    assets = Path(ultralytics.__file__).parent / 'assets'
    out = []
    for name in ('bus.jpg', 'zidane.jpg'):
        out += detect(WEIGHTS, list(pan(cv2.imread(str(assets / name)), frames)))
    return out


class Ultralytics:
    """Ultralytics' BYTETracker called as tracking.py called it before (``_Boxes``, no image)."""

    def __init__(self, settings: dict) -> None:
        from ultralytics.trackers import BYTETracker

        self.tracker = BYTETracker(SimpleNamespace(**settings))

    def update(self, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Track one frame; return (detection indices, track ids), in index order."""
        from vision_nodes.tracking import _Boxes

        out = self.tracker.update(_Boxes(boxes, scores, classes), None)
        if len(out) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        order = np.argsort(out[:, -1], kind='stable')
        return out[order, -1].astype(np.int64), out[order, 4].astype(np.int64)


def crowd(count: int, frames: int = 100) -> list:
    """Return ``count`` boxes drifting at their own velocities, jittered, scores 0.05-0.95."""
    rng = np.random.default_rng(0)
    start, size = rng.uniform(0, 1800, (count, 2)), rng.uniform(20, 80, (count, 2))
    velocity = rng.normal(0, 3, (count, 2))
    out = []
    for k in range(frames):
        corner = start + velocity * k + rng.normal(0, 1, (count, 2))
        out.append((np.concatenate([corner, corner + size], axis=1).astype(np.float32),
                    rng.uniform(0.05, 0.95, count).astype(np.float32),
                    np.zeros(count, np.int64)))
    return out


def run(make, frames: list) -> tuple[float, list]:
    """Track ``frames`` with a fresh ``make()``; return (seconds, each frame's ids)."""
    tracker = make()
    start = time.perf_counter()
    out = [tracker.update(*frame) for frame in frames]
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    """Print the CPU, each tracker's median time per frame and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--frames', type=int, default=96, help='panned frames per image')
    parser.add_argument('--repeats', type=int, default=20)
    parser.add_argument('--crowd', type=int, default=0,
                        help='N drifting synthetic boxes instead of the detector\'s')
    parser.add_argument('--json', default='', help='also write the results to this file')
    args = parser.parse_args(argv)
    frames = crowd(args.crowd) if args.crowd else sequence(args.frames)
    settings = dict(DEFAULTS)
    trackers = {'ours': lambda: ByteTrack(**settings),
                'ultralytics': lambda: Ultralytics(settings)}
    ids = {name: run(make, frames)[1] for name, make in trackers.items()}
    equal = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
                for a, b in zip(ids['ours'], ids['ultralytics']))
    times: dict[str, list[float]] = {name: [] for name in trackers}
    for _ in range(args.repeats):
        for name, make in trackers.items():
            times[name].append(run(make, frames)[0] / len(frames) * 1e3)
    median = {name: statistics.median(values) for name, values in times.items()}
    result = {
        'cpu': cpu_name(), 'sequence': f'crowd {args.crowd}' if args.crowd else 'panned yolov8n',
        'frames': len(frames), 'repeats': args.repeats,
        'detections_per_frame': round(float(np.mean([len(f[1]) for f in frames])), 2),
        'ids_equal': equal,
        'ours_ms_per_frame': round(median['ours'], 4),
        'ultralytics_ms_per_frame': round(median['ultralytics'], 4),
        'ultralytics_over_ours': round(median['ultralytics'] / median['ours'], 2),
        'versions': {name: metadata.version(name) for name in
                     ('numpy', 'lap', 'ultralytics-opencv-headless')},
    }
    print(f"CPU: {result['cpu']}; {result['frames']} frames, "
          f"{result['detections_per_frame']} detections per frame; ids equal: {equal}")
    for name in trackers:
        print(f'{name:<12} median {median[name]:7.3f} ms per frame')
    print(f"Ultralytics' time over ours: {result['ultralytics_over_ours']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + '\n')
    return 0 if equal else 1


if __name__ == '__main__':
    sys.exit(main())
