#!/usr/bin/env python3
"""Check every GPU path this machine can run against the CPU, and time it. No ROS needed.

For each GPU path (PyTorch on CUDA at fp32 and fp16 as the node runs it: the u8 frame
converted and the detections decoded on the GPU, the module replayed as CUDA graphs; the same
without graphs, and with the host's pre- and post-processing as before; ``torch.compile``;
ONNX Runtime's CUDA and TensorRT execution providers; the TensorRT backend at fp32, fp16 and
int8) that this
machine can run, the model's detections on the bundled images (Ultralytics' ``bus.jpg`` and
``zidane.jpg``, or ``--images``) are compared with the CPU reference (ONNX Runtime on the
CPU, fp32): every detection scoring at least 0.5 in either must have one of the same class in
the other with a box IoU of at least 0.95 (fp32), 0.9 (fp16) or 0.75 (int8). A segmentation
model's matched detections must also have masks of at least that IoU (source pixels), a pose
model's keypoints within 2 px (fp32, fp16) or 4 px (int8) and scores within 0.05 (0.1 int8)
of the CPU's, an oriented-box model's corners within the keypoints' distance; a
classification model's probabilities within 0.01 (fp32), 0.02 (fp16) or 0.05 (int8) of the
CPU's, and at fp32 the same top-k classes in the same order. A reduced path (fp16, int8) also
reports its agreement with fp32 that loading it measured (``precision_check``: box mAP50-95,
mask mAP, OKS AP, top-1 agreement ... on the validation set; the images passed here when there
are at least 10 of them, else the default set). Then it times

* bare      - ``runner.infer`` on a tensor already preprocessed (the network alone);
* pipeline  - preprocess + infer + decode/NMS on the image, as the node runs it (no ROS),
              with the median of each stage;
* batches   - with ``--batch 1 2 4``, on the PyTorch paths: the first image N times in one
              network call (bare and pipeline ms per batch, frames per second), each frame's
              detections checked against the unbatched ones.

With ``--ultralytics`` it also times Ultralytics' own ``YOLO('<the .pt>').predict`` on the
first image on the same GPU (fp32, its default letterbox and post-processing; masks at network
resolution, as it returns them) and prints each path's pipeline as a fraction of it: what the
node's way of running the model saves over the usual way.

A path that cannot run here is listed with the reason (no CUDA build of PyTorch, an ONNX
Runtime without that provider, no TensorRT, TensorRT 11 and int8, ...). On a machine without
a CUDA device it says so, lists what it would run, and exits 0. Exits 1 only when a path ran
and its detections differed from the CPU's (or a batched frame's from the unbatched one).

    python benchmarks/gpu_check.py                      # table on stdout
    python benchmarks/gpu_check.py --json gpu.json      # and the same as JSON
    python benchmarks/gpu_check.py --frames 200 --paths tensorrt-fp16 onnx-cuda
    python benchmarks/gpu_check.py --paths torch-cuda --batch 1 2 4
    python benchmarks/gpu_check.py --paths torch-cuda-host torch-cuda-device torch-cuda
    python benchmarks/gpu_check.py --model yolov8n_seg --paths torch-cuda torch-cuda-fp16
    python benchmarks/gpu_check.py --model yolov8n_seg --paths torch-cuda --ultralytics

Needs Python 3.10+, NumPy, OpenCV and ONNX Runtime (the reference), the model's weights
(``VISION_NODES_MODEL_DIR``, or ``shared/models`` beside a checkout), and for each path its
runtime: PyTorch with CUDA, onnxruntime-gpu, TensorRT with cuda-python.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: Detections scoring at least this are compared (``--min-score``).
MIN_SCORE = 0.5
#: Box IoU each precision must keep against the CPU reference.
MIN_IOU = {'fp32': 0.95, 'fp16': 0.9, 'int8': 0.75}
#: Pose: how far (source pixels) a keypoint, and how much its score, may move, by precision.
MAX_KEYPOINT_PX = {'fp32': 2.0, 'fp16': 2.0, 'int8': 4.0}
MAX_KEYPOINT_SCORE = {'fp32': 0.05, 'fp16': 0.05, 'int8': 0.1}
#: Classification: how far each class's probability may move, by precision.
MAX_PROBABILITY = {'fp32': 0.01, 'fp16': 0.02, 'int8': 0.05}
STAGES = ('preprocess', 'infer', 'postprocess')


@dataclass(frozen=True)
class GpuPath:
    """One way of running the model on the GPU."""

    name: str
    what: str
    backend: str
    precision: str = 'fp32'
    provider: str = ''
    torch_compile: bool = False
    #: PyTorch on a GPU: u8 frame converted and detections decoded there (RunnerConfig).
    device_io: bool = True
    #: PyTorch on a GPU: the eager module replayed as CUDA graphs (RunnerConfig).
    cuda_graphs: bool = True


PATHS = (
    GpuPath('torch-cuda-host', 'PyTorch eager on CUDA, pre/post-processing on the host',
            'cuda', device_io=False, cuda_graphs=False),
    GpuPath('torch-cuda-device', 'PyTorch eager on CUDA, pre/post-processing on the GPU',
            'cuda', cuda_graphs=False),
    GpuPath('torch-cuda', 'PyTorch on CUDA as the node runs it: pre/post-processing on the '
            'GPU, CUDA graphs', 'cuda'),
    GpuPath('torch-cuda-fp16-host', 'PyTorch eager on CUDA, fp16, pre/post-processing on '
            'the host', 'cuda', 'fp16', device_io=False, cuda_graphs=False),
    GpuPath('torch-cuda-fp16', 'PyTorch on CUDA, fp16, as the node runs it', 'cuda', 'fp16'),
    GpuPath('torch-compile', 'PyTorch torch.compile on CUDA', 'cuda', torch_compile=True),
    GpuPath('onnx-cuda', 'ONNX Runtime, CUDA execution provider', 'onnx', provider='cuda'),
    GpuPath('onnx-tensorrt', 'ONNX Runtime, TensorRT execution provider', 'onnx',
            provider='tensorrt'),
    GpuPath('tensorrt-fp32', 'TensorRT backend, fp32 (TF32 off)', 'tensorrt'),
    GpuPath('tensorrt-fp16', 'TensorRT backend, fp16', 'tensorrt', 'fp16'),
    GpuPath('tensorrt-int8', 'TensorRT backend, int8 (calibrated on the images)', 'tensorrt',
            'int8'),
)


@dataclass
class Outcome:
    """What happened to one path: ran (match or not, timings) or the reason it did not."""

    path: GpuPath
    status: str = 'not run'  # 'match', 'MISMATCH', 'cannot run'
    reason: str = ''
    detections: list[int] = field(default_factory=list)
    bare_ms: float | None = None
    pipeline_ms: float | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    mismatches: list[str] = field(default_factory=list)
    batches: list[dict[str, Any]] = field(default_factory=list)
    #: A reduced path's measured agreement with fp32 (``LoadedModel.precision_check``).
    agreement: dict[str, Any] | None = None

    @property
    def ratio(self) -> float | None:
        """Return pipeline / bare: what the pre- and post-processing add to the network."""
        if not self.bare_ms or self.pipeline_ms is None:
            return None
        return round(self.pipeline_ms / self.bare_ms, 3)

    def as_dict(self) -> dict[str, Any]:
        return {'path': self.path.name, 'what': self.path.what, 'backend': self.path.backend,
                'precision': self.path.precision, 'provider': self.path.provider or None,
                'status': self.status, 'reason': self.reason or None,
                'detections': self.detections, 'bare_ms': self.bare_ms,
                'pipeline_ms': self.pipeline_ms, 'pipeline_over_bare': self.ratio,
                'stages_ms': self.stages_ms,
                'mismatches': self.mismatches, 'batches': self.batches,
                'agreement': self.agreement}


# -- what this machine can run ---------------------------------------------------------------

def why_not(path: GpuPath, manifest: Any) -> str | None:
    """None when ``path`` can be tried here, else the reason it cannot."""
    if path.backend == 'cuda':
        return _torch_reason(path, manifest)
    if path.backend == 'onnx':
        return _onnx_reason(path)
    from vision_nodes.runners.tensorrt_runner import TensorRTRunner

    return TensorRTRunner.unavailable_reason('tensorrt')


def _torch_reason(path: GpuPath, manifest: Any) -> str | None:
    if path.torch_compile and manifest.architecture == 'ultralytics':
        return (f"'{manifest.name}' is an Ultralytics model, which the torch runner never "
                'compiles (it runs eagerly); use --model with another detection model')
    try:
        import torch
    except ImportError:
        return 'PyTorch is not installed'
    if not torch.cuda.is_available():
        return (f'PyTorch {torch.__version__} sees no CUDA device (a CPU-only build, or no '
                'driver)')
    return None


def _onnx_reason(path: GpuPath) -> str | None:
    from vision_nodes.runners.onnx_providers import EXECUTION_PROVIDERS

    try:
        import onnxruntime as ort
    except ImportError:
        return 'ONNX Runtime is not installed'
    full = EXECUTION_PROVIDERS[path.provider]
    if full not in ort.get_available_providers():
        return (f'this ONNX Runtime ({ort.__version__}) has no {full} (install onnxruntime-gpu: '
                "the cuda12 or cuda13 extra)")
    return None


# -- comparing and timing ---------------------------------------------------------------------

def instance_differences(reference: Any, found: Any, precision: str, label: str
                         ) -> list[str]:
    """List masks and keypoints of matched detections that differ beyond ``precision``'s.

    Each reference detection scoring at least MIN_SCORE is paired with the same-class
    detection of ``found`` whose box overlaps it most; detections without a partner are
    :func:`compare`'s to report. Masks (segment) are compared by IoU in source pixels,
    keypoints (pose) by distance and score, rotated boxes (obb) by their corners' distance.
    """
    from vision_nodes.boxes import pairwise_iou

    masks = getattr(reference, 'masks', None)
    keypoints = getattr(reference, 'keypoints', None)
    corners = getattr(reference, 'polygons', None)
    if masks is None and keypoints is None and corners is None:
        return []
    problems = []
    for i, (box, score, cls) in enumerate(zip(reference.boxes, reference.scores,
                                              reference.class_ids)):
        same = np.flatnonzero(found.class_ids == cls)
        if score < MIN_SCORE or not len(same):
            continue
        j = int(same[np.argmax(pairwise_iou(box[None], found.boxes[same])[0])])
        what = f'{label}: class {int(cls)} score {score:.2f}'
        if masks is not None:
            a, b = reference.mask(i), found.mask(j)  # over the whole image
            union = int(np.logical_or(a, b).sum())
            iou = int(np.logical_and(a, b).sum()) / union if union else 1.0
            if iou < MIN_IOU[precision]:
                problems.append(f'{what}: mask IoU {iou:.3f}')
        if keypoints is not None:
            a, b = keypoints[i], found.keypoints[j]
            far = float(np.hypot(*(a[:, :2] - b[:, :2]).T).max(initial=0.0))
            off = float(np.abs(a[:, 2] - b[:, 2]).max(initial=0.0))
            if far > MAX_KEYPOINT_PX[precision] or off > MAX_KEYPOINT_SCORE[precision]:
                problems.append(f'{what}: keypoints up to {far:.2f} px, scores up to '
                                f'{off:.3f} away')
        if corners is not None:
            far = corner_distance(corners[i], found.polygons[j])
            if far > MAX_KEYPOINT_PX[precision]:
                problems.append(f'{what}: rotated box corners up to {far:.2f} px away')
    return problems


def corner_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Largest corner distance of two (4, 2) rotated boxes, over the four start corners.

    The same box can be written starting from another corner (an angle a quarter turn
    apart with width and height swapped), so the corners are compared under each rotation
    of ``b``'s order and the best is kept.
    """
    return min(float(np.hypot(*(a - np.roll(b, k, axis=0)).T).max()) for k in range(4))


def classification_differences(reference: Any, found: Any, precision: str, image: str
                               ) -> list[str]:
    """List how a path's class probabilities differ from the CPU's beyond ``precision``'s."""
    problems = []
    off = float(np.abs(np.asarray(reference.probs) - np.asarray(found.probs)).max())
    if off > MAX_PROBABILITY[precision]:
        problems.append(f'{image}: class probabilities up to {off:.4f} away')
    if precision == 'fp32' and list(reference.class_ids) != list(found.class_ids):
        problems.append(f'{image}: top classes {list(map(int, found.class_ids))}, the CPU '
                        f'{list(map(int, reference.class_ids))}')
    return problems


def compare(reference: Any, found: Any, precision: str, image: str) -> list[str]:
    """List the differences between the CPU's results and a path's, both ways."""
    from vision_nodes.boxes import unmatched

    if not hasattr(reference, 'boxes'):
        return classification_differences(reference, found, precision, image)
    min_iou = MIN_IOU[precision]
    return (unmatched(reference, found, MIN_SCORE, min_iou, f'{image}: missing from the GPU: ')
            + unmatched(found, reference, MIN_SCORE, min_iou, f'{image}: not found on the CPU: ')
            + instance_differences(reference, found, precision, image))


def _ms(samples: Sequence[float]) -> float:
    return round(statistics.median(samples) * 1000.0, 3)


def measure(model: Any, image: np.ndarray, params: Any, frames: int) -> dict[str, Any]:
    """Return median bare and pipeline times (ms) and the pipeline's stages (warmed up)."""
    for _ in range(3):
        model.process(image, 'bgr8', params)  # also sets the input shape (rect inference)
    shape = model.input_shape(image.shape[:2])
    stages: dict[str, list[float]] = {s: [] for s in STAGES}
    pipeline = []
    for _ in range(frames):
        t0 = time.perf_counter()
        tensor, meta = model.task.preprocess(image, 'bgr8', shape)
        t1 = time.perf_counter()
        outputs = model.runner.infer(tensor)
        t2 = time.perf_counter()
        model.task.postprocess(outputs, meta, params)
        t3 = time.perf_counter()
        for stage, took in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2)):
            stages[stage].append(took)
        pipeline.append(t3 - t0)
    bare = []
    for _ in range(frames):
        t0 = time.perf_counter()
        model.runner.infer(tensor)
        bare.append(time.perf_counter() - t0)
    return {'bare_ms': _ms(bare), 'pipeline_ms': _ms(pipeline),
            'stages_ms': {s: _ms(v) for s, v in stages.items()}}


def measure_batches(model: Any, image: np.ndarray, params: Any, sizes: Sequence[int],
                    frames: int) -> list[dict[str, Any]]:
    """Time batches of ``image`` (several cameras' frames in one network call), per size.

    bare: ``runner.infer`` on the stacked tensor; pipeline: every frame's preprocess, the one
    call, every frame's decode/NMS. Each frame's detections are compared with the unbatched
    ones at the path's precision (``mismatches``).
    """
    shape = model.input_shape(image.shape[:2])
    single = model.process(image, 'bgr8', params)
    precision = model.runner.config.precision
    rows = []
    for size in sizes:
        bare, pipeline, problems = [], [], []
        for frame in range(frames + 3):  # the first three warm up (and are checked)
            t0 = time.perf_counter()
            prepared = [model.task.preprocess(image, 'bgr8', shape) for _ in range(size)]
            batch = np.concatenate([tensor for tensor, _ in prepared])
            t1 = time.perf_counter()
            outputs = model.runner.infer(batch)
            t2 = time.perf_counter()
            found = [model.task.postprocess([output[i:i + 1] for output in outputs], meta,
                                            params)
                     for i, (_, meta) in enumerate(prepared)]
            t3 = time.perf_counter()
            if frame < 3:
                problems += [p for i, dets in enumerate(found)
                             for p in compare(single, dets, precision, f'frame {i}')]
            else:
                bare.append(t2 - t1)
                pipeline.append(t3 - t0)
        pipeline_ms = _ms(pipeline)
        rows.append({'batch': size, 'bare_ms': _ms(bare), 'pipeline_ms': pipeline_ms,
                     'frames_per_s': round(size * 1000.0 / pipeline_ms, 1),
                     'mismatches': sorted(set(problems))})
    return rows


# -- running the paths ------------------------------------------------------------------------

@dataclass
class Setup:
    """What every path shares: the model, the images, the reference, where to cache."""

    manifest: Any
    images: dict[str, np.ndarray]
    params: Any
    cache_dir: Path
    calibration_dir: Path
    device: str
    frames: int
    log: Any
    batches: Sequence[int] = ()
    #: ``--verbose``: a path that fails to load also prints its traceback.
    verbose: bool = False


def batchable(runner: Any) -> bool:
    """Whether ``runner`` takes a batch of frames: PyTorch's eager module (any input shape)."""
    from vision_nodes.runners.torch_runner import TorchRunner

    return isinstance(runner, TorchRunner) and runner.dynamic_shapes


def run_path(path: GpuPath, setup: Setup, reference: dict[str, Any]) -> Outcome:
    """Load ``path``, compare its detections on every image, time it on the first."""
    from vision_nodes.pipeline import build_pipeline

    outcome = Outcome(path)
    reason = why_not(path, setup.manifest)
    if reason:
        outcome.status, outcome.reason = 'cannot run', reason
        return outcome
    try:
        model = build_pipeline(
            setup.manifest, path.backend, cache_dir=setup.cache_dir,
            device=setup.device,
            precision=path.precision, execution_provider=path.provider,
            calibration_dir=str(setup.calibration_dir), torch_compile=path.torch_compile,
            device_io=path.device_io, cuda_graphs=path.cuda_graphs, log=setup.log)
    except Exception as exc:  # noqa: BLE001 - any load failure is this path's result
        if setup.verbose:
            traceback.print_exc()
        outcome.status = 'cannot run'
        outcome.reason = f'load failed: {type(exc).__name__}: {str(exc).splitlines()[0]}'
        return outcome
    try:
        for name, image in setup.images.items():
            found = model.process(image, 'bgr8', setup.params)
            outcome.detections.append(int((found.scores >= MIN_SCORE).sum()))
            outcome.mismatches += compare(reference[name], found, path.precision, name)
        outcome.status = 'MISMATCH' if outcome.mismatches else 'match'
        outcome.agreement = agreement_of(model)
        first = next(iter(setup.images.values()))
        timings = measure(model, first, setup.params, setup.frames)
        outcome.bare_ms, outcome.pipeline_ms = timings['bare_ms'], timings['pipeline_ms']
        outcome.stages_ms = timings['stages_ms']
        if setup.batches and batchable(model.runner):
            outcome.batches = measure_batches(model, first, setup.params, setup.batches,
                                              setup.frames)
    finally:
        model.close()
    return outcome


def agreement_of(model: Any) -> dict[str, Any] | None:
    """Return what loading ``model`` measured of its precision against fp32 (None: fp32)."""
    check = getattr(model, 'precision_check', None)
    if check is None or check.compute_type == 'fp32':
        return None
    found = check.agreement
    if found is None:
        return {'compute_type': check.compute_type, 'value': None, 'line': check.line()}
    return {'compute_type': check.compute_type, 'measure': found.measure,
            'value': round(found.value, 4), 'images': found.images,
            'details': found.details, 'line': check.line()}


def cpu_reference(setup: Setup) -> tuple[dict[str, Any], Outcome]:
    """Return the CPU's detections (ONNX Runtime, fp32) on every image, and its timings."""
    from vision_nodes.pipeline import build_pipeline

    path = GpuPath('cpu-reference', 'ONNX Runtime on the CPU, fp32 (the reference)', 'onnx',
                   provider='cpu')
    model = build_pipeline(setup.manifest, 'onnx', cache_dir=setup.cache_dir,
                           execution_provider='cpu', log=setup.log)
    outcome = Outcome(path, status='reference')
    try:
        found = {name: model.process(image, 'bgr8', setup.params)
                 for name, image in setup.images.items()}
        outcome.detections = [int((d.scores >= MIN_SCORE).sum()) for d in found.values()]
        timings = measure(model, next(iter(setup.images.values())), setup.params,
                          setup.frames)
        outcome.bare_ms, outcome.pipeline_ms = timings['bare_ms'], timings['pipeline_ms']
        outcome.stages_ms = timings['stages_ms']
    finally:
        model.close()
    return found, outcome


def ultralytics_predict(setup: Setup, image: np.ndarray) -> tuple[float | None, str]:
    """Return Ultralytics' median ``predict`` ms on ``image`` on the GPU, or (None, why not).

    The manifest's own ``.pt`` with its thresholds, on the device the paths run on; warmed up
    first (Ultralytics sets itself up on its first calls).
    """
    from vision_nodes.loaders.ultralytics import import_ultralytics

    weights = setup.manifest.weights_path()
    if setup.manifest.architecture != 'ultralytics' or weights.suffix != '.pt':
        return None, f"'{setup.manifest.name}' is not an Ultralytics .pt model"
    thresholds = setup.manifest.thresholds
    device = setup.device if setup.device.isdigit() else setup.device.replace('cuda:', '')
    samples = []
    try:
        model = import_ultralytics().YOLO(str(weights))
        for frame in range(5 + setup.frames):
            start = time.perf_counter()
            model.predict(image, conf=thresholds.confidence, iou=thresholds.iou,
                          max_det=thresholds.max_detections, device=device, verbose=False)
            if frame >= 5:
                samples.append(time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - reported, the paths' results still count
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ''
        return None, f'Ultralytics failed: {type(exc).__name__}: {first}'
    return _ms(samples), ''


# -- report -----------------------------------------------------------------------------------

def _cell(value: float | None) -> str:
    return '' if value is None else f'{value:.2f}'


def table(outcomes: Sequence[Outcome]) -> str:
    """Format the outcomes as a Markdown table, then the paths that could not run and why."""
    head = ['path', 'status', 'detections (>= 0.5)', 'bare ms', 'pipeline ms',
            *[f'{s} ms' for s in STAGES], 'pipeline / bare']
    lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    skipped = []
    for o in outcomes:
        if o.status == 'cannot run':
            skipped.append(f'- {o.path.name} ({o.path.what}): {o.reason}')
            continue
        row = [o.path.name, o.status, ', '.join(map(str, o.detections)), _cell(o.bare_ms),
               _cell(o.pipeline_ms), *[_cell(o.stages_ms.get(s)) for s in STAGES],
               '' if o.ratio is None else f'{o.ratio:.3f}']
        lines.append('| ' + ' | '.join(row) + ' |')
    for o in outcomes:
        lines += [f'  {o.path.name}: {m}' for m in o.mismatches]
    agreed = [f"- {o.path.name}: {o.agreement['line']}" for o in outcomes if o.agreement]
    if agreed:
        lines += ['', 'measured against fp32 when loaded:'] + agreed
    for o in outcomes:
        if o.batches:
            lines += ['', f'{o.path.name}, batches of the first image (ms per batch):',
                      '| batch | bare ms | pipeline ms | frames/s | matches batch 1 |',
                      '|---|---|---|---|---|']
            lines += [f"| {b['batch']} | {b['bare_ms']:.2f} | {b['pipeline_ms']:.2f} | "
                      f"{b['frames_per_s']:.1f} | {'no' if b['mismatches'] else 'yes'} |"
                      for b in o.batches]
    if skipped:
        lines += ['', 'cannot run here:'] + skipped
    return '\n'.join(lines)


def predict_line(outcomes: Sequence[Outcome], predict_ms: float | None, reason: str) -> str:
    """One line: Ultralytics' predict time and each timed path's pipeline as a fraction."""
    if predict_ms is None:
        return f"Ultralytics' predict not timed: {reason}"
    parts = [f'{o.path.name} {o.pipeline_ms / predict_ms:.3f}' for o in outcomes
             if o.pipeline_ms is not None and o.status != 'reference']
    return (f"Ultralytics' YOLO(.pt).predict on the GPU: {predict_ms:.2f} ms; pipeline / "
            'predict: ' + (', '.join(parts) or 'no path ran'))


def environment(device_index: int) -> dict[str, Any]:
    """Return the versions and the GPU's facts, for the report."""
    from vision_nodes.platform import cuda

    versions: dict[str, str | None] = {'python': platform.python_version()}
    for module in ('torch', 'onnxruntime', 'tensorrt', 'cuda.bindings', 'numpy', 'cv2'):
        try:
            versions[module] = str(__import__(module, fromlist=['_']).__version__)
        except Exception:  # noqa: BLE001 - absent or broken: reported as such
            versions[module] = None
    gpu = cuda.gpu_info(device_index)
    return {'versions': versions, 'gpu': gpu.as_dict() if gpu else None,
            'machine': platform.machine()}


def bundled_images() -> Path | None:
    """Return the sample images' folder inside the ultralytics package, if installed."""
    try:
        import ultralytics
    except ImportError:
        return None
    return Path(ultralytics.__file__).parent / 'assets'


def load_images(folder: Path) -> dict[str, np.ndarray]:
    import cv2

    images = {}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() in ('.jpg', '.jpeg', '.png', '.bmp'):
            image = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if image is not None:
                images[path.name] = image
    return images


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--model', default='yolov8n', help='manifest name or file')
    parser.add_argument('--images', type=Path, help='folder of test images (default: the '
                        'images bundled with ultralytics)')
    parser.add_argument('--device', default='0', help='GPU index')
    parser.add_argument('--frames', type=int, default=50, help='timed frames per path')
    parser.add_argument('--paths', nargs='+', choices=[p.name for p in PATHS],
                        help='only these paths (default: all)')
    parser.add_argument('--cache-dir', type=Path, help='engine cache (default: a temporary '
                        'folder, so every engine is built afresh)')
    parser.add_argument('--batch', type=int, nargs='+', default=[],
                        help='also time batches of these sizes on the PyTorch paths '
                        '(one network call for several cameras)')
    parser.add_argument('--min-score', type=float, default=MIN_SCORE,
                        help='compare the detections scoring at least this (a model with '
                        'seeded, untrained weights scores low)')
    parser.add_argument('--ultralytics', action='store_true',
                        help="also time Ultralytics' YOLO('<the .pt>').predict on the GPU and "
                        'print each pipeline as a fraction of it')
    parser.add_argument('--json', type=Path, help='also write the results here as JSON')
    parser.add_argument('--verbose', action='store_true', help='print the runners\' log')
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    global MIN_SCORE
    args = parse_args(argv)
    MIN_SCORE = args.min_score
    from vision_nodes.manifest import use_default_model_dir
    from vision_nodes.tasks import resolve_manifest
    from vision_nodes.platform import cuda
    from vision_nodes.platform.devices import DeviceError, require_device
    from vision_nodes.tasks.registry import create_task, param_defaults

    use_default_model_dir()
    paths = [p for p in PATHS if not args.paths or p.name in args.paths]
    try:
        index = require_device(args.device, ('default', 'gpu'), 'gpu_check').gpu_index
    except DeviceError as exc:
        print(f'gpu_check: {exc}', file=sys.stderr)
        return 2
    report: dict[str, Any] = {'environment': environment(index), 'model': args.model}
    no_gpu = cuda.gpu_unavailable_reason(index)
    if no_gpu:
        print(f'no CUDA device: {no_gpu}')
        print('on a machine with one this would run, each against the CPU:')
        would = []
        manifest = resolve_manifest(args.model)
        for path in paths:
            also = why_not(path, manifest)
            print(f'  {path.name}: {path.what}' + (f' (needs first: {also})' if also else ''))
            would.append({'path': path.name, 'what': path.what, 'needs_first': also})
        report.update(cuda_device=False, reason=no_gpu, would_run=would)
        _write_json(args.json, report)
        return 0
    folder = args.images or bundled_images()
    images = load_images(folder) if folder else {}
    if not images:
        print('no test images: pass --images DIR (ultralytics, which bundles bus.jpg and '
              'zidane.jpg, is not installed)', file=sys.stderr)
        return 2
    manifest = resolve_manifest(args.model)
    work = Path(tempfile.mkdtemp(prefix='gpu_check_'))
    try:
        calibration = work / 'calibration'
        calibration.mkdir()
        for name in images:
            shutil.copy(folder / name, calibration / name)
        setup = Setup(manifest, images,
                      create_task(manifest).make_params(param_defaults(manifest)),
                      args.cache_dir or work / 'cache', calibration, args.device, args.frames,
                      print if args.verbose else (lambda _: None), args.batch,
                      args.verbose)
        reference, cpu = cpu_reference(setup)
        outcomes = [cpu] + [run_path(path, setup, reference) for path in paths]
        predict_ms, no_predict = (ultralytics_predict(setup, next(iter(images.values())))
                                  if args.ultralytics else (None, ''))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    gpu = report['environment']['gpu']
    print(f"{gpu['name'] if gpu else 'GPU'} (sm {gpu['compute_capability'] if gpu else '?'}), "
          f'model {manifest.name}, images {", ".join(images)}, {args.frames} frames; '
          'times are medians in ms')
    print(table(outcomes))
    if args.ultralytics:
        print(predict_line(outcomes, predict_ms, no_predict))
        report.update(ultralytics_predict_ms=predict_ms,
                      ultralytics_predict_reason=no_predict or None)
    report.update(cuda_device=True, images=list(images), frames=args.frames,
                  results=[o.as_dict() for o in outcomes])
    _write_json(args.json, report)
    differs = any(o.status == 'MISMATCH' or any(b['mismatches'] for b in o.batches)
                  for o in outcomes)
    return 1 if differs else 0


def _write_json(path: Path | None, report: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(report, indent=2) + '\n')
        print(f'wrote {path}')


if __name__ == '__main__':
    sys.exit(main())
