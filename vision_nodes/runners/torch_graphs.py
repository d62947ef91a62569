"""CUDA graphs of the PyTorch runner's eager forward: one launch per frame instead of hundreds.

A small network on a fast GPU is bound by Python launching its kernels one by one; replayed
as a CUDA graph the same kernels run back to back. :class:`GraphReplay` captures a function
(the device pre-processing and the module) per kind of input at one network shape, after
warm-up runs on a side stream (PyTorch's documented recipe: ``torch.cuda.CUDAGraph``,
``torch.cuda.graph``), and replays it with the frame copied into the captured input. The
capture is this thread's alone (:data:`CAPTURE_MODE`): other threads keep running CUDA,
except the device-wide calls that :data:`CUDA_LOCK` keeps apart from it.

Graphs are kept for one network shape at a time: a module may cache tensors per input shape
(Ultralytics' heads keep their anchors) and a graph reads those by address, so a call at
another shape drops every graph before the module runs at it. A capture that fails (an
operation that syncs with the host, data-dependent control flow) turns graphs off for the
model with one log line; the eager module keeps running.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from ..limits import MAX_CUDA_GRAPHS
from ..text import clip

#: Eager runs on the side stream before a capture (allocator and cuDNN warm-up).
WARMUP_RUNS = 3
#: The capture forbids unsafe CUDA calls (a ``cudaMalloc``, a sync) in this thread only.
#: PyTorch's default, ``global``, fails them in every thread of the process while a capture
#: is under way: another model's inference or load on another thread (several models in one
#: node, the precision check loading the fp32 twin beside the reduced model) then failed
#: with "operation not permitted when stream is capturing", and so did the capture (seen on
#: an H200, pose and oriented boxes at fp16, 2026-11-28).
CAPTURE_MODE = 'thread_local'
#: Held through a capture (its warm-up runs included) and by the calls that must never meet
#: one in another thread of the process: a device-wide synchronize or free of memory
#: (``empty_cache``), which would end the capture with the same error. One lock for every
#: model: captures are rare (one per input shape), so nothing waits on it in steady state.
CUDA_LOCK = threading.Lock()


class GraphReplay:
    """Replays ``forward`` as CUDA graphs, captured per input key at one network shape."""

    def __init__(self, forward: Callable[[Any], Any], device: Any, cuda: Any,
                 log: Callable[[str], None], name: str) -> None:
        self._forward = forward
        self._device = device
        #: ``torch.cuda`` (tests pass an object with the same API).
        self._cuda = cuda
        self._log, self._name = log, name
        self._graphs: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
        self._shape: tuple[int, int] | None = None
        #: Set when a capture failed: the caller runs eagerly from then on.
        self.failed = False

    @property
    def captured(self) -> int:
        """How many graphs are held now."""
        return len(self._graphs)

    def run(self, x: Any, network_shape: tuple[int, int]) -> Any:
        """Return ``forward`` of host or device tensor ``x`` by replay; None: run eagerly."""
        if self.failed:
            return None
        if network_shape != self._shape:
            self._graphs.clear()
            self._shape = network_shape
        key = (tuple(x.shape), x.dtype)
        entry = self._graphs.get(key)
        if entry is None:
            entry = self._capture(x, key)
            if entry is None:
                return None
        graph, static_in, static_out = entry
        static_in.copy_(x, non_blocking=True)
        graph.replay()
        return static_out

    def clear(self) -> None:
        """Drop every graph and its memory."""
        self._graphs.clear()
        self._shape = None

    def _capture(self, x: Any, key: tuple[Any, ...]) -> tuple[Any, Any, Any] | None:
        with CUDA_LOCK:
            return self._capture_locked(x, key)

    def _capture_locked(self, x: Any, key: tuple[Any, ...]) -> tuple[Any, Any, Any] | None:
        cuda = self._cuda
        try:
            static_in = x.to(self._device, copy=True)
            side = cuda.Stream(self._device)
            side.wait_stream(cuda.current_stream(self._device))
            with cuda.stream(side):
                for _ in range(WARMUP_RUNS):
                    self._forward(static_in)
            cuda.current_stream(self._device).wait_stream(side)
            graph = cuda.CUDAGraph()
            with cuda.graph(graph, capture_error_mode=CAPTURE_MODE):
                static_out = self._forward(static_in)
        except Exception as exc:  # noqa: BLE001 - capture fails in many ways; eager still runs
            self.failed = True
            self.clear()
            self._log(f"warning: CUDA graph capture failed for model '{clip(self._name)}' "
                      f'({type(exc).__name__}: {clip(str(exc).strip())}); running it eagerly '
                      '(set use_cuda_graphs to false to skip capturing)')
            return None
        while len(self._graphs) >= MAX_CUDA_GRAPHS:
            self._graphs.pop(next(iter(self._graphs)))
        self._graphs[key] = (graph, static_in, static_out)
        return self._graphs[key]
