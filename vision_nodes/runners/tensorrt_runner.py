"""TensorRT runner (backend ``tensorrt``): an engine built from the model's ONNX, on one GPU.

The engine comes from the artifact chain (``RunnerConfig.artifacts``: built from the model's
ONNX with the TensorRT Python API and cached, int8 calibrated there), and is loaded from the
verified bytes of its cache entry; this runner only loads and runs it.
Inference runs on device buffers allocated once at load for the largest input shape, on one
CUDA stream, with page-locked (pinned) host buffers on the other side of each copy, so the
copies are asynchronous DMA transfers; device memory, pinned memory and streams come from
cuda-python (see :mod:`..platform.cuda` for why not PyTorch). Rect inference: a
letterboxed model whose ONNX has dynamic height and width gets an engine with an
optimisation profile over every stride multiple up to its input_size, and
:meth:`prepare_shape` sets the execution context's input shape.

Written against the tensor-name API of TensorRT 10.x and 11.x (``num_io_tensors``,
``get_tensor_name``, ``set_input_shape``, ``set_tensor_address``, ``execute_async_v3``);
every TensorRT name used is checked against the real bindings of 10.3 (JetPack 6), the
latest 10.x and 11.x (``test/data/tensorrt_api.json``).
"""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..artifacts.cache import CacheError
from ..artifacts.tensorrt_log import log_route, tensorrt_logger
from ..artifacts.types import artifact_source, engine_file_name
from ..platform import cuda
from ..text import clip
from .base import Runner, RunnerConfig, RunnerError
from .tensorrt_buffers import TensorBuffers

#: Oldest TensorRT major version whose Python API this runner uses.
MIN_TENSORRT_MAJOR = 10
#: GPU facts: cuda-python first, so a TensorRT process does not import PyTorch for them.
_FACTS = ('cuda-python', 'torch')


def _import_tensorrt() -> ModuleType:
    return importlib.import_module('tensorrt')


def _tensorrt_reason() -> str | None:
    try:
        trt = _import_tensorrt()
    except ImportError:
        return ("TensorRT is not installed (pip install 'vision_nodes[cuda12]' or "
                "'vision_nodes[cuda13]' to match the driver's CUDA; on a Jetson, JetPack's "
                'python3-libnvinfer)')
    except Exception as exc:  # noqa: BLE001 - e.g. OSError for a missing libnvinfer
        return f'TensorRT cannot be imported: {clip(exc)}'
    version = str(getattr(trt, '__version__', '0'))
    try:
        major = int(version.split('.')[0])
    except ValueError:
        major = 0
    if major < MIN_TENSORRT_MAJOR:
        return (f'TensorRT {clip(version)} is too old: this runner needs TensorRT '
                f'{MIN_TENSORRT_MAJOR} or newer')
    return None


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
        self._device = 0
        self._thread: int | None = None  # the thread the GPU was last made current on
        self.gpu: cuda.GpuInfo | None = None
        self.engine_path: Path | None = None

    # -- availability and precision ---------------------------------------------------------

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        reason = _tensorrt_reason()
        if reason:
            return reason
        try:
            cuda.cuda_runtime()
        except ImportError:
            return ("cuda-python is not installed (pip install 'cuda-python<13' for CUDA 12, "
                    "'cuda-python>=13,<14' for CUDA 13; the cuda12, cuda13 and jetson extras "
                    'pin it): the TensorRT runner uses it for device memory and streams')
        return cuda.gpu_unavailable_reason(0, _FACTS)

    @classmethod
    def device_kinds(cls, config: RunnerConfig) -> tuple[str, ...]:
        """Take a GPU by index (default: the first)."""
        return ('default', 'gpu')

    @classmethod
    def auto_precision(cls, config: RunnerConfig) -> str:
        """fp16 on GPUs with tensor cores (compute capability 7.0 or newer), else fp32."""
        try:
            info = cuda.gpu_info(cls.check_device(config).gpu_index, _FACTS)
        except (cuda.CudaError, RunnerError):
            info = None
        return 'fp16' if info is not None and info.compute_capability >= (7, 0) else 'fp32'

    # -- loading ----------------------------------------------------------------------------

    def _fail(self, message: str) -> RunnerError:
        return RunnerError(f"backend 'tensorrt': {message}")

    def _select_gpu(self) -> cuda.GpuInfo:
        self._device = self.check_device(self.config).gpu_index
        reason = cuda.gpu_unavailable_reason(self._device, _FACTS)
        if reason:
            raise self._fail(reason)
        info = cuda.gpu_info(self._device, _FACTS)
        if info is None:
            raise self._fail(f'cannot read the facts of GPU {self._device}')
        cuda.set_device(self._rt, self._device)
        self._thread = threading.get_ident()
        return info

    def _load(self) -> None:
        reason = self.unavailable_reason('tensorrt')
        if reason:
            raise self._fail(reason)
        cfg = self.config
        self._trt = trt = _import_tensorrt()
        self._rt = cuda.cuda_runtime()
        self._buffers = TensorBuffers(self._rt)
        if cfg.precision not in ('fp32', 'fp16', 'int8'):
            raise self._fail(f"precision '{cfg.precision}' is not one of fp32, fp16, int8")
        try:
            self.gpu = self._select_gpu()
            entry = artifact_source(cfg.cache, cfg.artifacts, cfg.log).tensorrt_engine(
                cfg.manifest, cfg.weights, cfg.precision, cfg.calibration_dir, trt=trt,
                rt=self._rt, gpu=self.gpu)
            self.cache_hit = entry.hit
            self.engine_path = entry.file(engine_file_name(cfg.manifest.name, cfg.precision))
            data = entry.read_verified(self.engine_path.name)
            self.labels = json.loads(entry.read_verified('build.json')).get('labels')
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
        except (cuda.CudaError, CacheError) as exc:  # EngineBuildError is a CacheError
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
        self.output_names = [name for name, _ in self._outputs]
        dims = [int(d) for d in engine.get_tensor_shape(self._input)]
        self.dynamic_shapes = len(dims) == 4 and dims[2] == -1 and dims[3] == -1
        if len(dims) == 4 and dims[0] == -1:  # the profile's largest batch
            top = int(engine.get_tensor_profile_shape(self._input, 0)[2][0])
            self.max_batch = max(1, min(top, self.batch_limit(True)))
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
            if tensor.shape[0] != 1:
                self._set_shape(tuple(int(d) for d in tensor.shape))
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
