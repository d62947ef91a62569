#!/usr/bin/env python3
"""N cameras on one GPU: one process batching the cameras' frames vs N processes. No ROS.

The GPU half of ``benchmarks/bench_multicam.py`` (the GPU machines lent to this project have
no ROS): the node's own pipeline, without DDS. Every camera offers its next frame as soon as
its previous one is answered (saturation: what the GPU can deliver, not a fixed rate).

* batched - one process loads the model once (``max_batch`` N) and runs
            ``LoadedModel.process_batch`` on one frame of every camera, as the node's batcher
            hands them over (each frame's pre- and post-processing on the frame pool, one
            network call);
* single  - N processes, each with its own copy of the model, run ``LoadedModel.process`` on
            their camera's frames, all started together.

Per mode: delivered frames per second (all cameras together), each frame's latency p50/p95
(a batch's time counts for each of its frames), the GPU memory the mode holds (nvidia-smi
while it runs, less before it started; and PyTorch's allocator's peak, summed) and whether
every batched frame's detections are those the single process finds (``gpu_check``'s
comparison at the run's precision). Camera ``i`` sends the
first bundled image, flipped left-right for odd ``i`` (same shape, other detections).

    python benchmarks/gpu_multicam.py --cameras 2 4 --json mc_gpu.json
    python benchmarks/gpu_multicam.py --cameras 4 --precision fp16 --seconds 20

Exits 1 when a batched frame's detections differ from its single process's, 0 otherwise
(also when there is no CUDA device, or the backend cannot run here: it says why).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / 'benchmarks'):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import gpu_check  # noqa: E402

WARMUP = 10


def camera_frames(image: np.ndarray, count: int) -> list[np.ndarray]:
    """One frame per camera: the image, and its mirror for every other camera."""
    mirrored = np.ascontiguousarray(image[:, ::-1])
    return [mirrored if i % 2 else image for i in range(count)]


def _detections(found: Any) -> dict[str, list]:
    return {'boxes': found.boxes.tolist(), 'scores': found.scores.tolist(),
            'class_ids': found.class_ids.tolist()}


def worker(job: dict[str, Any], ready: Any, start: Any, results: Any) -> None:
    """Load the model, warm up, wait for ``start``, run for the job's seconds, report."""
    from vision_nodes.manifest import use_default_model_dir
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.pipeline import build_pipeline
    from vision_nodes.tasks.detect import DetectionParams

    use_default_model_dir()
    manifest = resolve_manifest(job['model'])
    t = manifest.thresholds
    params = DetectionParams(t.confidence, t.iou, t.max_detections)
    frames = [(frame, 'bgr8') for frame in job['frames']]
    model = build_pipeline(manifest, job['backend'], cache_dir=job['cache_dir'],
                           device=job['device'] if job['backend'] == 'cuda' else '',
                           precision=job['precision'], max_batch=len(frames))
    try:
        run = ((lambda: model.process_batch(frames, params)) if len(frames) > 1 else
               (lambda: [model.process(*frames[0], params)]))
        first = run()
        for _ in range(WARMUP):
            run()
        ready.put(job['name'])
        start.wait()
        latencies, delivered = [], 0
        deadline = time.perf_counter() + job['seconds']
        while (now := time.perf_counter()) < deadline:
            done = run()
            took = time.perf_counter() - now
            latencies += [took] * len(done)
            delivered += len(done)
        results.put({'name': job['name'], 'delivered': delivered, 'latencies': latencies,
                     'first': [_detections(found) for found in first],
                     'reserved_mib': _torch_reserved_mib(job['backend'])})
    finally:
        model.close()


def _torch_reserved_mib(backend: str) -> float | None:
    """GPU memory PyTorch's allocator holds at most in this process (MiB), on CUDA."""
    if backend != 'cuda':
        return None
    import torch

    return torch.cuda.max_memory_reserved() / 2**20


def gpu_used_mib(index: int) -> float | None:
    """Memory in use on GPU ``index`` (MiB, nvidia-smi: every process's, contexts included)."""
    if shutil.which('nvidia-smi') is None:
        return None
    out = subprocess.run(['nvidia-smi', f'--id={index}', '--query-gpu=memory.used',
                          '--format=csv,noheader,nounits'], capture_output=True, text=True,
                         check=False).stdout.strip()
    try:
        return float(out.splitlines()[0])
    except (IndexError, ValueError):
        return None


def run_mode(jobs: list[dict[str, Any]], seconds: float, gpu: int) -> dict[str, Any]:
    """Start one process per job, run them together, gather what they measured.

    The GPU memory of the mode is what nvidia-smi sees in use while they run less what it saw
    before they started (process ids inside a container need not be the driver's).
    """
    idle = gpu_used_mib(gpu)
    ctx = mp.get_context('spawn')  # CUDA cannot be used in a forked child
    ready, results, start = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=worker, args=(job, ready, start, results)) for job in jobs]
    for proc in procs:
        proc.start()
    try:
        for _ in jobs:
            ready.get(timeout=900)
        start.set()
        time.sleep(seconds / 2)
        busy = gpu_used_mib(gpu)
        memory = busy - idle if busy is not None and idle is not None else None
        gathered = [results.get(timeout=seconds + 300) for _ in jobs]
    finally:
        for proc in procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()
    latencies = sorted(x for g in gathered for x in g['latencies'])
    delivered = sum(g['delivered'] for g in gathered)

    def pick(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * (len(latencies) - 1)))] * 1e3,
                     3)
    return {'processes': len(jobs), 'frames_per_s': round(delivered / seconds, 1),
            'p50_ms': pick(0.5), 'p95_ms': pick(0.95), 'gpu_memory_mib': memory,
            'torch_reserved_mib': sum(g['reserved_mib'] or 0.0 for g in gathered),
            'first': {g['name']: g['first'] for g in gathered}}


def compare_cameras(batched: dict[str, Any], single: dict[str, Any], precision: str
                    ) -> list[str]:
    """Differences between each batched frame's detections and its single process's."""
    from vision_nodes.tasks.detect import Detections

    def as_detections(d: dict[str, list]) -> Any:
        return Detections(np.asarray(d['boxes'], np.float32).reshape(-1, 4),
                          np.asarray(d['scores'], np.float32),
                          np.asarray(d['class_ids'], np.int64))
    problems = []
    for i, found in enumerate(batched['first']['batched']):
        alone = single['first'][f'camera{i}'][0]
        problems += gpu_check.compare(as_detections(alone), as_detections(found), precision,
                                      f'camera {i}')
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cameras', type=int, nargs='+', default=[2, 4])
    parser.add_argument('--seconds', type=float, default=10.0, help='measured per mode')
    parser.add_argument('--precision', default='fp32', choices=['fp32', 'fp16'])
    parser.add_argument('--model', default='yolov8n', help='manifest name or file')
    parser.add_argument('--device', default='0', help='GPU index')
    parser.add_argument('--backend', default='cuda', help='cuda (default); another backend '
                        'runs the same comparison without a GPU')
    parser.add_argument('--json', type=Path, help='also write the results here as JSON')
    args = parser.parse_args(argv)
    from vision_nodes.platform import cuda

    index = int(args.device)
    environment = gpu_check.environment(index)
    report: dict[str, Any] = {'environment': environment, 'model': args.model,
                              'backend': args.backend,
                              'precision': args.precision, 'seconds': args.seconds,
                              'runs': {}}
    no_gpu = cuda.gpu_unavailable_reason(index) if args.backend == 'cuda' else None
    if args.backend != 'cuda' and not no_gpu:
        from bench_configs import cannot_run
        from vision_nodes.manifest import use_default_model_dir
        from vision_nodes.tasks import resolve_manifest

        use_default_model_dir()
        no_gpu = cannot_run(resolve_manifest(args.model), args.backend, args.precision)
    if no_gpu:
        print(f"{'no CUDA device' if args.backend == 'cuda' else 'cannot run'}: {no_gpu}; "
              'nothing measured')
        report['reason'] = no_gpu
        gpu_check._write_json(args.json, report)
        return 0
    images = gpu_check.load_images(gpu_check.bundled_images())
    image = next(iter(images.values()))
    where = (environment['gpu'] or {}).get('name') if args.backend == 'cuda' else 'CPU'
    print(f"{where}: {args.model} on {args.backend} ({args.precision}), {image.shape[1]}x"
          f'{image.shape[0]} frames, {args.seconds:g} s per mode, cameras at saturation')
    cache = Path(tempfile.mkdtemp(prefix='gpu_multicam_'))
    differs = False
    try:
        for count in args.cameras:
            frames = camera_frames(image, count)
            common = {'model': args.model, 'backend': args.backend, 'cache_dir': str(cache),
                      'device': args.device, 'precision': args.precision,
                      'seconds': args.seconds}
            batched = run_mode([{**common, 'name': 'batched', 'frames': frames}],
                               args.seconds, index)
            single = run_mode([{**common, 'name': f'camera{i}', 'frames': [frame]}
                               for i, frame in enumerate(frames)], args.seconds, index)
            problems = compare_cameras(batched, single, args.precision)
            differs |= bool(problems)
            ratios = {'throughput': batched['frames_per_s'] / single['frames_per_s'],
                      'p95': batched['p95_ms'] / single['p95_ms']}
            if batched['gpu_memory_mib'] and single['gpu_memory_mib']:
                ratios['gpu_memory'] = batched['gpu_memory_mib'] / single['gpu_memory_mib']
            for mode, run in (('batched', batched), ('single', single)):
                print(f"  {count} cam {mode:>7}: {run['frames_per_s']:.0f} frames/s, p50 "
                      f"{run['p50_ms']:.2f} ms, p95 {run['p95_ms']:.2f} ms, GPU memory "
                      f"{run['gpu_memory_mib'] or 0:.0f} MiB (PyTorch's allocator "
                      f"{run['torch_reserved_mib']:.0f} MiB; {run['processes']} process(es))")
            print(f'  {count} cam ratios batched/single: ' +
                  ', '.join(f'{k} {v:.2f}x' for k, v in ratios.items()) +
                  f"; same detections: {'no: ' + '; '.join(problems) if problems else 'yes'}")
            for run in (batched, single):
                run.pop('first')
            report['runs'][str(count)] = {'batched': batched, 'single': single,
                                          'ratios': {k: round(v, 3)
                                                     for k, v in ratios.items()},
                                          'mismatches': problems}
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    gpu_check._write_json(args.json, report)
    return 1 if differs else 0


if __name__ == '__main__':
    sys.exit(main())
