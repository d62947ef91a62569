"""A fake of ``torch.cuda``'s graph API on the CPU, for tests on machines without a GPU.

It has the names and call shapes the PyTorch runner uses (``CUDAGraph``, ``graph``,
``Stream``, ``stream``, ``current_stream``). Capturing under ``graph(g)`` runs the body for
real while recording every ATen operation it dispatches (a ``TorchDispatchMode``), with the
very tensors it read and wrote; ``g.replay()`` runs the recorded operations again on those
tensors and writes each result into the tensor the capture produced. As on a GPU, a replay
therefore reads whatever the captured input tensors hold now and writes the captured output
tensors, and nothing else: code that feeds a new tensor instead of the captured one, or reads
a fresh output instead of the captured one, gets stale results.

Known differences: operations run at once (CUDA queues them); streams are plain objects;
``fail_capture`` makes a capture raise, as one does when the body synchronises with the host.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[Any, tuple, dict, Any]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.ops.append((func, args, kwargs, out))
        return out


class FakeGraph:
    """``torch.cuda.CUDAGraph``: holds the recorded operations."""

    def __init__(self, api: 'FakeCudaGraphs') -> None:
        self._api = api
        self.ops: list[tuple[Any, tuple, dict, Any]] = []

    def replay(self) -> None:
        """Run the recorded operations again, results into the captured tensors."""
        self._api.replays += 1
        for func, args, kwargs, out in self.ops:
            fresh = func(*args, **kwargs)
            for old, new in zip(tree_flatten(out)[0], tree_flatten(fresh)[0]):
                if isinstance(old, torch.Tensor) and old is not new:
                    old.copy_(new)


class FakeStream:
    """``torch.cuda.Stream``."""

    def __init__(self, device: Any = None) -> None:
        self.device = device

    def wait_stream(self, other: 'FakeStream') -> None:
        """Nothing to wait for: operations run at once."""


class FakeCudaGraphs:
    """The part of ``torch.cuda`` the runner's graphs use; counts captures and replays."""

    def __init__(self, fail_capture: bool = False) -> None:
        self.fail_capture = fail_capture
        self.captures = 0
        self.replays = 0
        #: ``torch.cuda.graph``'s ``capture_error_mode`` of each capture.
        self.capture_modes: list[str] = []
        #: Captures made with the process-wide CUDA lock held.
        self.locked_captures = 0

    def CUDAGraph(self) -> FakeGraph:  # noqa: N802 - torch's name
        return FakeGraph(self)

    def Stream(self, device: Any = None) -> FakeStream:  # noqa: N802 - torch's name
        return FakeStream(device)

    def current_stream(self, device: Any = None) -> FakeStream:
        return FakeStream(device)

    @contextmanager
    def stream(self, stream: FakeStream):
        yield

    @contextmanager
    def graph(self, graph: FakeGraph, pool: Any = None, stream: Any = None,
              capture_error_mode: str = 'global'):
        self.capture_modes.append(capture_error_mode)
        from vision_nodes.runners.torch_graphs import CUDA_LOCK

        self.locked_captures += CUDA_LOCK.locked()
        if self.fail_capture:
            raise RuntimeError('operation not permitted when stream is capturing')
        recorder = _Recorder()
        with recorder:
            yield
        graph.ops = recorder.ops
        self.captures += 1
