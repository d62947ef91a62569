"""OpenVINO runner (backend ``openvino``): CPU, GPU, NPU or AUTO, at fp32, fp16/bf16 or int8.

The model comes from the artifact chain (``RunnerConfig.artifacts``: weights → ONNX → IR →
INT8 IR, each a verified cache entry, or the manifest's own IR); this runner loads and runs
it. It is compiled for one input shape at a time (static shapes run faster than a dynamic
compile) with latency-oriented settings: one stream, one infer request, OpenVINO's
``LATENCY`` hint (all cores on one request). ``precision`` decides
``INFERENCE_PRECISION_HINT``: fp32 is pinned to f32 (OpenVINO would otherwise pick bf16 on
CPUs that have it), fp16 is the device's fast reduced type (bf16 on such CPUs, f16 on GPUs
and NPUs), int8 runs a quantized IR.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts.calibration import CalibrationError
from ..artifacts.labels import labels_from_rt_info
from ..artifacts.types import OpenVinoIr, artifact_source
from ..platform.cpu import cpu_info, int8_float_type
from ..platform.devices import DeviceError, OpenVinoDevice, openvino_device
from ..text import clip
from .base import Runner, RunnerConfig, RunnerError

#: INFERENCE_PRECISION_HINT for fp32 on every device.
EXACT_TYPE = 'f32'
#: Compiled input shapes kept per runner (least recently used dropped first).
MAX_COMPILED_SHAPES = 8
#: Devices whose compilation takes long enough (seconds, GPU kernels) to keep compiled blobs
#: in OpenVINO's model cache (``CACHE_DIR``, inside the engine cache). A CPU compile of these
#: models takes a fraction of a second, about what reading a cached blob takes.
COMPILE_CACHE_FAMILIES = ('GPU', 'NPU')

_core_instance: Any = None


def _core() -> Any:
    """One ``openvino.Core`` per process (it loads device plugins lazily)."""
    global _core_instance
    if _core_instance is None:
        import openvino as ov

        _core_instance = ov.Core()
    return _core_instance


def fast_reduced_type(family: str) -> str | None:
    """Return the device's fast reduced inference type ('bf16', 'f16'), or None.

    A CPU counts only with native support (OpenVINO lists BF16 for AVX-512 BF16 / AMX, FP16
    for ARM CPUs with fp16 arithmetic); emulated reduced precision is slower than f32.
    """
    try:
        caps = set(_core().get_property(family, 'OPTIMIZATION_CAPABILITIES'))
    except RuntimeError:
        return None
    if family == 'CPU' and 'BF16' in caps:
        return 'bf16'
    if 'FP16' in caps:
        return 'f16'
    return None


def _device(config: RunnerConfig) -> OpenVinoDevice:
    OpenVinoRunner.check_device(config)
    try:
        return openvino_device(config.device)
    except DeviceError as exc:
        raise RunnerError(str(exc)) from None


def _families(device: OpenVinoDevice) -> list[str]:
    """Device types a (possibly virtual) device may run on."""
    names = device.candidates or tuple(_core().available_devices)
    return list(dict.fromkeys(OpenVinoDevice.family(n) for n in names))


def _check_available(device: OpenVinoDevice) -> None:
    available = list(_core().available_devices)
    for name in device.candidates:
        family = OpenVinoDevice.family(name)
        if name in available or (name == family and any(
                OpenVinoDevice.family(a) == family for a in available)) or (
                name == f'{family}.0' and family in available):
            continue
        raise RunnerError(
            f"OpenVINO device '{clip(name)}' is not available on this machine (available: "
            f"{', '.join(available) or 'none'}; or AUTO to let OpenVINO choose); set the "
            '`device` parameter')


def _is_quantized(model: Any) -> bool:
    return any(op.get_type_name() == 'FakeQuantize' for op in model.get_ops())


class OpenVinoRunner(Runner):
    """Runs a model with OpenVINO, converting and quantizing through the engine cache."""

    backends = ('openvino',)
    supports_u8_input = True

    def __init__(self, config: RunnerConfig) -> None:
        super().__init__(config)
        self._model: Any = None
        self._weights_buffer: Any = None  # the IR's weights: the model shares this memory
        self._device: OpenVinoDevice | None = None
        self._properties: dict[str, Any] = {}
        #: Compiled model and infer request per input shape (height, width).
        self._compiled: collections.OrderedDict[tuple[int, int], tuple[Any, Any]] = \
            collections.OrderedDict()
        #: Which artifact runs: 'ir' (converted), 'int8-ir' (quantized here) or 'weights'.
        self.artifact = ''
        self.model_path: Path | None = None
        #: Whether the IR that runs holds int8 quantization.
        self.quantized = False
        #: The inference type each precision maps to on this device ('f32', 'bf16', 'f16').
        self.inference_type = ''
        self._ir: OpenVinoIr | None = None
        #: The IR ``_model`` was read from; its u8-input twin (model, weights buffer), if asked.
        self._source: OpenVinoIr | None = None
        self._u8: tuple[Any, Any] | None = None

    # ------------------------------------------------------------------ class-level facts
    @classmethod
    def device_kinds(cls, config: RunnerConfig) -> tuple[str, ...]:
        """Every kind: the CPU (the default), its GPUs by index, NPU, AUTO and friends."""
        return ('default', 'cpu', 'gpu', 'openvino')

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        try:
            import openvino  # noqa: F401
        except ImportError:
            return "OpenVINO is not installed (pip install 'vision_nodes[openvino]')"
        return None

    @classmethod
    def auto_precision(cls, config: RunnerConfig) -> str:
        """fp16 when every device this may run on has a fast reduced type, else fp32."""
        families = _families(_device(config))
        if families and all(fast_reduced_type(f) for f in families):
            return 'fp16'
        return 'fp32'

    @classmethod
    def precision_unavailable(cls, config: RunnerConfig) -> str | None:
        if config.precision == 'fp16':
            for family in _families(_device(config)):
                if fast_reduced_type(family) is None:
                    if family == 'CPU':
                        return (f'the CPU ({cpu_info().model}) has no native bf16 (AVX-512 '
                                'BF16 or AMX) or fp16 arithmetic; emulated it would be slower '
                                'than fp32')
                    return f'OpenVINO device {family} has no fast fp16'
        if config.precision == 'int8' and config.manifest.architecture != 'openvino' \
                and not config.calibration_dir:
            return ('int8 quantizes the model on first use and needs calibration images: set '
                    'the `calibration_dir` parameter or manifest field to a folder of typical '
                    'frames')
        return None

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        cfg = self.config
        core = _core()
        self._device = _device(cfg)
        _check_available(self._device)
        model = self._read_model()
        self.quantized = _is_quantized(model)
        if self.quantized and cfg.precision != 'int8':
            raise RunnerError(
                f"the weights are an int8-quantized OpenVINO IR; run them with precision "
                f"'int8' (or 'auto'), not '{cfg.precision}' (declare `precisions: [int8]` in "
                'the manifest)')
        shape = model.inputs[0].get_partial_shape()
        self.dynamic_shapes = shape.rank.is_static and len(shape) == 4 and \
            shape[2].is_dynamic and shape[3].is_dynamic
        self.max_batch = self.batch_limit(shape.rank.is_static and len(shape) == 4
                                          and shape[0].is_dynamic)
        if cfg.precision == 'int8' and not self.quantized:
            model = self._quantize(model)
            self.quantized = True
        self._model = model
        self.output_names = [out.get_any_name() if out.get_names() else ''
                             for out in model.outputs]
        self._properties = self._compile_properties()
        if self.labels is None:
            self.labels = labels_from_rt_info(model)
        names = ', '.join(f"{f} ({core.get_property(f, 'FULL_DEVICE_NAME')})"
                          for f in _families(self._device))
        cfg.log(f"openvino: device {self._device.name}: {names}; precision '{cfg.precision}' "
                f'runs as {self._precision_words()}')

    def _read_model(self) -> Any:
        """Read the IR the chain hands over (verified bytes of an entry, or the user's IR)."""
        cfg = self.config
        self._ir = artifact_source(cfg.cache, cfg.artifacts, cfg.log).openvino_ir(
            cfg.manifest, cfg.weights)
        self.labels = self._ir.labels
        return self._model_from(self._ir)

    def _model_from(self, ir: OpenVinoIr) -> Any:
        import openvino as ov

        self.artifact, self.model_path, self.cache_hit = ir.kind, ir.path, ir.hit
        self._source = ir
        buffer = np.frombuffer(ir.weights, dtype=np.uint8)
        try:
            model = _core().read_model(ir.xml, ov.Tensor(buffer))
        except RuntimeError as exc:
            raise RunnerError(f"OpenVINO cannot read the model '{clip(str(self.model_path))}': "
                              f'{clip(str(exc), 400)}') from exc
        self._weights_buffer = buffer
        return model

    def _quantize(self, model: Any) -> Any:
        cfg = self.config
        rect = self.dynamic_shapes and cfg.manifest.rect and cfg.manifest.preprocessing.letterbox
        try:
            ir = artifact_source(cfg.cache, cfg.artifacts, cfg.log).openvino_int8(
                cfg.manifest, self._ir, lambda: model, rect, cfg.calibration_dir)
        except CalibrationError as exc:
            raise RunnerError(str(exc)) from exc
        return self._model_from(ir)

    # ------------------------------------------------------------------ compile settings
    def _inference_type(self, family: str) -> str:
        """INFERENCE_PRECISION_HINT for one device type at this runner's precision."""
        precision = self.config.precision
        if precision == 'fp32':
            return EXACT_TYPE
        if precision == 'int8' and family == 'CPU':  # bf16 where native (platform/cpu.py)
            return int8_float_type(cpu_info())
        # fp16, and the float layers of an int8 model on GPUs and NPUs.
        return fast_reduced_type(family) or EXACT_TYPE

    def _compile_properties(self) -> dict[str, Any]:
        """Latency settings: one stream, one request using all cores, the precision's type.

        On a CPU the inference threads are not pinned to cores: a robot's CPU also runs the
        camera driver, DDS and other nodes, and a pinned thread waits for its busy core
        instead of moving (docs/backends.md, OpenVINO settings).
        """
        device = self._device
        per_device = {f: {'INFERENCE_PRECISION_HINT': self._inference_type(f)}
                      for f in _families(device)}
        if 'CPU' in per_device:
            per_device['CPU']['ENABLE_CPU_PINNING'] = False
        props: dict[str, Any] = {'PERFORMANCE_HINT': 'LATENCY'}
        if device.virtual:
            props['DEVICE_PROPERTIES'] = {f: {**p, 'PERFORMANCE_HINT': 'LATENCY',
                                              'NUM_STREAMS': 1} for f, p in per_device.items()}
        else:
            props.update(per_device[OpenVinoDevice.family(device.name)])
            props['NUM_STREAMS'] = 1
        self.inference_type = ', '.join(f"{f}: {p['INFERENCE_PRECISION_HINT']}"
                                        for f, p in per_device.items()) \
            if device.virtual else props['INFERENCE_PRECISION_HINT']
        if any(f in COMPILE_CACHE_FAMILIES for f in per_device):
            cfg = self.config
            props['CACHE_DIR'] = str(artifact_source(cfg.cache, cfg.artifacts, cfg.log)
                                     .openvino_compile_cache())
        return props

    def _precision_words(self) -> str:
        if self.quantized:
            return f'int8 in the quantized layers, {self.inference_type} elsewhere'
        return self.inference_type

    # ------------------------------------------------------------------ shapes and inference
    def _u8_model(self) -> Any:
        """Return the model with the pre-processing embedded (artifacts/openvino_u8_input.py)."""
        if self._u8 is None:
            import openvino as ov

            cfg, fp = self.config, self._model
            ir = artifact_source(cfg.cache, cfg.artifacts, cfg.log).openvino_u8_input(
                cfg.manifest, self._source, lambda: fp)
            buffer = np.frombuffer(ir.weights, dtype=np.uint8)
            self._u8 = (_core().read_model(ir.xml, ov.Tensor(buffer)), buffer)
        return self._u8[0]

    def _compiled_for(self, shape: tuple[int, int], u8: bool = False) -> Any:
        key = (*shape, 'u8') if u8 else shape
        found = self._compiled.get(key)
        if found is not None:
            self._compiled.move_to_end(key)
            return found[1]
        if self._model is None:
            raise RunnerError('runner is not loaded')
        if tuple(shape) != tuple(self.config.manifest.input_size) and not self.dynamic_shapes:
            raise RunnerError(f'this model only takes input shape '
                              f'{tuple(self.config.manifest.input_size)}, not {tuple(shape)}')
        model = (self._u8_model() if u8 else self._model).clone()
        if self.dynamic_shapes or self.max_batch > 1:
            import openvino as ov

            batch = ov.Dimension(1, self.max_batch) if self.max_batch > 1 else 1
            size = shape if self.dynamic_shapes else self.config.manifest.input_size
            dims = [int(size[0]), int(size[1])]
            model.reshape({model.inputs[0]: ov.PartialShape(
                [batch, *dims, 3] if u8 else [batch, 3, *dims])})
        try:
            compiled = _core().compile_model(model, self._device.name, self._properties)
        except RuntimeError as exc:
            raise RunnerError(f'OpenVINO cannot compile the model for {self._device.name}: '
                              f'{clip(str(exc), 400)}') from exc
        request = compiled.create_infer_request()
        self._compiled[key] = (compiled, request)
        while len(self._compiled) > MAX_COMPILED_SHAPES:
            self._compiled.popitem(last=False)
        return request

    def prepare_shape(self, shape: tuple[int, int]) -> None:
        """Compile (and warm up) the model for ``shape`` now, so no frame waits for it."""
        shape = (int(shape[0]), int(shape[1]))
        if ((*shape, 'u8') if self.takes_u8 else shape) in self._compiled:
            return
        request = self._compiled_for(shape, self.takes_u8)
        request.infer({0: np.zeros((1, *shape, 3), np.uint8) if self.takes_u8
                       else np.zeros((1, 3) + shape, dtype=np.float32)})

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        """Run (N, 3, H, W) float32 tensors, or (N, H, W, 3) u8 bgr images (``takes_u8``)."""
        u8 = tensor.dtype == np.uint8
        size = tensor.shape[1:3] if u8 else tensor.shape[2:4]
        request = self._compiled_for((int(size[0]), int(size[1])), u8)
        result = request.infer({0: tensor}, share_inputs=True, share_outputs=False)
        return list(result.to_tuple())

    def _unload(self) -> None:
        self._compiled.clear()
        self._u8 = None
        self._model = None
        self._weights_buffer = None

    # ------------------------------------------------------------------ facts
    def describe(self) -> dict[str, Any]:
        import openvino as ov

        info = super().describe()
        info['runtime'] = f'OpenVINO {ov.get_version()}'
        if self._device is None:
            return info
        core = _core()
        info['device'] = self._device.name
        info['artifact'] = self.artifact
        info['inference_type'] = self._precision_words()
        info['shapes'] = [list(s[:2]) for s in self._compiled]
        info['input'] = 'u8 NHWC bgr, pre-processing in the model' if self.takes_u8 \
            else 'float32 NCHW'
        if self._compiled:
            compiled = next(reversed(self._compiled.values()))[0]
            info['execution_devices'] = list(_safe(compiled.get_property,
                                                   'EXECUTION_DEVICES') or [])
            for key in ('NUM_STREAMS', 'INFERENCE_NUM_THREADS'):
                value = _safe(compiled.get_property, key)
                if value is not None:
                    info[key.lower()] = int(value)
            pinning = _safe(compiled.get_property, 'ENABLE_CPU_PINNING')
            if pinning is not None:
                info['cpu_pinning'] = bool(pinning)
        families = _families(self._device)
        info['device_name'] = ', '.join(
            str(_safe(core.get_property, f, 'FULL_DEVICE_NAME')) for f in families)
        for family in families:
            if family == 'CPU':
                info.update(cpu_info().describe())
            if family == 'GPU':
                total = _safe(core.get_property, 'GPU', 'GPU_DEVICE_TOTAL_MEM_SIZE')
                stats = _safe(core.get_property, 'GPU', 'GPU_MEMORY_STATISTICS')
                if total is not None:
                    info['memory_total'] = int(total)
                if isinstance(stats, dict):
                    info['memory_used'] = int(sum(stats.values()))
        return info


def _safe(getter: Any, *args: Any) -> Any:
    """Return a property OpenVINO may not expose on every device or version (else None)."""
    try:
        return getter(*args)
    except (RuntimeError, TypeError):
        return None
