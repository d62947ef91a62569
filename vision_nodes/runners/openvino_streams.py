"""OpenVINO infer requests on a CPU's streams, shared by every thread that runs frames.

A model compiled with ``NUM_STREAMS`` = k runs k requests at once, each on its own share of
the cores. :class:`StreamRequests` keeps k requests and lends them out: a call runs its frames
one per request, side by side, on as many requests as are idle, and gives them back. Two
threads that each run one frame (the batcher's workers, one per stream) so run at once, each
on its own stream, with no barrier between them; a batch of frames from one thread takes
every idle stream. A caller that holds a request never waits for another, so callers never
wait on each other in a circle.
"""

from __future__ import annotations

import queue
from typing import Any

import numpy as np


class StreamRequests:
    """``count`` infer requests of one compiled model, lent to the threads that run frames."""

    def __init__(self, compiled: Any, count: int) -> None:
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        self.count = max(1, int(count))
        for _ in range(self.count):
            self._idle.put(compiled.create_infer_request())

    def run(self, tensor: np.ndarray) -> list[np.ndarray]:
        """Run each frame of ``tensor`` (N leading) as its own request; return the outputs.

        Output i holds every frame's output i, in ``tensor``'s order, as one batch would.
        """
        frames: list[list[np.ndarray]] = []
        while len(frames) < tensor.shape[0]:
            frames.extend(self._wave(tensor[len(frames):]))
        if len(frames) == 1:
            return frames[0]
        return [np.concatenate([frame[i] for frame in frames]) for i in range(len(frames[0]))]

    def _wave(self, tensor: np.ndarray) -> list[list[np.ndarray]]:
        """Run the first frames of ``tensor`` on one idle request each (at least one)."""
        held = [self._idle.get()]
        while len(held) < tensor.shape[0]:
            try:
                held.append(self._idle.get_nowait())
            except queue.Empty:
                break
        started = []
        try:
            for index, request in enumerate(held):
                request.start_async({0: tensor[index:index + 1]}, share_inputs=True)
                started.append(request)
            done = []
            for request in held:
                request.wait()
                done.append([out.data.copy() for out in request.output_tensors])
            return done
        finally:
            for request in started:  # a request goes back idle, never still running
                try:
                    request.wait()
                except RuntimeError:
                    pass
            for request in held:
                self._idle.put(request)
