#!/usr/bin/env python3
"""Several models on one GPU, each run by its own thread at once: does every answer hold? No ROS.

A node with several models (``models: [...]``), or one that measures a reduced precision
against fp32 while loading, runs more than one model on the GPU from more than one thread.
With CUDA graphs (``use_cuda_graphs``) a model captures a graph for each new input shape, and
a capture must not meet another thread's device-wide call (``runners/torch_graphs.py``). This
loads every ``--models`` entry on the backend, then:

* alone    - each model on its own, the images once: the reference;
* together - every model on its own thread, all started at once, each running the images in
             its own rotated order for ``--rounds`` rounds (so input shapes change, and graphs
             are captured, while the other models run).

Every frame of ``together`` must give what ``alone`` gives for the same image and model
(``gpu_check``'s comparison at fp32: detections at box IoU 0.95 and their masks, keypoints
and rotated corners; class probabilities within 0.01 and the same top-k order; in its words
"the GPU" is the run together and "the CPU" the model alone), and no model may log a failed
capture or raise. It prints a line per model and a verdict; ``--json``
writes the same.

    python benchmarks/gpu_threads.py                             # detect, seg, pose, cls, obb
    python benchmarks/gpu_threads.py --models yolov8n:fp16 yolov8n_seg --rounds 20
    python benchmarks/gpu_threads.py --backend cpu --rounds 1    # the same on the CPU

Exits 1 when a frame differs, a capture failed or a model raised; 0 otherwise, and 0 with
one line when the backend cannot run here (``cuda`` without a CUDA device, say).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / 'benchmarks'):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import gpu_check  # noqa: E402

DEFAULT_MODELS = ('yolov8n', 'yolov8n_seg', 'yolov8n_pose', 'yolov8n_cls', 'yolov8n_obb')


class Loaded:
    """One ``--models`` entry: the loaded model, its parameters, its log and its results."""

    def __init__(self, entry: str, backend: str, device: str) -> None:
        from vision_nodes.pipeline import build_pipeline
        from vision_nodes.tasks import resolve_manifest

        name, _, precision = entry.partition(':')
        self.entry, self.precision = entry, precision or 'fp32'
        self.log: list[str] = []
        self.model = build_pipeline(resolve_manifest(name), backend, device=device,
                                    precision=self.precision, log=self._log)
        self.params = self.model.default_params()
        #: Each image's results with the model alone (:meth:`run_alone`).
        self.alone: list[Any] = []
        self.differences: list[str] = []
        self.errors: list[str] = []
        self.frames = 0

    def _log(self, line: str) -> None:
        self.log.append(str(line))  # list.append is atomic: several threads log at once

    def run_alone(self, images: Sequence[Any]) -> None:
        """Run every image once, the other models idle: the reference."""
        self.alone = [self.model.process(image, 'bgr8', self.params) for image in images]

    def run_together(self, images: Sequence[Any], names: Sequence[str], rounds: int,
                     start: threading.Event) -> None:
        """Run ``rounds`` rotations of ``images``; note how each frame differs from alone."""
        start.wait()
        try:
            for turn in range(rounds):
                for step in range(len(images)):
                    index = (step + turn) % len(images)
                    found = self.model.process(images[index], 'bgr8', self.params)
                    self.differences += gpu_check.compare(self.alone[index], found, 'fp32',
                                                          names[index])
                    self.frames += 1
        except Exception as exc:  # noqa: BLE001 - reported: the check's finding
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ''
            self.errors.append(f'{type(exc).__name__}: {first}')

    def failed_captures(self) -> list[str]:
        return [line for line in self.log if 'capture failed' in line]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--models', nargs='+', default=list(DEFAULT_MODELS),
                        help='manifest names, each with an optional :precision (fp32 default)')
    parser.add_argument('--backend', default='cuda', help='cuda (default), rocm, cpu, ...')
    parser.add_argument('--device', default='', help="the backend's device ('' its default)")
    parser.add_argument('--images', type=Path, help='folder of test images (default: the '
                        'images bundled with ultralytics)')
    parser.add_argument('--rounds', type=int, default=10, help='rotations of the images per '
                        'model while all run together')
    parser.add_argument('--json', type=Path, help='also write the results here as JSON')
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from vision_nodes.manifest import use_default_model_dir
    from vision_nodes.runners.base import RunnerError
    from vision_nodes.runners.registry import runner_class

    use_default_model_dir()
    try:
        why = runner_class(args.backend).unavailable_reason(args.backend)
    except RunnerError as exc:
        why = str(exc)
    if why:
        print(f'gpu_threads: backend {args.backend} cannot run here: {why}')
        return 0
    folder = args.images or gpu_check.bundled_images()
    images = gpu_check.load_images(folder) if folder else {}
    if not images:
        print('gpu_threads: no test images: pass --images DIR', file=sys.stderr)
        return 2
    names, frames = list(images), list(images.values())
    loaded = [Loaded(entry, args.backend, args.device) for entry in args.models]
    try:
        for m in loaded:
            m.run_alone(frames)
        start = threading.Event()
        threads = [threading.Thread(target=m.run_together,
                                    args=(frames, names, args.rounds, start),
                                    name=f'model-{m.entry}') for m in loaded]
        for thread in threads:
            thread.start()
        began = time.monotonic()
        start.set()
        for thread in threads:
            thread.join()
        seconds = time.monotonic() - began
        rows = [{'model': m.entry, 'frames': m.frames, 'differences': m.differences,
                 'failed_captures': m.failed_captures(), 'errors': m.errors} for m in loaded]
    finally:
        for m in loaded:
            m.model.close()
    for r in rows:
        r['ok'] = not (r['differences'] or r['failed_captures'] or r['errors'])
    bad = not all(r['ok'] for r in rows)
    print(f'{len(loaded)} models on their own threads at once, backend {args.backend}, '
          f'{len(names)} images x {args.rounds} rounds each, {seconds:.1f} s:')
    for r in rows:
        print(f"  {r['model']}: {r['frames']} frames, "
              f"{'same as alone' if r['ok'] else 'DIFFERS'}")
        for line in r['errors'] + r['failed_captures'] + r['differences'][:5]:
            print(f'    {line}')
    print('verdict: ' + ('a model failed or differed' if bad else
                         'every frame as the model gives alone, no failed capture'))
    if args.json is not None:
        args.json.write_text(json.dumps({'backend': args.backend, 'images': names,
                                         'rounds': args.rounds, 'seconds': round(seconds, 2),
                                         'models': rows, 'ok': not bad}, indent=2) + '\n')
        print(f'wrote {args.json}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
