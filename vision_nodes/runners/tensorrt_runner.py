"""TensorRT runner (backend ``tensorrt``): loads the engine it is handed and runs it, on one GPU.

The GPU is decided before the runner exists (its facts in ``RunnerConfig.device_facts``) and
the engine is the artifact chain's (``RunnerConfig.artifact``: built from the model's ONNX and
cached, int8 calibrated there); the runner reads the verified bytes of its cache entry.
Inference runs on buffers allocated at load for the input shape and grown for larger ones,
on one CUDA stream (:class:`~.tensorrt_io.EngineIO`); device memory, pinned memory and streams
come from cuda-python (see :mod:`..platform.cuda` for why not PyTorch). Rect inference: an
engine built with an optimisation profile over every stride multiple up to input_size takes
the shape :meth:`prepare_shape` sets.

Where the pipeline asks for it (the task can hand the u8 image) the engine is built from the
u8-input graph and takes the letterboxed u8 (N, H, W, 3) image, the pre-processing
running on the GPU inside the engine: the host makes no float copy of the frame and a quarter
of the bytes is uploaded. ``supports_u8_input`` then says so, as the ONNX runner's does, and
the pipeline has the task hand that image (``takes_u8``). A model that cannot take it runs
on the float tensor (the artifact chain logs why).

Written against the tensor-name API of TensorRT 10.x and 11.x (``num_io_tensors``,
``get_tensor_name``, ``set_input_shape``, ``set_tensor_address``, ``execute_async_v3``);
every TensorRT name used is checked against the real bindings of 10.3 (JetPack 6), the
latest 10.x and 11.x (``test/data/tensorrt_api.json``).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts.cache import CacheError
from ..artifacts.tensorrt_log import log_route, tensorrt_logger
from ..artifacts.types import BUILD_FACTS, EngineArtifact
from ..images import U8_INPUT_ORDER
from ..platform import cuda
from . import tensorrt_plan
from .base import Runner, RunnerConfig, RunnerError
from .tensorrt_io import EngineIO


class TensorRTRunner(Runner):
    """Runs a TensorRT engine built (and cached) from the model's ONNX on an NVIDIA GPU."""

    backends = ('tensorrt',)

    def __init__(self, config: RunnerConfig) -> None:
        super().__init__(config)
        self._trt: Any = None
        self._rt: Any = None
        self._runtime: Any = None
        self._engine: Any = None
        self._io: EngineIO | None = None
        self._thread: int | None = None  # the thread the GPU was last made current on
        #: The GPU's facts, decided by the registry before the runner exists.
        self.gpu: cuda.GpuInfo | None = config.device_facts
        self._device = self.gpu.index if self.gpu is not None else 0
        self.engine_path: Path | None = None

    @property
    def supports_u8_input(self) -> bool:  # type: ignore[override]
        """When the loaded engine takes the u8 image (built from the u8-input graph)."""
        return self._io is not None and self._io.takes_u8

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
        try:
            self._use_device()
            self.cache_hit, self.engine_path = engine.entry.hit, engine.path
            data = engine.entry.read_verified(engine.name)
            self.labels = json.loads(engine.entry.read_verified(BUILD_FACTS)).get('labels')
            with log_route(cfg.log):
                self._runtime = trt.Runtime(tensorrt_logger(trt))
                self._engine = self._runtime.deserialize_cuda_engine(data)
            if self._engine is None:
                raise self._fail(f"TensorRT cannot load the engine '{self.engine_path}' "
                                 '(its messages above say why)')
            context = self._engine.create_execution_context()
            if context is None:
                raise self._fail('TensorRT cannot create an execution context (GPU memory?)')
            self._io = EngineIO(self._rt, context, self._fail)
            self._shape_limits(self._io.bind(self._engine, trt))
            self.output_names = self._io.output_names
            self._io.set_shape(self._io.image_shape(1, *cfg.manifest.input_size))
        except (cuda.CudaError, CacheError) as exc:
            self._release()
            raise self._fail(str(exc)) from exc
        except BaseException:
            self._release()
            raise

    def _shape_limits(self, dims: list[int]) -> None:
        """Set ``dynamic_shapes`` and ``max_batch`` from the input's dims and its profile.

        A free dimension is -1; how far it goes is the optimisation profile's (min, max): a
        dynamic model built with a fixed profile (rect off) takes input_size only.
        """
        if len(dims) != 4 or -1 not in dims:
            return
        low, _, high = (tuple(int(d) for d in s) for s in
                        self._engine.get_tensor_profile_shape(self._io.input_name, 0))
        hw = self._io.image_hw(tuple(dims))
        self.dynamic_shapes = hw == (-1, -1) and \
            self._io.image_hw(low) != self._io.image_hw(high)
        if dims[0] == -1:  # the profile's largest batch
            self.max_batch = max(1, min(high[0], self.batch_limit(True)))

    def blank_input(self, height: int, width: int) -> np.ndarray:
        """Return the warm-up's blank frame: the u8 image when the engine takes it."""
        if self._io is not None and self._io.takes_u8:
            return np.zeros(self._io.image_shape(1, height, width), np.uint8)
        return super().blank_input(height, width)

    def _use_device(self) -> None:
        """Make this runner's GPU current on the calling thread (CUDA's is per thread)."""
        thread = threading.get_ident()
        if thread != self._thread:
            cuda.set_device(self._rt, self._device)
            self._thread = thread

    def prepare_shape(self, shape: tuple[int, int]) -> None:
        """Set the execution context's input shape for (height, width) before such frames."""
        super().prepare_shape(shape)
        if self._io is None:
            raise RunnerError('runner is not loaded')
        try:
            self._use_device()
            self._io.set_shape(self._io.image_shape(1, int(shape[0]), int(shape[1])))
        except cuda.CudaError as exc:
            raise self._fail(str(exc)) from exc

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        """Run (N, 3, H, W) float tensors, or (N, H, W, 3) u8 images when the engine takes them."""
        if self._io is None:
            raise RunnerError('runner is not loaded')
        self._check_kind(tensor)
        if tuple(tensor.shape) != self._io.shape:
            self.prepare_shape(self._io.image_hw(tuple(tensor.shape)))
            if tensor.shape[0] != 1:
                self._io.set_shape(tuple(int(d) for d in tensor.shape))
        try:
            self._use_device()
            return self._io.run(tensor, self.config.log)
        except cuda.CudaError as exc:
            raise self._fail(str(exc)) from exc

    def _check_kind(self, tensor: np.ndarray) -> None:
        """Refuse an input of the other kind: the engine has one input type and layout."""
        u8 = tensor.dtype == np.uint8
        if u8 != self._io.takes_u8 or tensor.ndim != 4:
            takes = (f'the u8 (N, H, W, 3) {U8_INPUT_ORDER} image (pre-processing inside '
                     'the engine)') if self._io.takes_u8 else 'a float (N, 3, H, W) tensor'
            raise self._fail(f'this engine takes {takes}, not a {tensor.dtype} array of shape '
                             f'{tuple(tensor.shape)}: hand it what the task prepares')

    def _release(self) -> None:
        """Free buffers and the stream on this runner's GPU; drop the context, engine, runtime."""
        if self._io is not None:
            if self._io.holds_memory():
                try:
                    self._use_device()
                except cuda.CudaError:
                    pass
            self._io.release()  # the context goes before the engine it came from
            self._io = None
        self._engine = None
        self._runtime = None

    def _unload(self) -> None:
        self._release()

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info['device'] = f'cuda:{self._device}'
        if self._trt is not None:
            info['tensorrt'] = str(self._trt.__version__)
        gpu = cuda.gpu_info(self._device, tensorrt_plan.FACTS) if self._rt is not None \
            else self.gpu
        if gpu is not None:
            info['gpu'] = gpu.as_dict()
        info['engine_path'] = str(self.engine_path)
        shape = self._io.shape if self._io is not None else None
        info['input_shape'] = list(shape) if shape else None
        if self._io is not None:
            info['input'] = f'u8 NHWC {U8_INPUT_ORDER}, pre-processing in the engine' \
                if self._io.takes_u8 else 'float32 NCHW'
        info['dynamic_shapes'] = self.dynamic_shapes
        return info
