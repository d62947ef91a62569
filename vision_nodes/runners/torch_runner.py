"""PyTorch runner: backends ``cpu``, ``cuda`` and ``rocm`` (one class, a device).

On a GPU, models other than Ultralytics ones run through ``torch.compile`` when
``RunnerConfig.torch_compile`` is set: compiled and warmed up in ``load`` (at configure), so
no frame pays for it; if compiling fails the eager module runs and the log says why.

On a GPU the frame goes up as the task's letterboxed u8 image and is converted there, and
detections are decoded there (:mod:`.torch_device`); the eager module is replayed as CUDA
graphs (:mod:`.torch_graphs`). ``RunnerConfig.device_io`` and ``cuda_graphs`` turn them off.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

import numpy as np

from ..loaders import load_torch_module
from ..platform.cpu import cpu_info
from ..text import clip, show
from .base import Runner, RunnerConfig, RunnerError
from .torch_device import DeviceInput, DeviceOutput
from .torch_graphs import CUDA_LOCK, GraphReplay

#: Why Ultralytics models run eagerly (logged once per load).
ULTRALYTICS_COMPILE_REASON = (
    'torch.compile skipped for this Ultralytics model: its heads keep Python state that '
    'their forward updates (anchor and stride caches, shape checks), on which compiled graphs '
    'break or recompile; it runs eagerly')


#: Device files of NVIDIA (desktop and Jetson) and AMD (ROCm) GPU drivers: without any of them
#: no GPU backend can work, and PyTorch need not be imported to say so.
_GPU_DEVICES = ('/dev/nvidiactl', '/proc/driver/nvidia', '/dev/nvhost-ctrl-gpu',
                '/dev/nvgpu', '/dev/kfd')


def _torch():
    import torch

    return torch


class TorchRunner(Runner):
    """Runs the PyTorch module itself on the CPU or a CUDA/ROCm GPU."""

    backends = ('cpu', 'cuda', 'rocm')
    #: Device types on which ``torch_compile`` compiles ('cuda' covers ROCm builds too).
    #: Tests add 'cpu' to check compiled-vs-eager parity where there is no GPU.
    compile_device_types: tuple[str, ...] = ('cuda',)
    #: Device types on which frames are converted and detections decoded on the device
    #: (``device_io``). Tests add 'cpu' to check them against the host's where there is no GPU.
    device_io_types: tuple[str, ...] = ('cuda',)
    #: Device types on which the eager module is replayed as CUDA graphs (``cuda_graphs``).
    graph_device_types: tuple[str, ...] = ('cuda',)

    def __init__(self, config: RunnerConfig) -> None:
        super().__init__(config)
        self._module: Any = None
        self._device: Any = None
        self._dtype: Any = None
        #: True when the module in use is the torch.compile'd one.
        self.compiled = False
        self._input: DeviceInput | None = None
        self._graphs: GraphReplay | None = None

    @property
    def supports_u8_input(self) -> bool:  # type: ignore[override]
        """On a GPU (``device_io``): the u8 image goes up and is converted there."""
        return self._device_io()

    @property
    def supports_device_outputs(self) -> bool:  # type: ignore[override]
        """On a GPU (``device_io``, torchvision's NMS at hand): outputs stay there."""
        return self._device_io() and importlib.util.find_spec('torchvision') is not None

    def _device_io(self) -> bool:
        return (self.config.device_io and self._device is not None
                and self._device.type in self.device_io_types)

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        # Answered without importing PyTorch where possible: importing it takes long and
        # holds memory that a process running another backend would keep.
        if 'torch' not in sys.modules and importlib.util.find_spec('torch') is None:
            return "PyTorch is not installed (pip install 'vision_nodes[torch]')"
        if backend == 'cpu':
            return None
        if 'torch' not in sys.modules and not any(os.path.exists(p) for p in _GPU_DEVICES):
            kind = {'cuda': 'CUDA', 'rocm': 'ROCm'}.get(backend, backend)
            return f'no {kind} GPU is visible (no GPU driver device on this machine)'
        try:
            torch = _torch()
        except ImportError:
            return "PyTorch is not installed (pip install 'vision_nodes[torch]')"
        is_hip = getattr(torch.version, 'hip', None) is not None
        if backend == 'rocm' and not is_hip:
            return 'this PyTorch build has no ROCm (HIP) support'
        if backend == 'cuda' and is_hip:
            return 'this PyTorch build targets ROCm; use backend rocm'
        if not torch.cuda.is_available():
            return f'no {backend.upper()} GPU is visible to PyTorch'
        return None

    @classmethod
    def device_kinds(cls, config: RunnerConfig) -> tuple[str, ...]:
        """Backend cpu: the CPU; cuda and rocm: a GPU by index (default: the first)."""
        return ('default', 'cpu') if config.backend == 'cpu' else ('default', 'gpu')

    def _resolve_device(self):
        torch = _torch()
        backend = self.config.backend
        device = self.check_device(self.config)
        if backend == 'cpu':
            return torch.device('cpu')
        reason = self.unavailable_reason(backend)
        if reason:
            raise RunnerError(f"backend '{backend}': {reason}")
        # ROCm builds of PyTorch expose HIP devices under the 'cuda' device type.
        count = torch.cuda.device_count()
        if device.gpu_index >= count:
            raise RunnerError(f'parameter device {show(self.config.device, 40)}: GPU '
                              f'{device.gpu_index} does not exist ({count} GPU(s) visible)')
        return torch.device('cuda', device.gpu_index)

    def _load(self) -> None:
        torch = _torch()
        cfg = self.config
        self._device = self._resolve_device()
        # Precisions are checked before a runner exists (registry.check_precision).
        self._dtype = torch.float16 if cfg.precision == 'fp16' else torch.float32
        module, self.labels = load_torch_module(cfg.manifest, cfg.weights, cfg.cache.root)
        self._module = self._maybe_compile(module.to(self._device, self._dtype))
        # The eager module takes any input shape (rect inference, as in Ultralytics' predict);
        # a compiled one is specialised to its input size.
        self.dynamic_shapes = not self.compiled
        self.max_batch = self.batch_limit(not self.compiled)
        self._input = DeviceInput(self._device, self._dtype, cfg.manifest.preprocessing)
        if cfg.cuda_graphs and not self.compiled \
                and self._device.type in self.graph_device_types:
            self._graphs = GraphReplay(self._forward, self._device, self._graph_api(),
                                       cfg.log, cfg.manifest.name)

    def _graph_api(self) -> Any:
        """``torch.cuda``: CUDAGraph, graph, Stream, stream, current_stream."""
        return _torch().cuda

    def _forward(self, x: Any) -> Any:
        """Run the network on a device tensor from :meth:`DeviceInput.stage` (u8 or float)."""
        return self._module(self._input.convert(x))

    def _maybe_compile(self, module: Any) -> Any:
        """Return the compiled and warmed-up module, or ``module`` itself (eager).

        Compilation happens on the first call, so the warm-up call is made here: a model that
        fails to compile (no C++ compiler, an unsupported operation) is found at load time and
        runs eagerly, with a warning in the log.
        """
        cfg = self.config
        self.compiled = False
        if not cfg.torch_compile or self._device.type not in self.compile_device_types:
            return module
        if cfg.manifest.architecture == 'ultralytics':
            cfg.log(ULTRALYTICS_COMPILE_REASON)
            return module
        torch = _torch()
        height, width = cfg.manifest.input_size
        example = torch.zeros(1, 3, height, width, device=self._device, dtype=self._dtype)
        start = time.monotonic()
        try:
            compiled = torch.compile(module, dynamic=False)
            with torch.inference_mode():
                compiled(example)
        except Exception as exc:  # noqa: BLE001 - compilers fail in many ways; eager still runs
            cfg.log(f"warning: torch.compile failed for model '{clip(cfg.manifest.name)}' "
                    f'({type(exc).__name__}: {clip(str(exc).strip())}); running it eagerly '
                    '(set use_torch_compile to false to skip compiling)')
            return module
        cfg.log(f"torch.compile: model '{clip(cfg.manifest.name)}' compiled and warmed up in "
                f'{time.monotonic() - start:.1f} s')
        self.compiled = True
        return compiled

    def prepare_shape(self, shape: tuple[int, int]) -> None:
        """Capture the CUDA graph for frames of ``shape`` now, so no frame waits for it."""
        super().prepare_shape(shape)
        if self._graphs is None or self._graphs.failed:
            return
        height, width = int(shape[0]), int(shape[1])
        blank = (np.zeros((1, height, width, 3), np.uint8) if self.takes_u8
                 else np.zeros((1, 3, height, width), np.float32))
        with _torch().inference_mode():
            self._graphs.run(self._input.stage(blank), (height, width))

    def input_buffer(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Return, on a GPU, the pinned staging buffer: frames are written where they go up."""
        if self._input is None:
            return super().input_buffer(shape, dtype)
        return self._input.host_buffer(shape, dtype)

    def infer(self, tensor: np.ndarray) -> list[Any]:
        """Run the float tensor, or the u8 image (``takes_u8``); synchronised on return."""
        if self._module is None:
            raise RunnerError('runner is not loaded')
        torch = _torch()
        with torch.inference_mode():
            staged = self._input.stage(tensor)
            y = None
            if self._graphs is not None:
                y = self._graphs.run(staged, DeviceInput.network_shape(tensor))
            if y is None:
                y = self._forward(staged.to(self._device, non_blocking=True))
            outputs = y if isinstance(y, tuple) else (y,)
            if self.device_outputs:
                # A copy: the next replay of a graph overwrites its captured outputs.
                outputs = tuple(t.to(torch.float32, copy=True) for t in outputs)
                if self._device.type == 'cuda':
                    # This thread's stream only: a device-wide synchronize fails while
                    # another model captures a CUDA graph on another thread (and ends it).
                    torch.cuda.current_stream(self._device).synchronize()
                return [DeviceOutput(t) for t in outputs]
            return [t.float().cpu().numpy() for t in outputs]

    def _unload(self) -> None:
        self._module = None
        self._graphs = self._input = None
        if self._device is not None and self._device.type == 'cuda':
            with CUDA_LOCK:  # frees device-wide: never during another model's capture
                _torch().cuda.empty_cache()

    def describe(self) -> dict[str, Any]:
        torch = _torch()
        info = super().describe()
        info['runtime'] = f'PyTorch {torch.__version__}'
        info['device'] = str(self._device)
        info['torch_compile'] = self.compiled
        info['input'] = 'u8 image, converted on the device' if self.takes_u8 \
            else 'float32 tensor'
        info['cuda_graphs'] = self._graphs is not None and not self._graphs.failed
        if self._device is not None and self._device.type == 'cpu':
            info['threads'] = torch.get_num_threads()
            info.update(cpu_info().describe())
        if self._device is not None and self._device.type == 'cuda':
            info['device_name'] = torch.cuda.get_device_name(self._device)
            info['memory_used'] = torch.cuda.memory_allocated(self._device)
            info['memory_reserved'] = torch.cuda.memory_reserved(self._device)
            info['memory_total'] = torch.cuda.get_device_properties(self._device).total_memory
        return info
