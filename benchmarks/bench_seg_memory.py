#!/usr/bin/env python3
"""Memory one dense segmentation frame adds: masks, ``instance_mask`` and ``annotated``.

A frame of many detections on a large image is what a segmentation node's memory grows with.
Each case runs in a fresh Python process: YOLOv8n-seg (``../shared/models``, ONNX Runtime
fp32) is built and warmed on a small image, then one large frame goes through what the node
does for it with ``instance_mask`` and ``annotated`` subscribed
(``ros/outputs/detection_outputs.py``'s ``publish``): the detections and their masks, the
``mono16`` label image serialised, the label image again for the drawing, the overlay drawn
(on the frame as the node hands it, a BGR view) and serialised as ``bgr8``. The detections
come from one of two sources:

* ``tiles``: the network on a frame tiled from the images bundled with ultralytics
  (``bus.jpg``, ``zidane.jpg``) at ``confidence_threshold`` ``--confidence`` (0.01) and
  ``max_detections`` 300: as many as the test model finds there (about 240);
* ``synthetic``: exactly 300 detections, raw outputs (64-pixel boxes on a 32-pixel grid of
  the network input, random mask coefficients over smooth prototypes) handed to the task's
  ``postprocess`` for that frame: the boxes cover the frame about four times.

The peak resident memory above the RSS just before the frame is measured per stage and for
the whole frame: Linux's high-water mark (``VmHWM``, reset through ``/proc/self/clear_refs``
before each stage), exact and independent of tracemalloc. Where it cannot be reset, a
thread samples RSS every millisecond (psutil) instead.

    .venv/bin/python benchmarks/bench_seg_memory.py \
        --json benchmarks/results/bench_seg_memory.json

The same with ``PYTHONPATH=<another tree>`` measures that tree's ``vision_nodes`` (the
``package`` field says which ran). It exits 1 when a frame adds 1 GiB or more.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

#: (height, width) of the frames measured: 12 MP and 48 MP.
SIZES = ((3000, 4000), (6000, 8000))
#: Tiles in a row of the frame (the scene the network sees: the most detections at 0.01).
COLUMNS = 5
#: The issue's bound on what one such frame may add (bytes).
LIMIT = 1 << 30
STAGES = ('postprocess', 'instance_mask', 'annotated')


class PeakMeter:
    """Peak RSS above a starting point, from ``VmHWM`` or, failing that, 1 ms samples."""

    def __init__(self) -> None:
        self.exact = self._reset()
        self._stop = threading.Event()
        self._peak = 0

    @staticmethod
    def _reset() -> bool:
        try:
            Path('/proc/self/clear_refs').write_text('5')
            return True
        except OSError:
            return False

    @staticmethod
    def _status(field: str) -> int:
        for line in Path('/proc/self/status').read_text().splitlines():
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f'no {field} in /proc/self/status')

    def rss(self) -> int:
        """Resident bytes now."""
        return self._status('VmRSS')

    def measure(self, run: Callable[[], Any]) -> tuple[Any, int]:
        """Return ``run()``'s value and the peak RSS above the RSS before it (bytes)."""
        start = self.rss()
        if self.exact:
            self._reset()
            value = run()
            return value, self._status('VmHWM') - start
        import psutil

        process, self._peak = psutil.Process(), start
        self._stop.clear()

        def sample() -> None:
            while not self._stop.wait(0.001):
                self._peak = max(self._peak, process.memory_info().rss)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            value = run()
        finally:
            self._stop.set()
            thread.join()
        return value, max(self._peak, self.rss()) - start


def tiled_image(height: int, width: int, columns: int = COLUMNS) -> Any:
    """Return a (height, width) BGR frame of bus.jpg and zidane.jpg tiles, ``columns`` a row.

    The tiles are scaled with the frame, so that every size shows the network the same scene.
    """
    import cv2
    import numpy as np

    from vision_nodes.tools.demo import bundled_images

    tiles = [cv2.imread(str(p)) for p in bundled_images() if p.name in ('bus.jpg', 'zidane.jpg')]
    side = width / columns / max(t.shape[1] for t in tiles)
    tiles = [cv2.resize(t, (round(t.shape[1] * side), round(t.shape[0] * side)),
                        interpolation=cv2.INTER_AREA) for t in tiles]
    image = np.zeros((height, width, 3), np.uint8)
    y, row = 0, 0
    while y < height:
        x, tallest, k = 0, 0, row
        while x < width:
            tile = tiles[k % len(tiles)]
            h, w = min(tile.shape[0], height - y), min(tile.shape[1], width - x)
            image[y:y + h, x:x + w] = tile[:h, :w]
            x, tallest, k = x + w, max(tallest, h), k + 1
        y, row = y + tallest, row + 1
    return image


def synthetic_outputs(shape: tuple[int, int], count: int = 300, classes: int = 80,
                      masks: int = 32) -> list[Any]:
    """Return raw outputs of a -seg model: a ``shape`` input, ``count`` detections NMS keeps.

    64-pixel boxes on a 32-pixel grid (neighbours overlap by IoU 1/3), classes in turn,
    random coefficients over smooth random prototypes (masks are blobs).
    """
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    height, width = shape
    anchors = sum((height // s) * (width // s) for s in (8, 16, 32))
    pred = np.zeros((1, 4 + classes + masks, anchors), np.float32)
    columns = max(1, width // 32 - 1)
    index = np.arange(count)
    pred[0, 0, :count] = 32 + 32 * (index % columns)
    pred[0, 1, :count] = 32 + 32 * (index // columns % max(1, height // 32 - 1))
    pred[0, 2:4, :count] = 64
    pred[0, 4 + index % classes, index] = 0.5
    pred[0, 4 + classes:, :count] = rng.standard_normal((masks, count))
    protos = rng.standard_normal((masks, height // 4, width // 4)).astype(np.float32)
    protos = np.stack([cv2.GaussianBlur(p, (0, 0), 3) * 3 for p in protos])
    return [pred, protos[None]]


def one_frame(height: int, width: int, confidence: float, source: str = 'tiles'
              ) -> dict[str, Any]:
    """Measure one frame of (height, width) in this process; return its numbers.

    ``source``: ``tiles`` runs the network on the tiled frame; ``synthetic`` hands the
    task's post-processing :func:`synthetic_outputs` (300 detections) for that frame.
    """
    import numpy as np
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    from vision_nodes.drawing import draw
    from vision_nodes.images import to_rgb
    from vision_nodes.manifest import use_default_model_dir
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.ros.wire.image_cdr import encode_image
    from vision_nodes.ros.outputs.segment_outputs import instance_mask_to_cdr
    from vision_nodes.tasks.detect import DetectionParams

    use_default_model_dir()
    loaded = build_pipeline(resolve_manifest('yolov8n_seg'), 'onnx', precision='fp32')
    params = DetectionParams(confidence, 0.45, 300)
    header = Header(stamp=Time(sec=1, nanosec=2), frame_id='camera')
    image = tiled_image(height, width)
    loaded.process(image[:480, :640].copy(), 'bgr8', params)  # warm: buffers, threads
    meter = PeakMeter()
    start = meter.rss()
    found: dict[str, Any] = {'frame': 0}

    def stage(name: str, run: Callable[[], Any]) -> Any:
        before, began = meter.rss(), time.perf_counter()
        value, found[name] = meter.measure(run)
        found[f'{name}_s'] = time.perf_counter() - began
        found['frame'] = max(found['frame'], before - start + found[name])
        return value

    def postprocess() -> Any:
        if source == 'tiles':
            return loaded.process(image, 'bgr8', params)
        _, meta = loaded.task.preprocess(image, 'bgr8', loaded.input_shape(image.shape[:2]))
        return loaded.task.postprocess(synthetic_outputs(meta.shape), meta, params)

    result = stage('postprocess', postprocess)
    found['detections'] = len(result)
    found['mask_bytes'] = int(sum(np.asarray(m).nbytes for m in result.masks))
    stage('instance_mask', lambda: len(instance_mask_to_cdr(result, header)))

    def annotated() -> int:
        bgr = to_rgb(image, 'bgr8')[:, :, ::-1]  # as the node hands it: a view
        picture = draw(bgr, result.boxes, result.scores, result.class_ids,
                       mask_labels=result.label_image())
        return len(encode_image(np.ascontiguousarray(picture), 'bgr8', header))
    stage('annotated', annotated)
    loaded.close()
    import vision_nodes

    return {'size': [height, width], 'source': source, 'confidence': confidence,
            'package': str(Path(vision_nodes.__file__).parent), 'rss_before': start,
            'exact_peak': meter.exact, **found}


def run_case(height: int, width: int, confidence: float, source: str) -> dict[str, Any]:
    """Run :func:`one_frame` in a fresh interpreter; return what it printed (JSON)."""
    code = ('import json, sys; sys.path.insert(0, %r); import bench_seg_memory as b; '
            'print(json.dumps(b.one_frame(%d, %d, %r, %r)))'
            % (str(Path(__file__).resolve().parent), height, width, confidence, source))
    # Run beside this script, so that PYTHONPATH (an older tree, to compare) decides which
    # vision_nodes is imported, not the current folder.
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          env=dict(os.environ), cwd=Path(__file__).resolve().parent,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f'case {height}x{width} failed: {done.stderr[-2000:]}')
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Measure each size in a fresh process; print, write the JSON, fail above the limit."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--confidence', type=float, default=0.01)
    parser.add_argument('--sizes', nargs='+', default=[f'{h}x{w}' for h, w in SIZES],
                        help='frames as HEIGHTxWIDTH')
    parser.add_argument('--sources', nargs='+', default=['tiles', 'synthetic'],
                        choices=['tiles', 'synthetic'],
                        help="the network on a tiled frame, or 300 detections' outputs")
    parser.add_argument('--json', type=Path, default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_report import machine_facts

    cases = []
    for source, size in ((s, z) for s in args.sources for z in args.sizes):
        height, width = (int(v) for v in size.lower().split('x'))
        case = run_case(height, width, args.confidence, source)
        cases.append(case)
        stages = ', '.join(f"{s} {case[s] / 2**20:.0f} MiB {case[s + '_s']:.2f} s"
                           for s in STAGES)
        print(f"{source} {height}x{width}: {case['detections']} detections, masks "
              f"{case['mask_bytes'] / 2**20:.1f} MiB; peak RSS added {case['frame'] / 2**20:.0f}"
              f" MiB ({stages}; before the frame {case['rss_before'] / 2**20:.0f} MiB)")
    report = {'machine': machine_facts(), 'limit_bytes': LIMIT, 'cases': cases}
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + '\n')
    return 0 if all(c['frame'] < LIMIT for c in cases) else 1


if __name__ == '__main__':
    sys.exit(main())
