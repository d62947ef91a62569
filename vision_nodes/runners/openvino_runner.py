"""OpenVINO runner (backend ``openvino``): loads the IR it is handed and runs it.

Everything is decided before the runner exists: the device, the precision and the compile
settings (:class:`~.openvino_plan.OpenVinoPlan`, in ``RunnerConfig.device_facts``), and the IR
(``RunnerConfig.artifact``: converted, quantized for int8, or the manifest's own, from the
artifact chain). The runner compiles it for one input shape at a time (static shapes run
faster than a dynamic compile) and runs it. On a CPU serving several cameras (``plan.streams``
> 1) each shape is compiled once on that many streams and its requests are lent to the
threads that run frames (:class:`~.openvino_streams.StreamRequests`): ``concurrent_frames``
says how many frames may run at once.
"""

from __future__ import annotations

import collections
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts.labels import labels_from_rt_info
from ..artifacts.types import OpenVinoIr
from ..platform import openvino as facts
from ..platform.cpu import cpu_info
from ..text import clip, show_path
from .base import Runner, RunnerConfig, RunnerError
from .openvino_streams import StreamRequests

#: Compiled input shapes kept per runner (least recently used dropped first).
MAX_COMPILED_SHAPES = 8


class OpenVinoRunner(Runner):
    """Runs an OpenVINO IR from the artifact chain on the device its plan names."""

    backends = ('openvino',)
    supports_u8_input = True

    def __init__(self, config: RunnerConfig) -> None:
        super().__init__(config)
        self._model: Any = None
        self._weights_buffer: Any = None  # the IR's weights: the model shares this memory
        self._properties: dict[str, Any] = {}
        #: Compiled model and its infer request, or its streams' requests (plan.streams > 1),
        #: per input shape (height, width; with 'u8' for the u8-input model).
        self._compiled: collections.OrderedDict[Any, tuple[Any, Any]] = \
            collections.OrderedDict()
        #: Compiling and the table above, for threads that run frames at once.
        self._compile_lock = threading.Lock()
        #: Which artifact runs: 'ir' (converted), 'int8-ir' (quantized) or 'weights'.
        self.artifact = ''
        self.model_path: Path | None = None
        #: Whether the IR that runs holds int8 quantization.
        self.quantized = False
        #: The plan: device, inference types, compile settings (set by the registry).
        self.plan = config.device_facts
        #: The u8-input twin (model, weights buffer), read when first compiled.
        self._u8: tuple[Any, Any] | None = None

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        try:
            import openvino  # noqa: F401
        except ImportError:
            return "OpenVINO is not installed (pip install 'vision_nodes[openvino]')"
        return None

    def _load(self) -> None:
        cfg, ir = self.config, self.config.artifact
        if self.plan is None or not isinstance(ir, OpenVinoIr):
            raise RunnerError('the OpenVINO runner loads a planned IR: create it through '
                              'vision_nodes.pipeline.create_runner')
        self.artifact, self.model_path, self.cache_hit = ir.kind, ir.path, ir.hit
        try:
            model, self._weights_buffer = facts.read_model(ir.xml, ir.weights)
        except RuntimeError as exc:
            raise RunnerError(f"OpenVINO cannot read the model {show_path(self.model_path)}: "
                              f'{clip(str(exc), 400)}') from exc
        self.quantized = facts.is_quantized(model)
        if self.quantized and cfg.precision != 'int8':
            raise RunnerError(
                f"the weights are an int8-quantized OpenVINO IR; run them with precision "
                f"'int8' (or 'auto'), not '{cfg.precision}' (declare `precisions: [int8]` in "
                'the manifest)')
        self.dynamic_shapes = facts.dynamic_hw(model)
        self.max_batch = self.batch_limit(facts.dynamic_batch(model))
        self._model = model
        self.output_names = [out.get_any_name() if out.get_names() else ''
                             for out in model.outputs]
        self._properties = self.plan.properties(ir.compile_cache, self.plan.streams)
        self.concurrent_frames = self.plan.streams
        self.labels = ir.labels if ir.labels is not None else labels_from_rt_info(model)
        names = ', '.join(f'{f} ({facts.full_name(f)})' for f in self.plan.families)
        cfg.log(f"openvino: device {self.plan.device.name}: {names}; precision "
                f"'{cfg.precision}' runs as {self._precision_words()}")

    def compute_type(self) -> str:
        """Return 'int8' for a quantized IR, else the devices' inference types.

        In the precision parameter's words: bf16 on a CPU with native bf16 at precision fp16.
        """
        if self.quantized:
            return 'int8'
        if self.plan is None:
            return self.config.precision
        words = {'f32': 'fp32', 'f16': 'fp16', 'bf16': 'bf16'}
        return ','.join(dict.fromkeys(words.get(t, t) for t in
                                      self.plan.inference_types.values()))

    def _precision_words(self) -> str:
        if self.quantized:
            return f'int8 in the quantized layers, {self.plan.inference_words()} elsewhere'
        return self.plan.inference_words()

    def blank_input(self, height: int, width: int) -> np.ndarray:
        """Return the warm-up's blank frame: the u8 image when the IR has its u8-input twin.

        Frames then come as u8 images (the pipeline sets ``takes_u8``), so the warm-up compiles
        the model they use at ``input_size``, not a float one no frame would run.
        """
        if isinstance(self.config.artifact, OpenVinoIr) and \
                self.config.artifact.u8_input is not None:
            return np.zeros((1, height, width, 3), np.uint8)
        return super().blank_input(height, width)

    def _u8_model(self) -> Any:
        """Return the model with the pre-processing embedded (the chain's u8-input twin)."""
        if self._u8 is None:
            twin = self.config.artifact.u8_input
            if twin is None:
                raise RunnerError('the u8-input model was not prepared: create the runner '
                                  'through vision_nodes.pipeline with u8_input')
            self._u8 = facts.read_model(twin.xml, twin.weights)
        return self._u8[0]

    def _compiled_for(self, shape: tuple[int, int], u8: bool = False) -> Any:
        """Return the infer request (or the streams' requests) compiled for ``shape``."""
        key = (*shape, 'u8') if u8 else shape
        with self._compile_lock:
            found = self._compiled.get(key)
            if found is None:
                found = self._compiled[key] = self._compile(shape, u8)
                while len(self._compiled) > MAX_COMPILED_SHAPES:
                    self._compiled.popitem(last=False)
            self._compiled.move_to_end(key)
            return found[1]

    def _compile(self, shape: tuple[int, int], u8: bool) -> tuple[Any, Any]:
        if self._model is None:
            raise RunnerError('runner is not loaded')
        if tuple(shape) != tuple(self.config.manifest.input_size) and not self.dynamic_shapes:
            raise RunnerError(f'this model only takes input shape '
                              f'{tuple(self.config.manifest.input_size)}, not {tuple(shape)}')
        model = (self._u8_model() if u8 else self._model).clone()
        streams = self.plan.streams  # > 1: a batch's frames run one per stream
        if self.dynamic_shapes or self.max_batch > 1:
            import openvino as ov

            batch = ov.Dimension(1, self.max_batch) if self.max_batch > 1 and streams == 1 \
                else 1
            size = shape if self.dynamic_shapes else self.config.manifest.input_size
            dims = [int(size[0]), int(size[1])]
            model.reshape({model.inputs[0]: ov.PartialShape(
                [batch, *dims, 3] if u8 else [batch, 3, *dims])})
        device = self.plan.device.name
        try:
            compiled = facts.core().compile_model(model, device, self._properties)
        except RuntimeError as exc:
            on = f' on {streams} streams' if streams > 1 else ''
            raise RunnerError(f'OpenVINO cannot compile the model for {device}{on}: '
                              f'{clip(str(exc), 400)}') from exc
        if streams > 1:
            return compiled, StreamRequests(compiled, streams)
        return compiled, compiled.create_infer_request()

    def prepare_shape(self, shape: tuple[int, int]) -> None:
        """Compile (and warm up) the model for ``shape`` now, so no frame waits for it."""
        shape = (int(shape[0]), int(shape[1]))
        if ((*shape, 'u8') if self.takes_u8 else shape) in self._compiled:
            return
        request = self._compiled_for(shape, self.takes_u8)
        count = request.count if isinstance(request, StreamRequests) else 1
        zeros = np.zeros((count, *shape, 3), np.uint8) if self.takes_u8 \
            else np.zeros((count, 3) + shape, dtype=np.float32)
        self._run(request, zeros)  # every stream's request once

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        """Run (N, 3, H, W) float32 tensors, or (N, H, W, 3) u8 bgr images (``takes_u8``).

        Safe to call from ``concurrent_frames`` threads at once.
        """
        u8 = tensor.dtype == np.uint8
        size = tensor.shape[1:3] if u8 else tensor.shape[2:4]
        return self._run(self._compiled_for((int(size[0]), int(size[1])), u8), tensor)

    @staticmethod
    def _run(request: Any, tensor: np.ndarray) -> list[np.ndarray]:
        if isinstance(request, StreamRequests):
            return request.run(tensor)
        result = request.infer({0: tensor}, share_inputs=True, share_outputs=False)
        return list(result.to_tuple())

    def _unload(self) -> None:
        self._compiled.clear()
        self._u8 = None
        self._model = None
        self._weights_buffer = None

    def describe(self) -> dict[str, Any]:
        import openvino as ov

        info = super().describe()
        info['runtime'] = f'OpenVINO {ov.get_version()}'
        if self.plan is None:
            return info
        info.update(device=self.plan.device.name, artifact=self.artifact,
                    inference_type=self._precision_words(),
                    shapes=[list(s[:2]) for s in self._compiled],
                    input='u8 NHWC bgr, pre-processing in the model' if self.takes_u8
                    else 'float32 NCHW')
        if self._compiled:
            info.update(facts.compiled_facts(next(reversed(self._compiled.values()))[0]))
        info['device_name'] = ', '.join(str(facts.full_name(f)) for f in self.plan.families)
        for family in self.plan.families:
            if family == 'CPU':
                info.update(cpu_info().describe())
            if family == 'GPU':
                info.update(facts.gpu_memory())
        return info
