"""Device and page-locked host buffers per tensor for the TensorRT runner.

Each tensor has one device buffer and one pinned host buffer on the other side of its copies
(so they are asynchronous DMA transfers), grown when a larger input shape needs more and never
shrunk, so a camera switching between resolutions does not reallocate every frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..platform import cuda


class TensorBuffers:
    """Grow-only device + pinned host buffers by tensor name, freed together."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self._device: dict[str, tuple[int, int]] = {}  # name -> (device pointer, bytes)
        self._host: dict[str, tuple[int, int]] = {}  # name -> (pinned host pointer, bytes)

    def __bool__(self) -> bool:
        return bool(self._device or self._host)

    def reserve(self, name: str, nbytes: int) -> int | None:
        """Make both buffers of ``name`` hold ``nbytes``; return a new device pointer, else None.

        A new device pointer must be given to the execution context again.
        """
        moved = None
        pointer, size = self._device.get(name, (0, 0))
        if nbytes > size:
            if pointer:
                cuda.free(self.rt, pointer)
                del self._device[name]
            moved = cuda.malloc(self.rt, nbytes)
            self._device[name] = (moved, nbytes)
        host, size = self._host.get(name, (0, 0))
        if nbytes > size:
            if host:
                cuda.free_host(self.rt, host)
                del self._host[name]
            self._host[name] = (cuda.malloc_host(self.rt, nbytes), nbytes)
        return moved

    def device(self, name: str) -> int:
        """Return the device pointer of ``name``."""
        return self._device[name][0]

    def host(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Return the pinned host buffer of ``name`` as an array of ``shape`` and ``dtype``."""
        return cuda.host_array(self._host[name][0], shape, np.dtype(dtype))

    def release(self) -> None:
        """Free every buffer (errors ignored: the context may already be gone)."""
        for pointers, free in ((self._device, cuda.free), (self._host, cuda.free_host)):
            for pointer, _ in pointers.values():
                try:
                    free(self.rt, pointer)
                except cuda.CudaError:
                    pass
            pointers.clear()
