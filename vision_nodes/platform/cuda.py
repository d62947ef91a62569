"""NVIDIA GPU facts and the little CUDA runtime the TensorRT runner needs.

GPU facts (name, compute capability, memory) come from ``torch.cuda`` when PyTorch sees the
GPU, else from cuda-python's runtime bindings; without either, or without a GPU, they are
None and :func:`gpu_unavailable_reason` says why. They feed the TensorRT engine's cache key
(an engine only runs on the GPU model and TensorRT version it was built for) and the
``describe()`` of GPU runners.

Device memory and streams use cuda-python (``cuda.bindings.runtime``, or ``cuda.cudart`` in
releases before 12.6) rather than PyTorch: it is a thin binding of the CUDA runtime that a
TensorRT deployment can install without PyTorch's gigabytes, it is what NVIDIA's TensorRT
samples use, and memory freed through it goes back to the driver at once (PyTorch's caching
allocator keeps it until ``empty_cache``).
"""

from __future__ import annotations

import ctypes
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Sequence

import numpy as np

#: Where GPU facts may come from, in the default order of preference.
FACT_SOURCES = ('torch', 'cuda-python')


class CudaError(RuntimeError):
    """A CUDA call failed; the message says which and why."""


@dataclass(frozen=True)
class GpuInfo:
    """Facts about one NVIDIA (or ROCm, through PyTorch) GPU."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    memory_total: int  # bytes
    memory_used: int | None  # bytes in use on the device (all processes), None if unknown
    source: str  # 'torch' or 'cuda-python'

    @property
    def sm(self) -> str:
        """Compute capability as 'major.minor' (e.g. '8.6')."""
        return f'{self.compute_capability[0]}.{self.compute_capability[1]}'

    def as_dict(self) -> dict[str, Any]:
        """Plain values for logs, ``describe()`` and cache keys."""
        return {'index': self.index, 'name': self.name, 'compute_capability': self.sm,
                'memory_total': self.memory_total, 'memory_used': self.memory_used,
                'source': self.source}


def cuda_runtime() -> ModuleType:
    """Return cuda-python's runtime module; ImportError with the install hint if absent."""
    for name in ('cuda.bindings.runtime', 'cuda.cudart'):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError('cuda-python is not installed (the cuda12, cuda13 and jetson extras '
                      'install the build for your CUDA)')


def _error_text(rt: ModuleType, err: Any) -> str:
    try:
        _, text = rt.cudaGetErrorString(err)
        return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # noqa: BLE001 - the message is a courtesy; the code is enough
        return str(err)


def call(rt: ModuleType, func: str, *args: Any) -> Any:
    """Call ``rt.func(*args)``; return its value(s) after the error code, CudaError if failed.

    cuda-python returns ``(cudaError_t, *values)``; one value comes back bare, none as None.
    """
    result = getattr(rt, func)(*args)
    err, values = result[0], result[1:]
    if err != rt.cudaError_t.cudaSuccess:
        raise CudaError(f'{func} failed: {_error_text(rt, err)}')
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _torch_cuda() -> Any:
    """``torch.cuda`` when PyTorch is installed and sees a GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    try:
        return torch.cuda if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - a broken driver reads as no GPU
        return None


def _torch_count() -> tuple[int, str]:
    cuda = _torch_cuda()
    if cuda is None:
        return 0, 'PyTorch is not installed or sees no GPU'
    return cuda.device_count(), ''


def _cudart_count() -> tuple[int, str]:
    try:
        rt = cuda_runtime()
    except ImportError as exc:
        return 0, str(exc)
    try:
        return int(call(rt, 'cudaGetDeviceCount')), ''
    except CudaError as exc:
        return 0, f'cuda-python: {exc}'


def device_count(prefer: Sequence[str] = FACT_SOURCES) -> tuple[int, str]:
    """Return (number of visible GPUs, why none when 0) from the first source that sees one."""
    reasons = []
    for source in prefer:
        count, reason = (_torch_count if source == 'torch' else _cudart_count)()
        if count:
            return count, ''
        reasons.append(reason)
    return 0, '; '.join(r for r in reasons if r)


def _torch_info(index: int) -> GpuInfo | None:
    cuda = _torch_cuda()
    if cuda is None or index >= cuda.device_count():
        return None
    props = cuda.get_device_properties(index)
    try:
        free, total = cuda.mem_get_info(index)
        used: int | None = int(total) - int(free)
    except Exception:  # noqa: BLE001 - memory use is optional
        used = None
    return GpuInfo(index, str(props.name), (int(props.major), int(props.minor)),
                   int(props.total_memory), used, 'torch')


def _cudart_info(index: int) -> GpuInfo | None:
    try:
        rt = cuda_runtime()
        if index >= int(call(rt, 'cudaGetDeviceCount')):
            return None
        props = call(rt, 'cudaGetDeviceProperties', index)
    except (ImportError, CudaError):
        return None
    name = props.name
    name = name.split(b'\0', 1)[0].decode(errors='replace') if isinstance(name, bytes) \
        else str(name)
    used: int | None = None
    try:
        previous = call(rt, 'cudaGetDevice')
        call(rt, 'cudaSetDevice', index)
        try:
            free, total = call(rt, 'cudaMemGetInfo')
            used = int(total) - int(free)
        finally:
            call(rt, 'cudaSetDevice', previous)
    except CudaError:
        pass
    return GpuInfo(index, name, (int(props.major), int(props.minor)),
                   int(props.totalGlobalMem), used, 'cuda-python')


def gpu_info(index: int = 0, prefer: Sequence[str] = FACT_SOURCES) -> GpuInfo | None:
    """Facts about GPU ``index`` from the first source in ``prefer`` that sees it, else None.

    The TensorRT runner prefers cuda-python (which it needs anyway), so a TensorRT process does
    not import PyTorch just to read a GPU's name.
    """
    for source in prefer:
        info = (_torch_info if source == 'torch' else _cudart_info)(index)
        if info is not None:
            return info
    return None


def gpu_unavailable_reason(index: int = 0, prefer: Sequence[str] = FACT_SOURCES
                           ) -> str | None:
    """None when GPU ``index`` is visible, else a sentence saying why it is not."""
    count, reason = device_count(prefer)
    if count == 0:
        return f'no NVIDIA GPU is visible ({reason})' if reason else 'no NVIDIA GPU is visible'
    if index >= count:
        return f'GPU {index} does not exist ({count} GPU(s) visible)'
    return None


# Device memory and streams (cuda-python). Pointers and streams are plain handles; the caller
# frees what it allocates (the TensorRT runner at unload, the calibrator after the build).

def set_device(rt: ModuleType, index: int) -> None:
    """Make GPU ``index`` current for this thread (allocations and streams go there)."""
    call(rt, 'cudaSetDevice', index)


def malloc(rt: ModuleType, nbytes: int) -> int:
    """Allocate ``nbytes`` of device memory; return its address."""
    return int(call(rt, 'cudaMalloc', max(1, int(nbytes))))


def free(rt: ModuleType, pointer: int) -> None:
    """Free device memory from :func:`malloc`."""
    call(rt, 'cudaFree', pointer)


def malloc_host(rt: ModuleType, nbytes: int) -> int:
    """Allocate ``nbytes`` of page-locked (pinned) host memory; return its address.

    Copies between pinned memory and the device are true DMA transfers that
    ``cudaMemcpyAsync`` queues on the stream; from ordinary (pageable) memory CUDA first
    stages them through a pinned buffer of its own, synchronously.
    """
    return int(call(rt, 'cudaMallocHost', max(1, int(nbytes))))


def free_host(rt: ModuleType, pointer: int) -> None:
    """Free pinned host memory from :func:`malloc_host`."""
    call(rt, 'cudaFreeHost', pointer)


def host_array(pointer: int, shape: Sequence[int], dtype: Any) -> np.ndarray:
    """Return a NumPy array of ``shape`` over host memory at ``pointer`` (no copy).

    The caller keeps the memory alive (and unchanged while results are read) for as long
    as the array is used.
    """
    dtype = np.dtype(dtype)
    count = int(np.prod(shape)) if len(shape) else 1
    buffer = (ctypes.c_byte * (count * dtype.itemsize)).from_address(int(pointer))
    return np.frombuffer(buffer, dtype=dtype, count=count).reshape(tuple(shape))


def stream_create(rt: ModuleType) -> Any:
    """Create a CUDA stream (the handle cuda-python returns)."""
    return call(rt, 'cudaStreamCreate')


def stream_destroy(rt: ModuleType, stream: Any) -> None:
    """Destroy a stream from :func:`stream_create`."""
    call(rt, 'cudaStreamDestroy', stream)


def stream_synchronize(rt: ModuleType, stream: Any) -> None:
    """Wait until everything queued on ``stream`` has finished."""
    call(rt, 'cudaStreamSynchronize', stream)


def copy_to_device(rt: ModuleType, pointer: int, array: np.ndarray, stream: Any) -> None:
    """Queue a copy of a C-contiguous host array to device memory at ``pointer``."""
    if not array.flags.c_contiguous:
        raise ValueError('copy_to_device needs a C-contiguous array (np.ascontiguousarray)')
    call(rt, 'cudaMemcpyAsync', pointer, array.ctypes.data, array.nbytes,
         rt.cudaMemcpyKind.cudaMemcpyHostToDevice, stream)


def copy_to_host(rt: ModuleType, array: np.ndarray, pointer: int, stream: Any) -> None:
    """Queue a copy from device memory at ``pointer`` into a C-contiguous host array."""
    if not array.flags.c_contiguous:
        raise ValueError('copy_to_host needs a C-contiguous array')
    call(rt, 'cudaMemcpyAsync', array.ctypes.data, pointer, array.nbytes,
         rt.cudaMemcpyKind.cudaMemcpyDeviceToHost, stream)
