"""The one frame path: image message -> conversion -> every model -> its outputs.

Stale frames are dropped in one place, the middleware, and counted in one place,
:meth:`FramePath.on_image`. A single camera's frames are taken by the inference thread itself
(:meth:`FramePath.take_from`): it waits on the image subscription outside the executor
(:class:`~..process.compat.SubscriptionWait`) whenever it is free, and takes the newest frame;
frames arriving while it runs one stay in the middleware, where the subscription's KEEP_LAST
history keeps only the newest. A frame so reaches the thread that runs it with one wake-up,
the middleware's, and the executor's thread stays free for services. A multi-camera node's
cameras (:mod:`.batcher`) are taken by one thread of their own (:mod:`.frame_taker`), which
leaves out a camera while its frame waits or runs (:attr:`FramePath.holding`). Either way
nothing takes, copies or converts a frame that would be dropped, and the executor never
takes a frame: the image subscriptions are in a callback group it never runs
(:attr:`FramePath.callback_group`). The gap in the publisher's sequence numbers tells how
many frames were dropped. With several models, each model after the first runs on a thread
of its own, at the same time.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from rclpy.callback_groups import CallbackGroup
from rclpy.exceptions import InvalidHandle

from ...images import ImageConversionError
from ...pipeline import LoadedModel
from ...stage_times import FrameClock, StageTimes, mark, timing
from ...stats import FrameStats, stamp_latency
from ..outputs.protocol import Frame, Outputs
from ..process import compat
from .conversion import to_array

#: Largest sequence gap read as dropped frames (a bigger one is a restarted publisher).
_MAX_GAP = 100_000
#: Seconds a model's outputs wait for another model's result on the same frame.
_RESULT_WAIT_S = 60.0
#: Longest wait on the image subscription before the thread looks again for a new one.
_TAKE_POLL_S = 0.1


@dataclass
class ServedModel:
    """One configured model: its pipeline, its live parameters, its outputs."""

    name: str
    pipeline: LoadedModel
    params: Any
    outputs: Outputs


class _TakenElsewhere(CallbackGroup):
    """The image subscriptions' callback group: the executor neither waits on nor runs them.

    A thread of the node takes their frames instead (:meth:`FramePath.take_from`,
    :mod:`.frame_taker`).
    """

    def can_execute(self, entity: Any) -> bool:
        return False

    def beginning_execution(self, entity: Any) -> bool:
        return False

    def ending_execution(self, entity: Any) -> None:
        pass


class FramePath:
    """Take one frame at a time from the image subscription; run it; publish its results."""

    def __init__(self, node: Any, log_error: Callable[[str], None],
                 lazy: Callable[[], bool], sink: Any = None) -> None:
        """Take frames for this path's inference thread, or for ``sink``.

        ``sink.put((msg, dds_times, called_ns))`` gets what the thread would. A camera of a
        multi-camera node hands its frames to the batcher (:mod:`.batcher`), which calls
        :meth:`reopen` when it is done with one.
        """
        self._node = node
        self._log_error = log_error
        self._lazy = lazy
        #: The callback group the image subscription goes in (never run by the executor).
        self.callback_group = _TakenElsewhere()
        self.stats = FrameStats()
        #: Per-stage medians of the first model's frames (diagnostics, benchmark).
        self.stages = StageTimes()
        self._lock = threading.RLock()  # the models, against transitions
        self.models: list[ServedModel] = []
        self._frames: Any = sink if sink is not None else queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._helpers: dict[str, ThreadPoolExecutor] = {}
        #: Publication sequence number of the last frame taken, per publisher.
        self._last_seq: dict[bytes, int] = {}
        #: When the path last let go of a frame (system-clock ns): a frame that arrived
        #: before waited for the frame before it, not for the middleware.
        self._opened_ns = 0
        #: The input whose frames the thread takes itself (:meth:`take_from`), and its wait.
        self._source: Any = None
        self._wait: compat.SubscriptionWait | None = None
        #: What wakes the thread that takes this camera's frames (:meth:`taken_by`).
        self._taker_wake: Callable[[], None] | None = None
        #: Whether a frame handed over waits or runs (until :meth:`reopen`).
        self.holding = False

    def load(self, models: list[ServedModel]) -> list[ServedModel]:
        """Use ``models`` from the next frame; return the ones used before."""
        with self._lock:
            old, self.models = self.models, models
        return old

    def take_from(self, source: Any) -> None:
        """Let the inference thread take the frames of ``source`` itself, from :meth:`start`.

        ``source`` (an :class:`~.subscription.ImageInput`) gives its current rclpy
        ``subscription`` (None while it has none) and ``deliver``s a taken message to this
        path's :meth:`on_image`; its subscription is in :attr:`callback_group`, so the
        executor never takes from it. :meth:`stop` ends this.
        """
        self._source = source
        self._wait = compat.SubscriptionWait(self._node.context)
        source.on_change = self._wait.wake

    def taken_by(self, wake: Callable[[], None]) -> None:
        """Let another thread take this camera's frames (:mod:`.frame_taker`).

        It takes from the image subscription while :attr:`holding` is False; ``wake`` tells it
        that a frame was let go (:meth:`reopen`).
        """
        self._taker_wake = wake

    def start(self) -> None:
        """Start the inference thread, holding no frame and counts at zero."""
        self.reset()
        self._helpers = {m.name: ThreadPoolExecutor(1, thread_name_prefix=m.name)
                         for m in self.models[1:]}
        self._thread = threading.Thread(target=self._loop, name='inference', daemon=True)
        self._thread.start()

    def reset(self) -> None:
        """Set the counts to zero, forget sequence numbers, hold no frame."""
        self.stats.reset()
        self.stages.reset()
        self._last_seq.clear()
        self.holding = False

    def stop(self) -> None:
        """Finish the frame in flight and stop the inference thread (idempotent)."""
        if self._thread is not None:
            self._frames.put(None)
            if self._wait is not None:
                self._wait.wake()
            self._thread.join()
            self._thread = None
        if self._wait is not None:
            self._source.on_change = None
            self._wait.destroy()
            self._source = self._wait = None
        for pool in self._helpers.values():
            pool.shutdown(wait=True)
        self._helpers = {}

    def on_image(self, msg: Any, info: Any = None) -> None:
        """Hold the frame and hand it to the thread: what the image input delivers to.

        ``info``, the message info where rclpy gives it (Jazzy and later): the gap in the
        publisher's sequence numbers counts the frames the middleware dropped before this one,
        and its DDS source and reception timestamps time the frame's way in.
        """
        self.holding = True
        times = self._times(info) if isinstance(info, dict) else None
        self.stats.on_received()
        self._frames.put((msg, times, time.time_ns()))

    def _times(self, info: dict) -> tuple[int, ...] | None:
        """Count the frames dropped before this one; return its DDS times.

        The times (system-clock ns): the source and reception timestamps, and when the frame
        could first be taken: its reception, or when the path let go of the frame before if
        later.
        """
        seq = info.get('publication_sequence_number')
        gid = (info.get('publisher_gid') or {}).get('data') if seq is not None else None
        if gid is not None:
            last = self._last_seq.get(bytes(gid))
            self._last_seq[bytes(gid)] = seq
            if last is not None and 1 < seq - last < _MAX_GAP:
                for _ in range(min(seq - last - 1, 1000)):
                    self.stats.on_received()
                    self.stats.on_dropped()
        sent, received = info.get('source_timestamp'), info.get('received_timestamp')
        return (sent, received, max(received, self._opened_ns)) if sent and received else None

    def frame_error(self, text: str) -> None:
        """Count and log (rate-limited) an error about one frame."""
        self.stats.on_error(text)
        self._log_error(text)

    def _next(self) -> Any:
        """Return the next frame (``msg, dds times, called ns``), or None to stop."""
        if self._source is None:
            return self._frames.get()
        while True:
            try:
                return self._frames.get_nowait()  # what :meth:`on_image` queued, or None
            except queue.Empty:
                pass
            try:
                taken = self._wait.take(self._source.subscription, _TAKE_POLL_S)
            except InvalidHandle:  # the context is gone (the process is ending)
                return None
            except Exception as exc:  # noqa: BLE001 - an event's callback; keep taking
                self._log_error(f'image subscription: {type(exc).__name__}: {exc}')
                time.sleep(_TAKE_POLL_S)
                continue
            if taken is not None:
                try:
                    self._source.deliver(*taken)
                except Exception as exc:  # noqa: BLE001 - costs this frame, not the thread
                    self.frame_error(f'frame dropped: {type(exc).__name__}: {exc}')

    def _loop(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            try:
                self._process(*item)
            except Exception as exc:  # noqa: BLE001 - the thread outlives any one frame
                self.frame_error(f'frame dropped: {type(exc).__name__}: {exc}')
            finally:
                self.reopen()

    def reopen(self) -> None:
        """After a frame: the newest frame waiting in the middleware comes next.

        The thread that takes this path's frames looks again: the path's own (:meth:`take_from`)
        when it is done here, or the one :meth:`taken_by` named, woken here.
        """
        self._opened_ns = time.time_ns()
        self.holding = False
        if self._taker_wake is not None:
            self._taker_wake()

    def _process(self, msg: Any, times: tuple[int, ...] | None, called_ns: int) -> None:
        """Convert once, run every wanted model, publish each result; time the first model's."""
        started = time.monotonic()
        clock = FrameClock()
        for stage, seconds in way_in(times, called_ns, time.time_ns()).items():
            clock.add(stage, seconds)
        with self._lock:
            models, helpers = self.models, self._helpers
            if not models:
                return
            try:
                image, encoding = to_array(msg)
            except ImageConversionError as exc:
                self.frame_error(f'skipping image: {exc}')
                return
            clock.mark('convert')
            lazy = self._lazy() and len(models) > 1
            wanted = _with_sources(models, [m for m in models
                                            if not lazy or m.outputs.wanted()])
            done: dict[str, Future] = {m.name: Future() for m in wanted}
            frame = Frame(image, encoding, msg.header,
                          result_of=lambda name: _result(done.get(name)))
            pending = [helpers[m.name].submit(self._run, m, frame, done[m.name], FrameClock())
                       for m in wanted[1:]]
            results = [self._run(wanted[0], frame, done[wanted[0].name], clock)] \
                if wanted else []
            results += [future.result() for future in pending]
        if results and results[0]:
            self.stages.add(clock.spent)
        if any(results):
            stamp = msg.header.stamp
            self.stats.on_processed(
                stamp_latency(stamp.sec, stamp.nanosec, self._node.get_clock().now().nanoseconds),
                time.monotonic() - started)

    def _run(self, model: ServedModel, frame: Frame, done: Future, clock: FrameClock) -> bool:
        """Run one model on a converted frame and publish its result; False if it failed.

        ``done`` receives the result (None on failure) before it is published, for the
        outputs of other models that read it (:attr:`Frame.result_of`). The stages are
        marked on ``clock``.
        """
        with timing(clock):
            return self._run_timed(model, frame, done)

    def _run_timed(self, model: ServedModel, frame: Frame, done: Future) -> bool:
        result = None
        try:
            result = model.pipeline.process(frame.image, frame.encoding, model.params.current)
        except ImageConversionError as exc:
            self.frame_error(f'skipping image: {exc}')
            return False
        except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the node
            self.frame_error(f"model '{model.name}': inference failed on a frame: "
                             f'{type(exc).__name__}: {exc}')
            return False
        finally:
            done.set_result(result)
        return self._publish(model, result, frame)

    def _publish(self, model: ServedModel, result: Any, frame: Frame) -> bool:
        """Publish one model's result; False (the frame dropped, one line) if its outputs raise.

        The outputs run code that is not the node's (a tracker, drawing, 3D): whatever they
        raise costs this frame, never the inference thread.
        """
        try:
            model.outputs.publish(result, frame.header, frame)
        except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the node
            self.frame_error(output_failure(model.name, exc))
            return False
        mark('publish')
        return True


def way_in(times: tuple[int, ...] | None, called_ns: int, started_ns: int
           ) -> dict[str, float]:
    """Return a frame's stages before it runs (s): ``dds_in``, ``receive``, ``handoff``.

    ``times``: its DDS source and reception times and when it could be taken
    (:meth:`FramePath.on_image`; None: the middleware gave none); ``called_ns``: when it was
    handed over; ``started_ns``: when the thread that runs it began on it (system-clock ns).
    """
    spent = {'handoff': (started_ns - called_ns) / 1e9}
    if times is not None:
        spent['dds_in'] = (times[1] - times[0]) / 1e9
        spent['receive'] = (called_ns - times[-1]) / 1e9
    return spent


def output_failure(model: str, exc: BaseException) -> str:
    """Return the one line saying that a model's outputs failed on a frame, and why."""
    return f"model '{model}': outputs failed on a frame (dropped): {type(exc).__name__}: {exc}"


def _with_sources(models: list[ServedModel], wanted: list[ServedModel]) -> list[ServedModel]:
    """``wanted`` and the models whose results they read (``outputs.sources()``), in order."""
    names = {m.name for m in wanted}
    for model in wanted:
        names.update(getattr(model.outputs, 'sources', tuple)())
    return [m for m in models if m.name in names]


def _result(done: Future | None) -> Any:
    """Return the result a model's future holds (None: the model did not run on it)."""
    return None if done is None else done.result(timeout=_RESULT_WAIT_S)
