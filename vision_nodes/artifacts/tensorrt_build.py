"""Build a TensorRT engine from an ONNX model with the TensorRT Python API, through the cache.

Any model that exports to ONNX gets an engine this way (not only Ultralytics ones). The cache
key covers everything an engine is only valid for: the ONNX's SHA-256, precision, the
optimisation profile (min/opt/max input shapes), the TensorRT version, the GPU's name and
compute capability, the calibration images (int8) and this step's version; so an engine is
never loaded on a GPU or TensorRT version it was not built for. The engine file inside the
entry is named ``{model}_{precision}.engine``; ``build.json`` records what the build did.

Targets TensorRT 10.x (tensors by name). fp16 sets the builder's FP16 flag where TensorRT has
it; TensorRT 11 removed it, and there the caller hands in an fp16-converted ONNX and the
network is strongly typed. int8 uses an entropy calibrator (``IInt8EntropyCalibrator2``) over
tensors the caller prepares the way the model's task does; TensorRT 11 removed implicit int8
calibration (it needs a Q/DQ-quantised ONNX), which the runner refuses clearly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from .cache import CacheEntry, CacheError, EngineCache
from ..platform import cuda
from ..platform.cuda import GpuInfo
from ..text import clip

#: Bump whenever the built engine would change for the same key fields.
ENGINE_STEP_VERSION = 1
#: Shape profile: (min, opt, max), each an NCHW shape.
Profile = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
Log = Callable[[str], None]


class EngineBuildError(CacheError):
    """TensorRT could not parse the ONNX model or build an engine from it."""


def engine_file_name(model: str, precision: str) -> str:
    """Human-readable engine file name inside the entry: ``{model}_{precision}.engine``."""
    safe = ''.join(c if c.isalnum() or c in '-_.' else '_' for c in model) or 'model'
    return f'{safe}_{precision}.engine'


def static_profile(input_size: Sequence[int]) -> Profile:
    """Return the profile of a fixed-shape engine: min = opt = max = input_size."""
    shape = (1, 3, int(input_size[0]), int(input_size[1]))
    return shape, shape, shape


def rect_profile(input_size: Sequence[int], stride: int = 32) -> Profile:
    """Return the profile of a rect-inference engine: stride multiples up to ``input_size``.

    Rect inference keeps the long side at input_size and rounds the other up to the stride,
    so every shape it makes lies between one stride and input_size on each side. opt is the
    full input_size: fixed-shape use and int8 calibration run there.
    """
    height, width = int(input_size[0]), int(input_size[1])
    return (1, 3, stride, stride), (1, 3, height, width), (1, 3, height, width)


def engine_cache_fields(onnx_sha256: str, precision: str, profile: Profile,
                        tensorrt_version: str, gpu: GpuInfo, *, strongly_typed: bool,
                        calibration: str | None = None) -> dict[str, Any]:
    """Return the fields that make up an engine's cache key."""
    return {
        'onnx_sha256': onnx_sha256,
        'precision': precision,
        'profile': {'min': list(profile[0]), 'opt': list(profile[1]),
                    'max': list(profile[2])},
        'tensorrt': str(tensorrt_version),
        'gpu': gpu.name,
        'compute_capability': gpu.sm,
        'strongly_typed': strongly_typed,
        'calibration_sha256': calibration,
        'builder': f'vision_nodes-tensorrt/{ENGINE_STEP_VERSION}',
    }


def make_logger(trt: ModuleType, log: Log) -> Any:
    """Return a ``trt.ILogger`` that passes TensorRT's warnings and errors on to ``log``."""
    forward = {trt.ILogger.Severity.INTERNAL_ERROR: 'error',
               trt.ILogger.Severity.ERROR: 'error',
               trt.ILogger.Severity.WARNING: 'warning'}

    class _Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            level = forward.get(severity)
            if level:
                try:
                    log(f'TensorRT {level}: {clip(msg)}')
                except Exception:  # noqa: BLE001 - never raise into TensorRT
                    pass

    return _Logger()


def _progress_monitor(trt: ModuleType, log: Log, every_s: float = 15.0) -> Any:
    """Return a ``trt.IProgressMonitor`` (TensorRT 10+) logging the build's phases.

    Top-level phases are logged when they start and finish; inside them, at most one line
    per ``every_s`` seconds says which step of which phase the build is at.
    """

    class _Monitor(trt.IProgressMonitor):
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self.steps: dict[str, int] = {}
            self.started: dict[str, float] = {}
            self.last = time.monotonic()

        def phase_start(self, phase_name: str, parent_phase: str | None,
                        num_steps: int) -> None:
            try:
                self.steps[phase_name] = int(num_steps)
                self.started[phase_name] = time.monotonic()
                if parent_phase is None:
                    log(f'TensorRT build: {clip(phase_name)} ({num_steps} steps)')
                    self.last = time.monotonic()
            except Exception:  # noqa: BLE001 - never raise into TensorRT
                pass

        def step_complete(self, phase_name: str, step: int) -> bool:
            try:
                now = time.monotonic()
                if now - self.last >= every_s:
                    total = self.steps.get(phase_name, 0)
                    log(f'TensorRT build: {clip(phase_name)} step {step + 1}/{total}')
                    self.last = now
            except Exception:  # noqa: BLE001
                pass
            return True  # False would cancel the build

        def phase_finish(self, phase_name: str) -> None:
            try:
                if phase_name in self.started and self.steps.pop(phase_name, None) is not None:
                    took = time.monotonic() - self.started.pop(phase_name)
                    if took >= 1.0 or not self.steps:
                        log(f'TensorRT build: {clip(phase_name)} done in {took:.1f} s')
            except Exception:  # noqa: BLE001
                pass

    return _Monitor()


def _calibrator(trt: ModuleType, rt: ModuleType, batches: Iterable[np.ndarray], count: int,
                log: Log) -> Any:
    """Return an ``IInt8EntropyCalibrator2`` feeding ``batches`` (NCHW float32) to the builder.

    Each batch is copied into one device buffer allocated for the first; :meth:`close` frees
    it after the build. The calibration table TensorRT writes is kept in ``table``.
    """

    class _Calibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.batches: Iterator[np.ndarray] = iter(batches)
            self.pointer = 0
            self.nbytes = 0
            self.done = 0
            self.table: bytes | None = None
            self.error: BaseException | None = None

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, names: list[str]) -> list[int] | None:
            try:
                batch = next(self.batches, None)
                if batch is None:
                    return None
                batch = np.ascontiguousarray(batch, dtype=np.float32)
                if batch.nbytes > self.nbytes:
                    if self.pointer:
                        cuda.free(rt, self.pointer)
                    self.pointer, self.nbytes = cuda.malloc(rt, batch.nbytes), batch.nbytes
                cuda.copy_to_device(rt, self.pointer, batch, 0)
                call_sync(rt)
                self.done += 1
                if self.done == 1 or self.done % 50 == 0 or self.done == count:
                    log(f'TensorRT int8 calibration: image {self.done}/{count}')
                return [self.pointer] * len(names)
            except Exception as exc:  # noqa: BLE001 - reported after the build
                self.error = exc
                return None

        def read_calibration_cache(self) -> bytes | None:
            return None  # the engine itself is cached; calibrate afresh on every build

        def write_calibration_cache(self, cache: Any) -> None:
            self.table = bytes(memoryview(cache))

        def close(self) -> None:
            if self.pointer:
                cuda.free(rt, self.pointer)
                self.pointer = 0

    return _Calibrator()


def call_sync(rt: ModuleType) -> None:
    """Wait for the whole device (used once per calibration batch, off the frame path)."""
    cuda.call(rt, 'cudaDeviceSynchronize')


def _network_profile(trt: ModuleType, network: Any, input_size: Sequence[int],
                     requested: Profile, log: Log) -> tuple[str, Profile]:
    """Check the network's single NCHW input; return its name and the profile to build."""
    if network.num_inputs != 1:
        raise EngineBuildError(f'the ONNX model has {network.num_inputs} inputs; the TensorRT '
                               'runner serves image models with exactly one input')
    tensor = network.get_input(0)
    dims = [int(d) for d in tensor.shape]
    if len(dims) != 4:
        raise EngineBuildError(f"the ONNX model's input '{clip(tensor.name)}' has shape "
                               f'{dims}; expected NCHW (4 dimensions)')
    if dims[2] == -1 and dims[3] == -1:
        return tensor.name, requested
    fixed = static_profile((dims[2], dims[3]))
    if (dims[2], dims[3]) != tuple(int(v) for v in input_size):
        raise EngineBuildError(
            f"the ONNX model's input '{clip(tensor.name)}' is fixed at {dims[2]}x{dims[3]} "
            f"but the manifest's input_size is {input_size[0]}x{input_size[1]}: fix the "
            'manifest (or export the model with dynamic height and width)')
    if requested != fixed:
        log(f"the ONNX model's input is fixed at {dims[2]}x{dims[3]}: building a fixed-shape "
            'engine (no rect inference)')
    return tensor.name, fixed


def build_engine(trt: ModuleType, onnx_bytes: bytes, precision: str,
                 input_size: Sequence[int], profile: Profile, *, strongly_typed: bool,
                 log: Log, calibration: tuple[Iterable[np.ndarray], int] | None = None,
                 rt: ModuleType | None = None) -> tuple[bytes, dict[str, Any]]:
    """Parse ``onnx_bytes`` and build a serialised engine; return (engine, build facts).

    ``calibration`` is (tensors, how many) for int8, with ``rt`` the CUDA runtime for its
    device buffer. Raises EngineBuildError with TensorRT's own messages when it fails.
    """
    trt_log = make_logger(trt, log)
    builder = trt.Builder(trt_log)
    flags = 0
    if strongly_typed and hasattr(trt.NetworkDefinitionCreationFlag, 'STRONGLY_TYPED'):
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, trt_log)
    if not parser.parse(onnx_bytes):
        errors = '; '.join(clip(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineBuildError(f'TensorRT cannot parse the ONNX model: {errors or "no detail"}')
    name, profile = _network_profile(trt, network, input_size, profile, log)
    config = builder.create_builder_config()
    shapes = builder.create_optimization_profile()
    shapes.set_shape(name, *profile)
    config.add_optimization_profile(shapes)
    if hasattr(config, 'progress_monitor'):
        config.progress_monitor = _progress_monitor(trt, log)
    if precision in ('fp16', 'int8') and not strongly_typed:
        config.set_flag(trt.BuilderFlag.FP16)  # int8 layers fall back to fp16, not fp32
    calibrator = None
    if precision == 'int8':
        if calibration is None or rt is None:
            raise EngineBuildError("precision 'int8' needs calibration images")
        tensors, count = calibration
        config.set_flag(trt.BuilderFlag.INT8)
        calibrator = _calibrator(trt, rt, tensors, count, log)
        config.int8_calibrator = calibrator
        if profile[0] != profile[2]:
            config.set_calibration_profile(shapes)
    facts: dict[str, Any] = {
        'input': name, 'dynamic': profile[0] != profile[2],
        'profile': {'min': list(profile[0]), 'opt': list(profile[1]), 'max': list(profile[2])},
        'tensorrt': str(trt.__version__), 'precision': precision,
        'strongly_typed': strongly_typed}
    started = time.monotonic()
    try:
        serialized = builder.build_serialized_network(network, config)
    finally:
        if calibrator is not None:
            calibrator.close()
    if calibrator is not None and calibrator.error is not None:
        raise EngineBuildError(f'int8 calibration failed: {clip(calibrator.error)}')
    if serialized is None:
        raise EngineBuildError('TensorRT failed to build the engine (its messages above say '
                               'why)')
    facts['build_seconds'] = round(time.monotonic() - started, 1)
    if calibrator is not None:
        facts['calibration_images'] = calibrator.done
        facts['calibration_table'] = calibrator.table is not None
        if calibrator.table is not None:
            facts['_table'] = calibrator.table
    return bytes(memoryview(serialized)), facts


def ensure_engine(cache: EngineCache, model: str, fields: dict[str, Any],
                  build: Callable[[], tuple[bytes, dict[str, Any]]]) -> CacheEntry:
    """Return the cached engine for ``fields``, calling ``build()`` (→ engine, facts) on a miss.

    The entry holds the engine (``engine_file_name``), ``build.json`` (the build facts) and,
    for int8, TensorRT's calibration table ``calibration.cache`` for inspection.
    """
    name = engine_file_name(model, fields['precision'])

    def write(folder: Path) -> None:
        engine, facts = build()
        table = facts.pop('_table', None)
        (folder / name).write_bytes(engine)
        if table is not None:
            (folder / 'calibration.cache').write_bytes(table)
        (folder / 'build.json').write_text(json.dumps(facts, indent=2))

    return cache.get_or_build(model, 'tensorrt', fields, write, files=(name,))
