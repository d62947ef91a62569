"""Where a frame's time goes in the node: a per-frame clock and the per-stage medians. ROS-free.

The frame path gives each frame a :class:`FrameClock` and makes it the current clock of the
thread that works on the frame (:func:`timing`); the code a frame passes through calls
:func:`mark` when a stage ends (``pipeline.LoadedModel.process`` after each of preprocess,
inference and postprocess; the detection outputs after building the message), so stages are
counted in the one place each happens and nothing is passed down the call chain. Outside a
frame :func:`mark` does nothing. :class:`StageTimes` keeps the stage durations of the last
frames and gives their medians, which the node publishes as diagnostics values and the
benchmark reads.

The stages, in the order a frame meets them (:data:`STAGES`):

* ``dds_in``      - the sender's write → DDS delivered the image to the node (source and
                    reception timestamps of the middleware, the system clock);
* ``receive``     - DDS delivery → the frame handed to the node's code (the wake-up of the
                    thread that takes it: the inference thread with one camera, the frame
                    taker with several; the take of the serialized bytes and their reading,
                    :mod:`.ros.wire.cdr_reader`);
                    from the end of the frame before, for a frame that arrived while the
                    node was busy with that one (its wait is no stage of its own);
* ``handoff``     - handed over → the inference thread starts on the frame (one camera:
                    the same thread, so next to nothing; several: the batcher's thread,
                    after the batch window);
* ``convert``     - message → image array (a view, a camera-encoding conversion, a decode);
* ``preprocess``, ``inference``, ``postprocess`` - the model's task and runner;
* ``message``     - results → the detections message's bytes (tracking included, when on);
* ``publish``     - ``Publisher.publish``, and what the outputs publish after it (masks,
                    keypoints, 3D, the annotated image; with outputs that build as they
                    publish, the build).

Several cameras' frames run in batches (:mod:`.ros.inputs.batcher`): each frame counts its own
``dds_in``, ``receive`` and ``handoff`` and its batch's stages from ``convert`` on (the first
model's; ``message`` and ``publish`` for every frame of the batch).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Iterator, Mapping

from .limits import STAGE_WINDOW

STAGES = ('dds_in', 'receive', 'handoff', 'convert', 'preprocess', 'inference', 'postprocess',
          'message', 'publish')


class FrameClock:
    """Seconds one frame spent per stage: each :meth:`mark` ends the stage begun at the last."""

    def __init__(self, start: float | None = None) -> None:
        self._last = time.perf_counter() if start is None else start
        self.spent: dict[str, float] = {}

    def mark(self, stage: str) -> None:
        """End ``stage`` now (time since the previous mark, added to what it already has)."""
        now = time.perf_counter()
        self.spent[stage] = self.spent.get(stage, 0.0) + now - self._last
        self._last = now

    def add(self, stage: str, seconds: float) -> None:
        """Count ``seconds`` measured elsewhere (middleware timestamps) to ``stage``."""
        self.spent[stage] = self.spent.get(stage, 0.0) + seconds

    def restart(self) -> None:
        """Begin the next stage now: the time since the last mark counts to no stage."""
        self._last = time.perf_counter()


_current = threading.local()


@contextmanager
def timing(clock: FrameClock) -> Iterator[FrameClock]:
    """Make ``clock`` this thread's current clock while the block runs."""
    before = getattr(_current, 'clock', None)
    _current.clock = clock
    try:
        yield clock
    finally:
        _current.clock = before


def mark(stage: str) -> None:
    """End ``stage`` on this thread's current clock; nothing when no frame is being timed."""
    clock = getattr(_current, 'clock', None)
    if clock is not None:
        clock.mark(stage)


class StageTimes:
    """Stage durations of the last ``window`` frames (thread-safe); their medians in seconds."""

    def __init__(self, window: int = STAGE_WINDOW) -> None:
        self._lock = threading.Lock()
        self._window = int(window)
        self.reset()

    def reset(self) -> None:
        """Forget every frame (the node calls this on activate)."""
        with self._lock:
            self._frames: deque = deque(maxlen=self._window)

    def add(self, spent: Mapping[str, float]) -> None:
        """Keep one frame's seconds per stage (a stage it did not pass through counts 0)."""
        row = tuple(max(0.0, float(spent.get(stage, 0.0))) for stage in STAGES)
        with self._lock:
            self._frames.append(row)

    def __len__(self) -> int:
        """Return how many frames the medians are taken over."""
        with self._lock:
            return len(self._frames)

    def medians(self) -> dict[str, float]:
        """Median seconds per stage over the kept frames, in :data:`STAGES` order ({} if none)."""
        with self._lock:
            rows = list(self._frames)
        if not rows:
            return {}
        return {stage: statistics.median(column) for stage, column in zip(STAGES, zip(*rows))}

    def diagnostic_values(self, medians: Mapping[str, float] | None = None) -> dict[str, str]:
        """Return the medians (``medians``, if already taken) as diagnostics values.

        Keys ``stage <name> p50 (ms)``, values in ms, or ``n/a`` before any frame.
        """
        medians = self.medians() if medians is None else medians
        return {stage_key(stage): (f'{medians[stage] * 1e3:.3f}' if medians else 'n/a')
                for stage in STAGES}

    def report(self) -> tuple[dict[str, str], tuple[float, int]]:
        """Return the diagnostics values (:meth:`diagnostic_values`) and the delivery.

        The delivery is what the health rules judge late images by
        (:func:`vision_nodes.stats.assess`): the median ``receive`` seconds and how many
        frames it is taken over. The medians are taken once for both.
        """
        medians = self.medians()
        return self.diagnostic_values(medians), (medians.get('receive', 0.0), len(self))


def stage_key(stage: str) -> str:
    """Diagnostics key of one stage's median."""
    return f'stage {stage} p50 (ms)'
