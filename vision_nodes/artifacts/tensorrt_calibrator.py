"""TensorRT 10's int8 entropy calibrator, fed the calibration images as the network takes them.

TensorRT asks the calibrator for one batch at a time and reads it from device memory that
holds "each network input's data": the values of the network input's own type and layout. A
network built from the float graph takes NCHW float32 tensors; one built from the u8-input
graph (:mod:`.onnx_u8_input`) takes the letterboxed (1, H, W, 3) u8 image, its pre-processing
running inside the network during calibration as it does for frames. So the calibrator is
told the input's dtype and refuses a batch of another one (a float tensor cast to u8 would
calibrate on garbage), and the caller prepares the images the way frames reach that input.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..platform import cuda

Log = Callable[[str], None]


def call_sync(rt: ModuleType) -> None:
    """Wait for the whole device (used once per calibration batch, off the frame path)."""
    cuda.call(rt, 'cudaDeviceSynchronize')


def entropy_calibrator(trt: ModuleType, rt: ModuleType, batches: Iterable[np.ndarray],
                       count: int, dtype: Any, log: Log) -> Any:
    """Return an ``IInt8EntropyCalibrator2`` feeding ``batches`` (of ``dtype``) to the builder.

    Each batch is copied into one device buffer allocated for the first; :meth:`close` frees
    it after the build. The calibration table TensorRT writes is kept in ``table``; an error
    (raised into TensorRT it would be lost) is kept in ``error`` and ends the calibration.
    """
    want = np.dtype(dtype)

    class _Calibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.batches: Iterator[np.ndarray] = iter(batches)
            self.pointer = 0
            self.nbytes = 0
            self.done = 0
            self.table: bytes | None = None
            self.error: BaseException | None = None

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, names: list[str]) -> list[int] | None:
            try:
                batch = next(self.batches, None)
                if batch is None:
                    return None
                if batch.dtype != want:
                    raise TypeError(f'a calibration batch is {batch.dtype}, but the network '
                                    f'input takes {want}')
                batch = np.ascontiguousarray(batch)
                if batch.nbytes > self.nbytes:
                    if self.pointer:
                        cuda.free(rt, self.pointer)
                    self.pointer, self.nbytes = cuda.malloc(rt, batch.nbytes), batch.nbytes
                cuda.copy_to_device(rt, self.pointer, batch, 0)
                call_sync(rt)
                self.done += 1
                if self.done == 1 or self.done % 50 == 0 or self.done == count:
                    log(f'TensorRT int8 calibration: image {self.done}/{count}')
                return [self.pointer] * len(names)
            except Exception as exc:  # noqa: BLE001 - reported after the build
                self.error = exc
                return None

        def read_calibration_cache(self) -> bytes | None:
            return None  # the engine itself is cached; calibrate afresh on every build

        def write_calibration_cache(self, cache: Any) -> None:
            self.table = bytes(memoryview(cache))

        def close(self) -> None:
            if self.pointer:
                cuda.free(rt, self.pointer)
                self.pointer = 0

    return _Calibrator()
