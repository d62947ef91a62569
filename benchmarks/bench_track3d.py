#!/usr/bin/env python3
"""Cost per frame of tracking and of 3D detections, on this CPU, without ROS or a network.

The detections are YOLOv8n's on bus.jpg seen through a window moving 4 px per frame (the
ROS test's sequence), or, with ``--synthetic N``, N boxes drifting across a 1080 x 810 frame.
Measured per frame, median and 95th percentile over ``--frames`` frames:

* tracking     - :meth:`vision_nodes.tracking.Tracking.update` plus selecting the tracked
                 detections (what the node adds to a frame with ``tracker`` set), per tracker;
                 BoT-SORT's camera-motion compensation (``gmc_method``) included;
* 3D geometry  - :func:`vision_nodes.geometry3d.boxes_3d` on an aligned depth map;
* 3D topic     - the same on a 16UC1 depth image message, read in place (``depth_source:
                 topic``); with ``depth_source: model:<name>`` the depth map is already there.

Not a test: nothing is asserted, the numbers are for reading.

    .venv/bin/python benchmarks/bench_track3d.py
    .venv/bin/python benchmarks/bench_track3d.py --synthetic 50 --frames 500
"""

from __future__ import annotations

import argparse
import array
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vision_nodes.geometry3d import Intrinsics, boxes_3d  # noqa: E402
from vision_nodes.platform.cpu import cpu_info  # noqa: E402
from vision_nodes.tasks.detect import Detections  # noqa: E402
from vision_nodes.tracking import Tracking  # noqa: E402

STEP = 4


def yolo_sequence(frames: int, model_dir: str) -> tuple[list[Detections], np.ndarray]:
    """YOLOv8n's detections (ONNX Runtime) on the moving window; the first window image."""
    import cv2

    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tools.demo import bundled_images

    bus = cv2.imread(str(next(p for p in bundled_images() if p.name == 'bus.jpg')))
    model = build_pipeline(resolve_manifest('yolov8n'), 'onnx', model_dir=model_dir)
    params = model.task.make_params({})
    period = 20  # frames; the window goes back and forth
    out = []
    for k in range(frames):
        step = k % (2 * period)
        step = step if step < period else 2 * period - step
        window = np.ascontiguousarray(bus[STEP * step // 2:STEP * step // 2 + 720,
                                          STEP * step:STEP * step + 640])
        out.append(model.process(window, 'bgr8', params))
    model.close()
    return out, np.ascontiguousarray(bus[:720, :640])


def synthetic_sequence(frames: int, count: int) -> tuple[list[Detections], np.ndarray]:
    """``count`` boxes drifting 3 px per frame over a 1080 x 810 frame."""
    rng = np.random.default_rng(0)
    start = rng.uniform(0, 900, (count, 2))
    size = rng.uniform(30, 150, (count, 2))
    out = []
    for k in range(frames):
        xy = (start + 3 * k) % 900
        boxes = np.concatenate([xy, xy + size], axis=1).astype(np.float32)
        out.append(Detections(boxes, rng.uniform(0.3, 0.95, count).astype(np.float32),
                              np.arange(count) % 5))
    return out, np.zeros((810, 1080, 3), np.uint8)


def timed(call, frames: int) -> tuple[float, float]:
    """(median, p95) milliseconds of ``call(k)`` over the frames."""
    times = []
    for k in range(frames):
        start = time.perf_counter()
        call(k)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times) * 1e3, times[int(0.95 * (len(times) - 1))] * 1e3


def main(argv: list[str] | None = None) -> int:
    """Print one line per measured step."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--frames', type=int, default=300)
    parser.add_argument('--synthetic', type=int, default=0,
                        help='N synthetic boxes instead of YOLOv8n on bus.jpg')
    parser.add_argument('--model-dir', default='',
                        help='folder holding yolov8n.pt (default: found as the demo finds it)')
    args = parser.parse_args(argv)
    from vision_nodes.manifest import use_default_model_dir

    use_default_model_dir()  # ../shared/models or $VISION_NODES_MODEL_DIR, as the demo
    if args.synthetic:
        dets, image = synthetic_sequence(args.frames, args.synthetic)
    else:
        dets, image = yolo_sequence(args.frames, args.model_dir)
    mean_count = statistics.mean(len(d) for d in dets)
    print(f'CPU: {cpu_info().model}; {mean_count:.1f} detections per frame on average, '
          f'{image.shape[1]}x{image.shape[0]} image, {args.frames} frames')
    for kind in ('bytetrack', 'botsort'):
        tracking = Tracking(kind)
        tracking.update(dets[0].boxes, dets[0].scores, dets[0].class_ids, stamp_ns=0,
                        frame_id='cam', image=image)  # import and first frame not counted

        def track(k: int, tracking=tracking) -> None:
            d = dets[k]
            index, ids = tracking.update(d.boxes, d.scores, d.class_ids,
                                         stamp_ns=(k + 1) * 33_000_000, frame_id='cam',
                                         image=image if kind == 'botsort' else None)
            d.take(index, ids)
        median, p95 = timed(track, args.frames)
        print(f'tracking {kind:<10} median {median:6.3f} ms   p95 {p95:6.3f} ms')
    height, width = image.shape[:2]
    k = Intrinsics(900.0, 900.0, width / 2 - 0.5, height / 2 - 0.5)
    depth = np.random.default_rng(1).uniform(0.5, 8.0, (height, width)).astype(np.float32)
    depth[::7] = np.nan
    median, p95 = timed(lambda i: boxes_3d(dets[i].boxes, depth, k, (height, width)),
                        args.frames)
    print(f'3D geometry          median {median:6.3f} ms   p95 {p95:6.3f} ms')
    from vision_nodes.ros.inputs.depth_topic import depth_view

    raw = (np.nan_to_num(depth) * 1000).astype(np.uint16)
    msg = SimpleNamespace(encoding='16UC1', height=height, width=width, step=width * 2,
                          is_bigendian=0, data=array.array('B', raw.tobytes()))
    median, p95 = timed(lambda i: boxes_3d(dets[i].boxes, *depth_view(msg)[:1], k,
                                           (height, width), depth_scale=0.001),
                        args.frames)
    print(f'3D topic (16UC1)     median {median:6.3f} ms   p95 {p95:6.3f} ms')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
