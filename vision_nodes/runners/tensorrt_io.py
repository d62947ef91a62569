"""The inputs and outputs of a TensorRT execution context: names, shapes, buffers, one stream.

The engine's one image input and its outputs are found by name; device buffers and pinned
host buffers (:class:`~.tensorrt_buffers.TensorBuffers`) hold them, and one CUDA stream
carries the copies and the run, so the copies are asynchronous DMA transfers. The input is an
NCHW float tensor, or the u8 NHWC image for an engine with the pre-processing embedded (a
quarter of the bytes to copy); its type says which.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import numpy as np

from ..artifacts.tensorrt_log import log_route
from ..platform import cuda
from ..text import clip
from .base import RunnerError
from .tensorrt_buffers import TensorBuffers


class EngineIO:
    """Binds an execution context's tensors and runs it on one stream."""

    def __init__(self, rt: Any, context: Any, fail: Callable[[str], RunnerError]) -> None:
        self._rt = rt
        self._context = context
        self._fail = fail
        self._stream: Any = None
        self._input = ''
        self._input_dtype: Any = np.float32
        self._outputs: list[tuple[str, Any]] = []  # (name, numpy dtype), engine order
        self._buffers = TensorBuffers(rt)
        self._output_shapes: dict[str, tuple[int, ...]] = {}
        #: The input shape the context is set to (None until set).
        self.shape: tuple[int, ...] | None = None

    def bind(self, engine: Any, trt: ModuleType) -> list[int]:
        """Find the engine's input and outputs, create the stream; return the input's dims.

        A free dimension is -1 (batch, height, width of a dynamic engine).
        """
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
        self._stream = cuda.stream_create(self._rt)
        return dims

    @property
    def takes_u8(self) -> bool:
        """Whether the input is the u8 (N, H, W, 3) image rather than an NCHW float tensor."""
        return self._input_dtype == np.uint8

    def image_shape(self, batch: int, height: int, width: int) -> tuple[int, int, int, int]:
        """Return the input shape of ``batch`` frames of (height, width), in the input's layout."""
        return (batch, height, width, 3) if self.takes_u8 else (batch, 3, height, width)

    def image_hw(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """Return (height, width) of an input ``shape`` in the input's layout."""
        return (shape[1], shape[2]) if self.takes_u8 else (shape[2], shape[3])

    @property
    def input_name(self) -> str:
        """The engine's image input."""
        return self._input

    @property
    def output_names(self) -> list[str]:
        """The engine's output names, in the order ``run`` returns them."""
        return [name for name, _ in self._outputs]

    def set_shape(self, shape: tuple[int, ...]) -> None:
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
        self.shape = tuple(shape)

    def run(self, tensor: np.ndarray, log: Callable[[str], None]) -> list[np.ndarray]:
        """Copy ``tensor`` in, run the engine, copy the outputs out (float32 copies).

        ``tensor`` is of the input's kind (u8 for a u8 input, float otherwise: the caller
        checks), in the shape last set.
        """
        rt, stream = self._rt, self._stream
        # The pinned input buffer takes the values (any strides, any float dtype) in one copy.
        host = self._buffers.host(self._input, self.shape, self._input_dtype)
        host[...] = tensor
        cuda.copy_to_device(rt, self._buffers.device(self._input), host, stream)
        with log_route(log):
            ran = self._context.execute_async_v3(int(stream))
        if not ran:
            raise self._fail('TensorRT failed to run the engine (its messages above say why)')
        outputs = []
        for name, dtype in self._outputs:
            out = self._buffers.host(name, self._output_shapes[name], dtype)
            cuda.copy_to_host(rt, out, self._buffers.device(name), stream)
            outputs.append(out)
        cuda.stream_synchronize(rt, stream)
        # Copies: the pinned buffers are overwritten by the next frame.
        return [o.astype(np.float32, copy=True) for o in outputs]

    def holds_memory(self) -> bool:
        """Whether buffers or the stream are still allocated."""
        return bool(self._buffers) or self._stream is not None

    def release(self) -> None:
        """Free the buffers and the stream (errors ignored: the context may be gone)."""
        self._buffers.release()
        if self._stream is not None:
            try:
                cuda.stream_destroy(self._rt, self._stream)
            except cuda.CudaError:
                pass
            self._stream = None
        self._context = None
        self.shape = None
        self._output_shapes.clear()
