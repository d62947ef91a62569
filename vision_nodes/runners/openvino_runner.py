"""OpenVINO runner (backend ``openvino``): loads the IR it is handed and runs it.

Everything is decided before the runner exists: the device, the precision and the compile
settings (:class:`~.openvino_plan.OpenVinoPlan`, in ``RunnerConfig.device_facts``), and the IR
(``RunnerConfig.artifact``: converted, quantized for int8, or the manifest's own, from the
artifact chain). The runner compiles it for one input shape at a time (static shapes run
faster than a dynamic compile) and runs it.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts.labels import labels_from_rt_info
from ..artifacts.types import OpenVinoIr
from ..platform import openvino as facts
from ..platform.cpu import cpu_info
from ..text import clip
from .base import Runner, RunnerConfig, RunnerError

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
        #: Compiled model and infer request per input shape (height, width).
        self._compiled: collections.OrderedDict[tuple[int, int], tuple[Any, Any]] = \
            collections.OrderedDict()
        #: Per compiled shape, requests for a batch's frames side by side (plan.streams > 1).
        self._queues: dict[Any, Any] = {}
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
            raise RunnerError(f"OpenVINO cannot read the model '{clip(str(self.model_path))}': "
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
        self._properties = self.plan.properties(ir.compile_cache)
        self.labels = ir.labels if ir.labels is not None else labels_from_rt_info(model)
        names = ', '.join(f'{f} ({facts.full_name(f)})' for f in self.plan.families)
        cfg.log(f"openvino: device {self.plan.device.name}: {names}; precision "
                f"'{cfg.precision}' runs as {self._precision_words()}")

    def _precision_words(self) -> str:
        if self.quantized:
            return f'int8 in the quantized layers, {self.plan.inference_words()} elsewhere'
        return self.plan.inference_words()

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
        side_by_side = self.plan.streams > 1  # a batch's frames run one per stream
        if self.dynamic_shapes or self.max_batch > 1:
            import openvino as ov

            batch = ov.Dimension(1, self.max_batch) if self.max_batch > 1 and \
                not side_by_side else 1
            size = shape if self.dynamic_shapes else self.config.manifest.input_size
            dims = [int(size[0]), int(size[1])]
            model.reshape({model.inputs[0]: ov.PartialShape(
                [batch, *dims, 3] if u8 else [batch, 3, *dims])})
        device = self.plan.device.name
        try:
            compiled = facts.core().compile_model(model, device, self._properties)
        except RuntimeError as exc:
            raise RunnerError(f'OpenVINO cannot compile the model for {device}: '
                              f'{clip(str(exc), 400)}') from exc
        request = compiled.create_infer_request()
        if side_by_side:  # single frames keep the one-stream model using every core
            self._queues[key] = self._stream_queue(model, device)
        self._compiled[key] = (compiled, request)
        while len(self._compiled) > MAX_COMPILED_SHAPES:
            self._queues.pop(self._compiled.popitem(last=False)[0], None)
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
        shape = (int(size[0]), int(size[1]))
        request = self._compiled_for(shape, u8)
        queue = self._queues.get((*shape, 'u8') if u8 else shape)
        if queue is not None and tensor.shape[0] > 1:
            return self._side_by_side(queue, tensor)
        result = request.infer({0: tensor}, share_inputs=True, share_outputs=False)
        return list(result.to_tuple())

    def _stream_queue(self, model: Any, device: str) -> Any:
        """Compile ``model`` once more on the plan's streams; return its request queue."""
        import openvino as ov

        try:
            compiled = facts.core().compile_model(
                model, device, self.plan.properties(self.config.artifact.compile_cache,
                                                    self.plan.streams))
        except RuntimeError as exc:
            raise RunnerError(f'OpenVINO cannot compile the model for {device} on '
                              f'{self.plan.streams} streams: {clip(str(exc), 400)}') from exc
        return ov.AsyncInferQueue(compiled, self.plan.streams)

    @staticmethod
    def _side_by_side(queue: Any, tensor: np.ndarray) -> list[np.ndarray]:
        """Run each frame of ``tensor`` as its own request, the plan's streams side by side."""
        frames: list[Any] = [None] * tensor.shape[0]

        def done(request: Any, index: int) -> None:
            frames[index] = [out.data.copy() for out in request.output_tensors]
        queue.set_callback(done)
        for index in range(tensor.shape[0]):
            queue.start_async({0: tensor[index:index + 1]}, index, share_inputs=True)
        queue.wait_all()
        return [np.concatenate([frame[i] for frame in frames]) for i in range(len(frames[0]))]

    def _unload(self) -> None:
        self._queues.clear()
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
