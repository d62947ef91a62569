"""Build a TensorRT engine from an ONNX model with the TensorRT Python API, through the cache.

Any model that exports to ONNX gets an engine this way (not only Ultralytics ones). The cache
key covers everything an engine is only valid for: the ONNX's SHA-256 (and its external
weight files'), precision, the optimisation profile (min/opt/max input shapes), the builder
workspace, the TensorRT version, the GPU's name and compute capability, the calibration images
(int8), the pre-processing embedded in a u8-input graph and this step's version; so an engine
is never loaded on a GPU or TensorRT version it was not built for. The engine file inside the
entry is named ``{model}_{precision}.engine``; ``build.json`` records what the build did. A
manifest copied under another name finds the entry its first name built (the cache's key is
the content), and reads the engine's file name from the entry (:func:`engine_name`).

Precision per TensorRT version (names checked against the real bindings, see
``test/data/tensorrt_api.json``):

- TensorRT 10.x builds a weakly typed network: fp16 sets the builder's FP16 flag, int8 the
  INT8 flag (plus FP16) with an entropy calibrator (:mod:`.tensorrt_calibrator`) over inputs
  the caller prepares the way the model's task does.
- TensorRT 11 removed the FP16/INT8 flags and the calibrators: every network is strongly
  typed (its ``STRONGLY_TYPED`` creation flag is deprecated and ignored), so fp16 parses an
  fp16-converted ONNX that the caller hands in, and implicit int8 is refused by the runner.
- fp32 clears the TF32 flag, which TensorRT sets by default: with it, fp32 convolutions and
  matrix products run on tensor cores with 10-bit mantissas, which is not fp32.

The ONNX is the float graph (NCHW float32 input) or its u8-input twin (:mod:`.onnx_u8_input`:
a UINT8 NHWC image whose first consumer is the ``Cast`` to float, the only layer TensorRT lets
a UINT8 network input feed); the input's type tells which, and the profile is laid out alike.

Every build sets a workspace limit (:func:`workspace_bytes`) and reuses a timing cache kept
per GPU and TensorRT version beside the entries, so a rebuild (another precision, profile or
model version) skips the kernel timings already measured. TensorRT has one logger per process
(:func:`tensorrt_logger`); :func:`log_route` sends its messages to the log of whoever is
building or loading on that thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .cache import CacheEntry, CacheError, ArtifactCache, file_sha256
from .labels import labels_from_metadata
from .tensorrt_log import _make_logger, log_route, tensorrt_logger  # noqa: F401 - shared
from .tensorrt_calibrator import entropy_calibrator
from .types import (BUILD_FACTS, ENGINE_SUFFIX, Profile, engine_file_name,  # noqa: F401
                    nhwc_profile, rect_profile, static_profile, workspace_bytes)
from ..backends import EXECUTION_PROVIDERS
from ..limits import MAX_TENSORRT_TIMING_CACHE_BYTES
from ..platform.cuda import GpuInfo
from ..text import clip, show_path

#: Bump whenever the built engine would change for the same key fields.
ENGINE_STEP_VERSION = 2
#: Folder inside the engine cache holding one timing cache per GPU and TensorRT version.
TIMING_CACHE_DIR = 'tensorrt-timing'
Log = Callable[[str], None]


class EngineBuildError(CacheError):
    """TensorRT could not parse the ONNX model or build an engine from it."""


def engine_cache_fields(onnx_sha256: str, precision: str, profile: Profile,
                        tensorrt_version: str, gpu: GpuInfo, *, strongly_typed: bool,
                        calibration: str | None = None, workspace: int = 0,
                        external_data: str | None = None,
                        embedded: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the fields that make up an engine's cache key.

    ``embedded`` is the pre-processing an engine taking the u8 image runs inside
    (:func:`~.types.embedded_preprocessing`); engines taking the float tensor have no such
    field, so their keys are what they were before engines could take the u8 image.
    """
    fields = {
        'onnx_sha256': onnx_sha256,
        'external_data_sha256': external_data,
        'precision': precision,
        'profile': {'min': list(profile[0]), 'opt': list(profile[1]),
                    'max': list(profile[2])},
        'tensorrt': str(tensorrt_version),
        'gpu': gpu.name,
        'compute_capability': gpu.sm,
        'strongly_typed': strongly_typed,
        'workspace_bytes': int(workspace),
        'calibration_sha256': calibration,
        'builder': f'vision_nodes-tensorrt/{ENGINE_STEP_VERSION}',
    }
    if embedded is not None:
        fields['embedded_preprocessing'] = embedded
    return fields


def tensorrt_major(trt: ModuleType) -> int:
    """Major version of the imported TensorRT (0 when it cannot be read)."""
    try:
        return int(str(getattr(trt, '__version__', '0')).split('.')[0])
    except ValueError:
        return 0


def weakly_typed(trt: ModuleType) -> bool:
    """Whether this TensorRT builds weakly typed networks with FP16/INT8 flags (10.x).

    TensorRT 11 removed the flags: its networks are always strongly typed.
    """
    return hasattr(trt.BuilderFlag, 'FP16')


def network_flags(trt: ModuleType, strongly_typed: bool) -> int:
    """Return ``create_network``'s flags: STRONGLY_TYPED where it means something.

    The flag's value differs between versions (1 in TensorRT 10, 0 in 11), so it is read
    from the module; TensorRT 11 ignores it (always strongly typed) and gets none.
    """
    if not strongly_typed or tensorrt_major(trt) >= 11:
        return 0
    return 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)


def external_data_sha256(onnx_bytes: bytes, folder: Path | None) -> str | None:
    """SHA-256 over the external weight files an ONNX model names (None if it names none).

    Weights above 2 GB, or saved so on purpose, live in files beside the ``.onnx``; the
    engine depends on them as much as on the graph. Needs the ``onnx`` package to read the
    file names; without it (a deployment without it parses no external data either) None.
    """
    try:
        import onnx
        from onnx.external_data_helper import uses_external_data
    except ImportError:
        return None
    try:
        model = onnx.ModelProto.FromString(onnx_bytes)
    except Exception:  # noqa: BLE001 - TensorRT's parser reports a broken model
        return None
    names = sorted({entry.value for tensor in model.graph.initializer
                    if uses_external_data(tensor)
                    for entry in tensor.external_data if entry.key == 'location'})
    if not names:
        return None
    if folder is None:
        raise EngineBuildError('the ONNX model keeps its weights in external files, but its '
                               'folder is unknown: load it from its own path')
    digest = hashlib.sha256()
    for name in names:
        path = (folder / name).resolve()
        if folder.resolve() not in path.parents:
            raise EngineBuildError(f"the ONNX model's external data '{clip(name)}' lies "
                                   'outside its folder: refused')
        if not path.is_file():
            raise EngineBuildError(f"the ONNX model's external data file {show_path(path)} is "
                                   'missing: keep it beside the .onnx')
        digest.update(name.encode() + b'\0' + file_sha256(path).encode() + b'\n')
    return digest.hexdigest()


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


def takes_u8_image(trt: ModuleType, tensor: Any) -> bool:
    """Whether a network input is the u8 image (UINT8, NHWC) rather than a float NCHW tensor."""
    return tensor.dtype == trt.DataType.UINT8


def _network_profile(trt: ModuleType, network: Any, input_size: Sequence[int],
                     requested: Profile, log: Log) -> tuple[str, Profile]:
    """Check the network's single image input; return its name and the profile to build.

    The input is NCHW, or NHWC when it is the u8 image (``requested`` is laid out alike).
    """
    if network.num_inputs != 1:
        raise EngineBuildError(f'the ONNX model has {network.num_inputs} inputs; the TensorRT '
                               'runner serves image models with exactly one input')
    tensor = network.get_input(0)
    dims = [int(d) for d in tensor.shape]
    u8 = takes_u8_image(trt, tensor)
    if len(dims) != 4:
        raise EngineBuildError(f"the ONNX model's input '{clip(tensor.name)}' has shape "
                               f"{dims}; expected {'NHWC' if u8 else 'NCHW'} (4 dimensions)")
    height, width = (dims[1], dims[2]) if u8 else (dims[2], dims[3])
    if height == -1 and width == -1:
        return tensor.name, requested
    fixed = static_profile((height, width), requested[2][0] if dims[0] == -1 else 1)
    if u8:
        fixed = nhwc_profile(fixed)
    if (height, width) != tuple(int(v) for v in input_size):
        raise EngineBuildError(
            f"the ONNX model's input '{clip(tensor.name)}' is fixed at {height}x{width} "
            f"but the manifest's input_size is {input_size[0]}x{input_size[1]}: fix the "
            'manifest (or export the model with dynamic height and width)')
    if requested != fixed:
        log(f"the ONNX model's input is fixed at {height}x{width}: building a fixed-shape "
            'engine (no rect inference)')
    return tensor.name, fixed


def timing_cache_path(cache: ArtifactCache, tensorrt_version: str, gpu: GpuInfo) -> Path:
    """Where the timing cache for this TensorRT version and GPU model is kept."""
    safe = ''.join(c if c.isalnum() or c in '-_.' else '_' for c in
                   f'{gpu.name}-sm{gpu.sm}-trt{tensorrt_version}')
    return cache.root / TIMING_CACHE_DIR / f'{safe}.cache'


def _attach_timing_cache(config: Any, path: Path | None, log: Log) -> Any:
    """Create the build's timing cache from ``path`` (empty if absent or refused); attach it."""
    data = b''
    if path is not None and path.is_file():
        try:
            if path.stat().st_size > MAX_TENSORRT_TIMING_CACHE_BYTES:
                raise OSError(f'larger than {MAX_TENSORRT_TIMING_CACHE_BYTES} bytes')
            data = path.read_bytes()
        except OSError as exc:
            log(f"TensorRT timing cache {show_path(path)} not used ({clip(exc)}): starting empty")
    timing = config.create_timing_cache(data)
    if timing is None or not config.set_timing_cache(timing, False):
        if data:
            log(f"TensorRT timing cache {show_path(path)} does not fit this GPU or TensorRT "
                'version: starting empty')
        timing = config.create_timing_cache(b'')
        if timing is not None:
            config.set_timing_cache(timing, False)
    return timing


def _save_timing_cache(timing: Any, path: Path, log: Log) -> None:
    """Write the (grown) timing cache back atomically; a failure only costs the next build."""
    try:
        data = bytes(memoryview(timing.serialize()))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f'.{path.name}.{uuid.uuid4().hex[:8]}')
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except Exception as exc:  # noqa: BLE001 - the engine is built; the cache is a speed-up
        log(f"TensorRT timing cache not saved to {show_path(path)}: {clip(exc)}")


def _configure(trt: ModuleType, config: Any, precision: str, strongly_typed: bool,
               workspace: int) -> dict[str, Any]:
    """Set precision flags and the workspace limit; return what was set (for build.json)."""
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace))
    tf32 = precision != 'fp32'
    if not tf32 and hasattr(trt.BuilderFlag, 'TF32'):
        config.clear_flag(trt.BuilderFlag.TF32)  # on by default: fp32 must be fp32
    if precision in ('fp16', 'int8') and not strongly_typed:
        config.set_flag(trt.BuilderFlag.FP16)  # int8 layers fall back to fp16, not fp32
    if precision == 'int8':
        config.set_flag(trt.BuilderFlag.INT8)
    return {'tf32': tf32, 'workspace_bytes': int(workspace)}


def build_engine(trt: ModuleType, onnx_bytes: bytes, precision: str,
                 input_size: Sequence[int], profile: Profile, *, strongly_typed: bool,
                 log: Log, calibration: tuple[Iterable[np.ndarray], int] | None = None,
                 rt: ModuleType | None = None, onnx_path: Path | None = None,
                 workspace: int = 1 << 30, timing_cache: Path | None = None
                 ) -> tuple[bytes, dict[str, Any]]:
    """Parse ``onnx_bytes`` and build a serialised engine; return (engine, build facts).

    ``onnx_path`` is where the model lives, so that TensorRT finds external weight files
    beside it (the bytes parsed are still the ones the caller checked). ``calibration`` is
    (inputs, how many) for int8, each as the network input takes it (a float NCHW tensor, or
    the u8 NHWC image for a u8-input graph), with ``rt`` the CUDA runtime for its buffer.
    ``profile`` is laid out as the input is (NHWC for the u8 image).
    ``timing_cache`` is the file the build's kernel timings are read from and saved to.
    Raises EngineBuildError with TensorRT's own messages when it fails.
    """
    with log_route(log):
        return _build(trt, onnx_bytes, precision, input_size, profile, strongly_typed, log,
                      calibration, rt, onnx_path, workspace, timing_cache)


def _parse(trt: ModuleType, network: Any, onnx_bytes: bytes, onnx_path: Path | None) -> None:
    parser = trt.OnnxParser(network, tensorrt_logger(trt))
    ok = parser.parse(onnx_bytes, str(onnx_path)) if onnx_path is not None else \
        parser.parse(onnx_bytes)
    if not ok:
        errors = '; '.join(clip(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineBuildError(f'TensorRT cannot parse the ONNX model: {errors or "no detail"}')


def _calibration_profile(builder: Any, name: str, profile: Profile, shapes: Any) -> Any:
    """Return the profile int8 calibration runs at: its opt shape is one image at input_size.

    The calibrator feeds one image a batch; a profile for batches (opt = ``max_batch``
    images) gets a calibration profile of its own, with an opt batch of one.
    """
    if profile[1][0] == 1:
        return shapes
    single = builder.create_optimization_profile()
    single.set_shape(name, profile[0], (1,) + tuple(profile[1][1:]), profile[2])
    return single


def _build(trt, onnx_bytes, precision, input_size, profile, strongly_typed, log, calibration,
           rt, onnx_path, workspace, timing_path):
    builder = trt.Builder(tensorrt_logger(trt))
    network = builder.create_network(network_flags(trt, strongly_typed))
    _parse(trt, network, onnx_bytes, onnx_path)
    name, profile = _network_profile(trt, network, input_size, profile, log)
    config = builder.create_builder_config()
    shapes = builder.create_optimization_profile()
    shapes.set_shape(name, *profile)
    config.add_optimization_profile(shapes)
    if hasattr(config, 'progress_monitor'):
        config.progress_monitor = _progress_monitor(trt, log)
    settings = _configure(trt, config, precision, strongly_typed, workspace)
    timing = _attach_timing_cache(config, timing_path, log)
    calibrator = None
    if precision == 'int8':
        if calibration is None or rt is None:
            raise EngineBuildError("precision 'int8' needs calibration images")
        tensors, count = calibration
        calibrator = entropy_calibrator(trt, rt, tensors, count,
                                        trt.nptype(network.get_input(0).dtype), log)
        config.int8_calibrator = calibrator
        if profile[0] != profile[2]:
            config.set_calibration_profile(_calibration_profile(builder, name, profile, shapes))
    facts: dict[str, Any] = {
        'input': name, 'dynamic': profile[0] != profile[2],
        'input_layout': 'u8 NHWC' if takes_u8_image(trt, network.get_input(0))
        else 'float NCHW',
        'profile': {'min': list(profile[0]), 'opt': list(profile[1]), 'max': list(profile[2])},
        'tensorrt': str(trt.__version__), 'precision': precision,
        'strongly_typed': strongly_typed, **settings,
        'timing_cache': str(timing_path) if timing_path is not None else None}
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
    if timing is not None and timing_path is not None:
        _save_timing_cache(timing, timing_path, log)
    if calibrator is not None:
        facts['calibration_images'] = calibrator.done
        facts['calibration_table'] = calibrator.table is not None
        if calibrator.table is not None:
            facts['_table'] = calibrator.table
    return bytes(memoryview(serialized)), facts


def ensure_engine(cache: ArtifactCache, model: str, fields: dict[str, Any],
                  build: Callable[[], tuple[bytes, dict[str, Any]]]) -> CacheEntry:
    """Return the cached engine for ``fields``, calling ``build()`` (→ engine, facts) on a miss.

    The entry holds the engine (``engine_file_name``), ``build.json`` (the build facts) and,
    for int8, TensorRT's calibration table ``calibration.cache`` for inspection. An entry of
    the same key built for another model name is taken too when it holds one engine
    (:func:`engine_name`); one that does not is passed over, and this name builds its own.
    """
    name = engine_file_name(model, fields['precision'])

    def write(folder: Path) -> None:
        engine, facts = build()
        table = facts.pop('_table', None)
        (folder / name).write_bytes(engine)
        if table is not None:
            (folder / 'calibration.cache').write_bytes(table)
        (folder / BUILD_FACTS).write_text(json.dumps(facts, indent=2))

    entry = cache.get_or_build(model, 'tensorrt', fields, write, files=(name,),
                               shared=(BUILD_FACTS,))
    if entry.path.name != cache.entry_dir(model, 'tensorrt', entry.key).name:
        try:
            engine_name(entry, model, fields['precision'])
        except CacheError:  # not one engine in another name's entry: build this name's
            entry = cache.get_or_build(model, 'tensorrt', fields, write, files=(name,))
    return entry


def engine_name(entry: CacheEntry, model: str, precision: str) -> str:
    """Return the engine file's name in ``entry``: this model's, else the one engine listed.

    An entry built for another model name (a manifest copied under a new name) holds that
    name's engine; one listing no engine file, or several, is refused in one line.
    """
    names = entry.names()
    own = engine_file_name(model, precision)
    if own in names:
        return own
    engines = [n for n in names if n.endswith(ENGINE_SUFFIX)]
    if len(engines) != 1:
        raise CacheError(f'cache entry {entry.path.name} lists {len(engines)} engine files, '
                         'not one; delete it and configure again')
    return engines[0]


def onnx_labels(onnx_bytes: bytes) -> list[str] | None:
    """Class names in an ONNX model's metadata (read with ``onnx``, else ONNX Runtime)."""
    try:
        import onnx

        model = onnx.ModelProto.FromString(onnx_bytes)
        meta = {p.key: p.value for p in model.metadata_props}
    except ImportError:
        try:
            import onnxruntime
        except ImportError:
            return None
        session = onnxruntime.InferenceSession(onnx_bytes, providers=[EXECUTION_PROVIDERS['cpu']])
        meta = session.get_modelmeta().custom_metadata_map
    except Exception:  # noqa: BLE001 - TensorRT's parser reports a broken model
        return None
    return labels_from_metadata(meta)
