"""PyTorch runner: backends ``cpu``, ``cuda`` and ``rocm`` (one class, a device)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..loaders import load_torch_module
from ..platform.cpu import cpu_info
from .base import Runner, RunnerConfig, RunnerError


def _torch():
    import torch

    return torch


class TorchRunner(Runner):
    """Runs the PyTorch module itself on the CPU or a CUDA/ROCm GPU."""

    backends = ('cpu', 'cuda', 'rocm')

    def __init__(self, config: RunnerConfig) -> None:
        super().__init__(config)
        self._module: Any = None
        self._device: Any = None
        self._dtype: Any = None

    @classmethod
    def unavailable_reason(cls, backend: str) -> str | None:
        try:
            torch = _torch()
        except ImportError:
            return "PyTorch is not installed (pip install 'vision_nodes[torch]')"
        if backend == 'cpu':
            return None
        is_hip = getattr(torch.version, 'hip', None) is not None
        if backend == 'rocm' and not is_hip:
            return 'this PyTorch build has no ROCm (HIP) support'
        if backend == 'cuda' and is_hip:
            return 'this PyTorch build targets ROCm; use backend rocm'
        if not torch.cuda.is_available():
            return f'no {backend.upper()} GPU is visible to PyTorch'
        return None

    def _resolve_device(self):
        torch = _torch()
        backend, device = self.config.backend, self.config.device.strip()
        if backend == 'cpu':
            if device and device != 'cpu':
                raise RunnerError(f"backend 'cpu' cannot use device '{device}'")
            return torch.device('cpu')
        reason = self.unavailable_reason(backend)
        if reason:
            raise RunnerError(f"backend '{backend}': {reason}")
        # ROCm builds of PyTorch expose HIP devices under the 'cuda' device type.
        spec = device or 'cuda:0'
        if spec.isdigit():
            spec = f'cuda:{spec}'
        try:
            dev = torch.device(spec)
        except RuntimeError as exc:
            raise RunnerError(f"invalid device '{device}': {exc}") from exc
        if dev.type != 'cuda':
            raise RunnerError(f"backend '{backend}' needs a GPU device like 'cuda:0', "
                              f"not '{device}'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise RunnerError(f"device '{spec}' does not exist "
                              f'({torch.cuda.device_count()} GPU(s) visible)')
        return dev

    def _load(self) -> None:
        torch = _torch()
        cfg = self.config
        self._device = self._resolve_device()
        # Precisions are checked before a runner exists (registry.check_precision).
        self._dtype = torch.float16 if cfg.precision == 'fp16' else torch.float32
        module, self.labels = load_torch_module(cfg.manifest, cfg.weights, cfg.cache.root)
        self._module = module.to(self._device, self._dtype)
        # The module itself takes any input shape: rect inference, as in Ultralytics' predict.
        self.dynamic_shapes = True

    def infer(self, tensor: np.ndarray) -> list[np.ndarray]:
        if self._module is None:
            raise RunnerError('runner is not loaded')
        torch = _torch()
        with torch.inference_mode():
            x = torch.from_numpy(tensor).to(self._device, self._dtype, non_blocking=True)
            y = self._module(x)
            return [y.float().cpu().numpy()]

    def _unload(self) -> None:
        self._module = None
        if self._device is not None and self._device.type == 'cuda':
            _torch().cuda.empty_cache()

    def describe(self) -> dict[str, Any]:
        torch = _torch()
        info = super().describe()
        info['runtime'] = f'PyTorch {torch.__version__}'
        info['device'] = str(self._device)
        if self._device is not None and self._device.type == 'cpu':
            info['threads'] = torch.get_num_threads()
            info.update(cpu_info().describe())
        if self._device is not None and self._device.type == 'cuda':
            info['device_name'] = torch.cuda.get_device_name(self._device)
            info['memory_used'] = torch.cuda.memory_allocated(self._device)
            info['memory_reserved'] = torch.cuda.memory_reserved(self._device)
            info['memory_total'] = torch.cuda.get_device_properties(self._device).total_memory
        return info
