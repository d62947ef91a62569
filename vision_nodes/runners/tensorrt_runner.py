"""TensorRT runner (backend ``tensorrt``): loads the engine it is handed and runs it, on one GPU.

The GPU is decided before the runner exists (its facts in ``RunnerConfig.device_facts``) and
the engine is the artifact chain's (``RunnerConfig.artifact``: built from the model's ONNX and
cached, int8 calibrated there); the runner reads the verified bytes of its cache entry.
Inference runs on device buffers allocated once at load for the largest input shape, on one
CUDA stream, with page-locked (pinned) host buffers on the other side of each copy, so the
copies are asynchronous DMA transfers; device memory, pinned memory and streams come from
cuda-python (see :mod:`..platform.cuda` for why not PyTorch). Rect inference: an engine built
with an optimisation profile over every stride multiple up to input_size takes the shape
:meth:`prepare_shape` sets.

Written against the tensor-name API of TensorRT 10.x and 11.x (``num_io_tensors``,
``get_tensor_name``, ``set_input_shape``, ``set_tensor_address``, ``execute_async_v3``);
every TensorRT name used is checked against the real bindings of 10.3 (JetPack 6), the
latest 10.x and 11.x (``test/data/tensorrt_api.json``).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..artifacts.cache import CacheError
from ..artifacts.tensorrt_log import log_route, tensorrt_logger
from ..artifacts.types import EngineArtifact
from ..platform import cuda
from ..text import clip
from . import tensorrt_plan
from .base import Runner, RunnerConfig, RunnerError
from .tensorrt_buffers import TensorBuffers

#: GPU facts: cuda-python first, so a TensorRT process does not import PyTorch for them.
_FACTS = tensorrt_plan.FACTS


class TensorRTRunner(Runner):
    """Runs a TensorRT engine built (and cached) from the model's ONNX on an NVIDIA GPU."""

    backends = ('tensorrt',)

    def __init__(self, config: RunnerConfig) -> None:
        super().__init__(config)
        self._trt: Any = None
        self._rt: Any = None
        self._logger: Any = None
        self._runtime: Any = None
        self._engine: Any = None
        self._context: Any = None
        self._stream: Any = None
        self._input = ''
        self._input_dtype: Any = np.float32
        self._outputs: list[tuple[str, Any]] = []  # (name, numpy dtype), engine order
        self._buffers = TensorBuffers(None)
        self._shape: tuple[int, ...] | None = None
        self._output_shapes: dict[str, tuple[int, ...]] = {}
        self._thread: int | None = None  # the thread the GPU was last made current on
        #: The GPU's facts, decided by the registry before the runner exists.
        self.gpu: cuda.GpuInfo | None = config.device_facts
        self._device = self.gpu.index if self.gpu is not None else 0
        self.engine_path: Path | None = None

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        return tensorrt_plan.unavailable_reason()

    def _fail(self, message: str) -> RunnerError:
        return RunnerError(f"backend 'tensorrt': {message}")

    def _load(self) -> None:
        cfg, engine = self.config, self.config.artifact
        if self.gpu is None or not isinstance(engine, EngineArtifact):
            raise self._fail('the runner loads a planned engine: create it through '
                             'vision_nodes.pipeline.create_runner')
        self._trt = trt = tensorrt_plan.import_tensorrt()
        self._rt = cuda.cuda_runtime()
        self._buffers = TensorBuffers(self._rt)
        try:
            self._use_device()
            self.cache_hit, self.engine_path = engine.entry.hit, engine.path
            data = engine.entry.read_verified(engine.name)
            self.labels = json.loads(engine.entry.read_verified('build.json')).get('labels')
            self._logger = tensorrt_logger(trt)
            with log_route(cfg.log):
                self._runtime = trt.Runtime(self._logger)
                self._engine = self._runtime.deserialize_cuda_engine(data)
            if self._engine is None:
                raise self._fail(f"TensorRT cannot load the engine '{self.engine_path}' "
                                 '(its messages above say why)')
            self._context = self._engine.create_execution_context()
            if self._context is None:
                raise self._fail('TensorRT cannot create an execution context (GPU memory?)')
            self._bind_tensors(trt)
        except (cuda.CudaError, CacheError) as exc:
            self._release()
            raise self._fail(str(exc)) from exc
        except BaseException:
            self._release()
            raise

    def _bind_tensors(self, trt: ModuleType) -> None:
        """Find the engine's input and outputs; allocate device buffers for the largest shape."""
        engine = self._engine
        inputs, self._outputs = [], []
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                inputs.append((name, dtype))
            else:
                self._outputs.append((name, dtype))
        if len(inputs) != 1 or not self._outputs:
            raise self._fail(f'the engine has {len(inputs)} inputs and {len(self._outputs)} '
                             'outputs; this runner serves one image input')
        self._input, self._input_dtype = inputs[0]
        dims = [int(d) for d in engine.get_tensor_shape(self._input)]
        self.dynamic_shapes = len(dims) == 4 and dims[2] == -1 and dims[3] == -1
        self._stream = cuda.stream_create(self._rt)
        height, width = self.config.manifest.input_size
        self._set_shape((1, 3, height, width))

    def _set_shape(self, shape: tuple[int, ...]) -> None:
        """Set the input shape on the context; (re)allocate buffers that became too small."""
        if not self._context.set_input_shape(self._input, shape):
            raise self._fail(f'the engine does not accept input shape {shape} (outside the '
                             'optimisation profile it was built with)')
        shapes = {self._input: (tuple(shape), self._input_dtype)}
        for name, dtype in self._outputs:
            out_shape = tuple(int(d) for d in self._context.get_tensor_shape(name))
            if any(d < 0 for d in out_shape):
                raise self._fail(f"output '{clip(name)}' has no concrete shape for input "
                                 f'{shape}')
            shapes[name] = (out_shape, dtype)
            self._output_shapes[name] = out_shape
        for name, (tensor_shape, dtype) in shapes.items():
            moved = self._buffers.reserve(
                name, int(np.prod(tensor_shape)) * np.dtype(dtype).itemsize)
            if moved is not None:
                self._context.set_tensor_address(name, moved)
        self._shape = tuple(shape)

    def _use_device(self) -> None:
        """Make this runner's GPU current on the calling thread (CUDA's is per thread)."""
        thread = threading.get_ident()
        if thread != self._thread:
            cuda.set_device(self._rt, self._device)
            self._thread = thread

    def prepare_shape(self, shape: tuple[int, int]) -> None:
        """Set the execution context's input shape for (height, width) before such frames."""
        super().prepare_shape(shape)
        if self._context is None:
            raise RunnerError('runner is not loaded')
        try:
            self._use_device()
            self._set_shape((1, 3, int(shape[0]), int(shape[1])))
        except cuda.CudaError as exc:
            raise self._fail(str(exc)) from exc

    # -- inference --------------------------------------------------------------------------

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        if self._context is None:
            raise RunnerError('runner is not loaded')
        if tuple(tensor.shape) != self._shape:
            self.prepare_shape(tuple(tensor.shape[2:]))
        rt, stream = self._rt, self._stream
        # The pinned input buffer takes the values (any strides, any float dtype) in one copy.
        host = self._buffers.host(self._input, self._shape, self._input_dtype)
        host[...] = tensor
        try:
            self._use_device()
            cuda.copy_to_device(rt, self._buffers.device(self._input), host, stream)
            with log_route(self.config.log):
                ran = self._context.execute_async_v3(int(stream))
            if not ran:
                raise self._fail('TensorRT failed to run the engine (its messages above say '
                                 'why)')
            outputs = []
            for name, dtype in self._outputs:
                out = self._buffers.host(name, self._output_shapes[name], dtype)
                cuda.copy_to_host(rt, out, self._buffers.device(name), stream)
                outputs.append(out)
            cuda.stream_synchronize(rt, stream)
        except cuda.CudaError as exc:
            raise self._fail(str(exc)) from exc
        # Copies: the pinned buffers are overwritten by the next frame.
        return [o.astype(np.float32, copy=True) for o in outputs]

    # -- release ----------------------------------------------------------------------------

    def _release(self) -> None:
        """Free device and pinned buffers and the stream; drop the context, engine, runtime."""
        rt = self._rt
        if rt is not None and (self._buffers or self._stream is not None):
            try:
                self._use_device()
            except cuda.CudaError:
                pass
        self._buffers.release()
        if self._stream is not None:
            try:
                cuda.stream_destroy(rt, self._stream)
            except cuda.CudaError:
                pass
            self._stream = None
        self._context = None  # before the engine it came from
        self._engine = None
        self._runtime = None
        self._shape = None
        self._output_shapes.clear()

    def _unload(self) -> None:
        self._release()

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info['device'] = f'cuda:{self._device}'
        if self._trt is not None:
            info['tensorrt'] = str(self._trt.__version__)
        gpu = cuda.gpu_info(self._device, _FACTS) if self._rt is not None else self.gpu
        if gpu is not None:
            info['gpu'] = gpu.as_dict()
        info['engine_path'] = str(self.engine_path)
        info['input_shape'] = list(self._shape) if self._shape else None
        info['dynamic_shapes'] = self.dynamic_shapes
        return info
