"""What the ``tensorrt`` backend will run on, decided before its runner exists.

Whether TensorRT and cuda-python can be used here, what ``precision: auto`` means on the
chosen GPU (fp16 with tensor cores), and the facts of that GPU, which key the engine the
artifact chain builds for it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..platform import cuda
from ..text import clip
from .base import Runner, RunnerConfig, RunnerError

#: Oldest TensorRT major version whose Python API the runner uses.
MIN_TENSORRT_MAJOR = 10
#: GPU facts: cuda-python first, so a TensorRT process does not import PyTorch for them.
FACTS = ('cuda-python', 'torch')


def import_tensorrt() -> ModuleType:
    """Return the ``tensorrt`` module (ImportError if absent)."""
    return importlib.import_module('tensorrt')


def _tensorrt_reason() -> str | None:
    try:
        trt = import_tensorrt()
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


def unavailable_reason() -> str | None:
    """None when TensorRT, cuda-python and a GPU are here, else a sentence saying why not."""
    reason = _tensorrt_reason()
    if reason:
        return reason
    try:
        cuda.cuda_runtime()
    except ImportError:
        return ("cuda-python is not installed (pip install 'cuda-python<13' for CUDA 12, "
                "'cuda-python>=13,<14' for CUDA 13; the cuda12, cuda13 and jetson extras "
                'pin it): the TensorRT runner uses it for device memory and streams')
    return cuda.gpu_unavailable_reason(0, FACTS)


def auto_precision(config: RunnerConfig) -> str:
    """fp16 on GPUs with tensor cores (compute capability 7.0 or newer), else fp32."""
    try:
        info = cuda.gpu_info(Runner.check_device(config).gpu_index, FACTS)
    except (cuda.CudaError, RunnerError):
        info = None
    return 'fp16' if info is not None and info.compute_capability >= (7, 0) else 'fp32'


def precision_unavailable(config: RunnerConfig) -> str | None:
    """None: every precision of the table runs on a GPU TensorRT supports."""
    return None


def plan(config: RunnerConfig) -> cuda.GpuInfo:
    """Return the facts of the GPU ``device`` names, or a RunnerError saying why it cannot run."""
    index = Runner.check_device(config).gpu_index
    reason = cuda.gpu_unavailable_reason(index, FACTS)
    if reason:
        raise RunnerError(f"backend 'tensorrt': {reason}")
    info = cuda.gpu_info(index, FACTS)
    if info is None:
        raise RunnerError(f"backend 'tensorrt': cannot read the facts of GPU {index}")
    return info


def artifact_options(config: RunnerConfig) -> dict[str, cuda.GpuInfo]:
    """Return the artifact options: the engine is built for the planned GPU."""
    return {'gpu': config.device_facts}
