#!/usr/bin/env python3
"""Host post-processing: the decode and NMS on reused buffers against fresh ones each frame.

YOLOv8n, -seg and -pose run once on ONNX Runtime (fp32) per bundled image (bus.jpg, rect
480x640, and zidane.jpg, rect 384x640); then only the post-processing of those raw outputs
is timed, many times, in interleaved rounds (the order of the two variants alternates by
round). Cases, each ``before`` against ``after``:

* ``detect <image> conf=C`` - :func:`decode_frames` on a fresh :class:`DecodeBuffers` each
  frame, every intermediate allocated (before), and on one set reused frame after frame
  (after), then the letterbox undone; at the default threshold (0.25) and at low ones
  (0.01, 0.001), where thousands of candidates reach NMS;
* ``segment``/``pose <image>`` - the same for the instance models' outputs (their own rows);
* ``label_image <image>`` - the instance label image of YOLOv8n-seg's masks: painted with a
  boolean index per mask (before) and with :meth:`SegmentResult.label_image` (after);
* ``label_image windows <image>`` - that label image painted over the whole image (before)
  and only within each mask's window, as the segmentation task's results give it (after);
* ``message <image>`` - a ``Detection2DArray`` of the detections built as rclpy objects and
  serialised (before) against the CDR bytes :func:`detections_to_cdr` writes with NumPy
  (after);
* ``cdr N`` (with ``--cdr-before REV``) - that encoder as it was at git revision ``REV``
  (before) against the one in this tree (after), for N random detections.

Every pair is checked to give the same result first. A ratio is after / before: the median
over rounds of the per-round ratio of medians, with a 95 % bootstrap interval (as the other
benchmarks). Not a test: nothing is asserted on timings.

    .venv/bin/python benchmarks/bench_decode.py [--rounds 30] [--json decode.json] \
        [--cdr-before main]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

from bench_detect import bench_environment, paired_ratio

IMAGES = ('bus.jpg', 'zidane.jpg')
#: Confidence thresholds of the detection cases: the default, then low ones.
THRESHOLDS = (0.25, 0.01, 0.001)


def raw_outputs(model: str, images: list[Path]) -> list[tuple[str, list[np.ndarray], Any]]:
    """Run ``model`` once per image on ONNX Runtime: (image name, raw outputs, its meta)."""
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline

    loaded = build_pipeline(resolve_manifest(model), 'onnx', precision='fp32')
    found = []
    try:
        for path in images:
            image = cv2.imread(str(path))
            shape = loaded.input_shape(image.shape[:2])
            loaded.runner.prepare_shape(shape)
            tensor, meta = loaded.task.preprocess(image, 'bgr8', shape)
            outputs = [np.array(out) for out in loaded.runner.infer(tensor)]
            found.append((path.name, outputs, meta))
    finally:
        loaded.close()
    return found


def painted_labels(result: Any) -> np.ndarray:
    """Return the label image painted with a boolean index per mask, lowest score first.

    ``result``'s masks are whole-image ones (their windows the image).
    """
    labels = np.zeros(result.shape, dtype=np.uint16)
    for i in np.lexsort((-np.arange(len(result)), result.scores)):
        labels[result.masks[i]] = i + 1
    return labels


def whole_image(masks: Any, windows: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(N, H, W) bool: masks held at their windows' size, over the whole image."""
    out = np.zeros((len(masks),) + tuple(shape), bool)
    for whole, mask, (top, bottom, left, right) in zip(out, masks, windows.tolist()):
        whole[top:bottom, left:right] = mask
    return out


def rclpy_detections(dets: Any, header: Any) -> bytes:
    """Build a Detection2DArray as message objects and serialise it as rclpy publishes it."""
    from rclpy.serialization import serialize_message
    from vision_msgs.msg import Detection2D, Detection2DArray, ObjectHypothesisWithPose

    msg = Detection2DArray(header=header)
    for box, score, class_id, ident in zip(dets.boxes.tolist(), dets.scores.tolist(),
                                           dets.class_ids.tolist(), dets.ids()):
        det = Detection2D(header=header, id=ident)
        hyp = ObjectHypothesisWithPose()
        hyp.hypothesis.class_id, hyp.hypothesis.score = str(class_id), score
        hyp.pose.pose.orientation.w = 1.0
        det.results.append(hyp)
        det.bbox.center.position.x = (box[0] + box[2]) / 2.0
        det.bbox.center.position.y = (box[1] + box[3]) / 2.0
        det.bbox.size_x, det.bbox.size_y = box[2] - box[0], box[3] - box[1]
        msg.detections.append(det)
    return serialize_message(msg)


def _same(a: Any, b: Any) -> bool:
    """Whether two results (arrays, bytes or tuples of detections and anchors) are equal."""
    if isinstance(a, tuple):
        return all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, 'boxes'):
        return all(_same(getattr(a, f), getattr(b, f)) for f in ('boxes', 'scores', 'class_ids'))
    if isinstance(a, bytes):
        return len(a) == len(b)  # padding bytes differ (rclpy leaves them as in memory)
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def cdr_cases(revision: str) -> dict[str, tuple[Callable[[], Any], Callable[[], Any], int]]:
    """Return cases: the Detection2DArray encoder at git ``revision`` against this tree's."""
    import importlib.util

    from vision_nodes.ros.wire.detection2d_cdr import encode_detection2d_array

    root = Path(__file__).resolve().parent.parent
    for where in ('wire/detection2d_cdr.py', 'outputs/cdr.py'):  # its file now, and before
        shown = subprocess.run(['git', 'show', f'{revision}:vision_nodes/ros/{where}'],
                               cwd=root, capture_output=True, text=True)
        if shown.returncode == 0:
            break
    path = Path(tempfile.mkdtemp(prefix='bench_cdr_')) / 'cdr_before.py'
    path.write_text(shown.check_returncode() or shown.stdout)
    # Its relative imports (the CDR writer) are this tree's.
    spec = importlib.util.spec_from_file_location('vision_nodes.ros.wire.cdr_before', path)
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    rng = np.random.default_rng(0)
    found = {}
    for count in (1, 6, 20, 100, 300):
        boxes = (rng.random((count, 4)) * 500).astype(np.float32)
        boxes[:, 2:] += boxes[:, :2]
        args = (1, 2, 'camera', boxes, rng.random(count).astype(np.float32),
                rng.integers(0, 80, count), [str(i) for i in range(count)])
        found[f'cdr {count}'] = ((lambda a=args: before.encode_detection2d_array(*a)),
                                 (lambda a=args: encode_detection2d_array(*a)), count)
    return found


def cases() -> dict[str, tuple[Callable[[], Any], Callable[[], Any], int]]:
    """Return every case: name → (before, after, detections)."""
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    from vision_nodes.ros.outputs.detection_outputs import detections_to_cdr
    from vision_nodes.tasks.decode_buffers import DecodeBuffers
    from vision_nodes.tasks.detect import DetectionParams, decode_frames
    from vision_nodes.tasks.instances import SegmentResult
    from vision_nodes.tasks.segment import instance_masks
    from vision_nodes.tools.demo import bundled_images

    images = [p for p in bundled_images() if p.name in IMAGES]
    found: dict[str, tuple[Callable[[], Any], Callable[[], Any], int]] = {}
    buffers = DecodeBuffers()
    header = Header(stamp=Time(sec=1, nanosec=2), frame_id='camera')

    def decoding(output: np.ndarray, params: Any, classes: int | None, meta: Any) -> tuple:
        def run(use: DecodeBuffers | None) -> Any:
            dets, anchors = decode_frames(output, params, classes, use)[0]
            meta.to_source(dets.boxes)
            return dets, anchors
        count = len(run(None)[0])
        return (lambda: run(None)), (lambda: run(buffers)), count

    for name, outputs, meta in raw_outputs('yolov8n', images):
        for conf in THRESHOLDS:
            found[f'detect {name} conf={conf}'] = decoding(
                outputs[0], DetectionParams(conf, 0.45, 300), None, meta)
        dets = decode_frames(outputs[0], DetectionParams())[0][0]
        meta.to_source(dets.boxes)
        found[f'message {name}'] = ((lambda d=dets: rclpy_detections(d, header)),
                                    (lambda d=dets: detections_to_cdr(d, header)), len(dets))
    for name, (pred, protos), meta in raw_outputs('yolov8n_seg', images):
        classes = pred.shape[1] - 4 - protos.shape[1]
        found[f'segment {name}'] = decoding(pred, DetectionParams(), classes, meta.letterbox)
        dets, anchors = decode_frames(pred, DetectionParams(), classes)[0]
        masks, kept, windows = instance_masks(pred[0][4 + classes:, anchors].T, protos[0],
                                              dets.boxes, meta)
        meta.letterbox.to_source(dets.boxes)
        shape = tuple(meta.letterbox.source_shape)
        whole = SegmentResult(dets.boxes[kept], dets.scores[kept], dets.class_ids[kept],
                              whole_image(masks, windows, shape))
        found[f'label_image {name}'] = ((lambda r=whole: painted_labels(r)),
                                        whole.label_image, len(whole))
        windowed = SegmentResult(whole.boxes, whole.scores, whole.class_ids, masks, windows,
                                 shape)
        found[f'label_image windows {name}'] = (whole.label_image, windowed.label_image,
                                                len(whole))
    for name, outputs, meta in raw_outputs('yolov8n_pose', images):
        found[f'pose {name}'] = decoding(outputs[0], DetectionParams(), 1, meta)
    return found


def measure(found: dict, rounds: int, budget_s: float) -> tuple[dict, dict]:
    """Time every case's two variants in rounds; return per-case samples (s) per variant."""
    samples = {case: ([], []) for case in found}
    for index in range(rounds):
        for case, (before, after, _) in found.items():
            variants = (before, after) if index % 2 else (after, before)
            spent = {}
            for run in variants:
                times = []
                start_all = time.perf_counter()
                while not times or time.perf_counter() - start_all < budget_s:
                    start = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - start)
                spent[run] = times
            samples[case][0].append(spent[before])
            samples[case][1].append(spent[after])
    return samples


def main(argv: list[str] | None = None) -> int:
    """Run the cases; print medians (µs) and after / before ratios; write JSON if asked."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rounds', type=int, default=30)
    parser.add_argument('--budget-ms', type=float, default=20.0,
                        help='time per variant, case and round (at least one call)')
    parser.add_argument('--json', type=Path, default=None, help='write the results here')
    parser.add_argument('--cdr-before', default='', metavar='REV',
                        help="also time the Detection2DArray encoder at git revision REV "
                             "against this tree's")
    args = parser.parse_args(argv)
    bench_environment('default')
    from bench_report import machine_facts

    found = cases()
    if args.cdr_before:
        found.update(cdr_cases(args.cdr_before))
    load_before = os.getloadavg()
    for case, (before, after, _) in found.items():
        first, second = before(), after()
        if not _same(first, second) or (case.startswith('cdr') and first != second):
            raise SystemExit(f'{case}: before and after differ')
    samples = measure(found, args.rounds, args.budget_ms / 1000.0)
    machine = {**machine_facts(), 'load_average': [load_before, os.getloadavg()]}
    print(f"{machine.get('cpu', '?')}; load average {load_before[0]:.2f} -> "
          f'{os.getloadavg()[0]:.2f}; {args.rounds} rounds')
    print(f"{'case':34} {'dets':>5} {'before us':>10} {'after us':>10}  after/before [95 %]")
    report, ratios = {}, {}
    for case, (before, after) in samples.items():
        b_us = statistics.median(t for r in before for t in r) * 1e6
        a_us = statistics.median(t for r in after for t in r) * 1e6
        ratio = paired_ratio(after, before)
        report[case] = {'before_us': b_us, 'after_us': a_us, 'detections': found[case][2]}
        ratios[case] = {'median': ratio.value, 'low': ratio.low, 'high': ratio.high}
        print(f'{case:34} {found[case][2]:5d} {b_us:10.1f} {a_us:10.1f}  {ratio}')
    if args.json:
        args.json.write_text(json.dumps({'machine': machine, 'cases': report,
                                         'ratios': ratios}, indent=2) + '\n')
        print(f'wrote {args.json}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
