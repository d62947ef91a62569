"""Several cameras, one model: frames that arrive close together run as one batch.

Each camera is a :class:`~.frame_path.FramePath` of its own (its counts, its dropped-frame
count), whose frames one thread takes for all cameras (:mod:`.frame_taker`): while a camera's
frame waits or runs, it holds it, nothing is taken from that camera and its newer frames wait in
the middleware, which keeps the newest. So each camera has at most one frame here, and stale
frames are dropped by the one mechanism, per camera.

The batcher's thread takes the first frame that arrives, waits up to ``batch_window`` ms for
other cameras' frames (never for a camera that sends nothing: the window is counted from the
first frame), and runs what it has, up to ``max_batch`` frames, through every model
(:meth:`~vision_nodes.pipeline.LoadedModel.process_batch`: same network shape, one run).
Each frame's conversion, like its pre- and post-processing, runs on a pool thread beside the
others' (:mod:`vision_nodes.parallel`).
Each result is published on its own camera's outputs with its own frame's header; then each
camera lets go of its frame (:meth:`~.frame_path.FramePath.reopen`). Each frame's stage times
(:mod:`vision_nodes.stage_times`: its own way in, its batch's stages) go to the node's medians
and its camera's. A camera is named by
its index in ``image_topics``: the key of anything kept per camera (outputs, tracker state).

Where every model's runner runs several frames at once on its own (``concurrent_frames`` > 1:
OpenVINO on a CPU, one stream per core), a batch is that many frames side by side, not one
run: the batcher has one worker thread per stream, each taking the next camera's frame,
running it and publishing it as soon as it is done, so no frame waits for a slower one of its
batch and a stream never idles while another frame is being converted or published.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
from typing import Any, Callable, Iterator

from ...images import ImageConversionError
from ...parallel import map_frames
from ...stage_times import FrameClock, mark, timing
from ...stats import stamp_latency
from ..outputs.protocol import Frame
from .conversion import to_array
from .frame_path import FramePath, output_failure, way_in


class _Tagged:
    """What a camera's frame path hands its frames to: the batcher's queue, with its index."""

    def __init__(self, shared: queue.SimpleQueue, index: int) -> None:
        self._shared, self._index = shared, index

    def put(self, item: tuple[Any, Any, int]) -> None:
        """Take what a frame path queues, ``(msg, dds times, called ns)``, with the index."""
        self._shared.put((self._index, *item))


class FrameBatcher:
    """Collect the cameras' frames into batches, run them, publish per camera."""

    def __init__(self, node: Any, frames: FramePath, topics: list[str],
                 param: Callable[[str], Any], log_error: Callable[[str], None]) -> None:
        self._node = node
        #: The node's frame path: its models, and the node-wide counts.
        self._frames = frames
        self._param = param
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._topics = list(topics)
        #: One frame path per camera, in ``image_topics`` order.
        self.cameras = [FramePath(node, log_error, lambda: False, sink=_Tagged(self._queue, i))
                        for i in range(len(topics))]
        self._threads: list[threading.Thread] = []

    @property
    def workers(self) -> int:
        """Worker threads: the frames every model's runner runs at once (at least 1)."""
        models = self._frames.models
        return max(1, min((m.pipeline.runner.concurrent_frames for m in models), default=1))

    @property
    def limit(self) -> int:
        """Most frames a batch takes: ``max_batch`` (0: one per camera).

        1 where the runners run frames side by side themselves (:attr:`workers` > 1).
        """
        if self.workers > 1:
            return 1
        return int(self._param('max_batch')) or len(self.cameras)

    def start(self) -> None:
        """Start the worker threads, every camera holding no frame and counts at zero."""
        for camera in self.cameras:
            camera.reset()
        self._threads = [threading.Thread(target=self._loop, name=f'batcher{i}', daemon=True)
                         for i in range(self.workers)]
        for thread in self._threads:
            thread.start()
        self._node.get_logger().info(self.describe())

    def describe(self) -> str:
        """Say how the cameras' frames run: side by side on workers, or in batches."""
        count = len(self.cameras)
        if self.workers > 1:
            return (f'{count} cameras: frames side by side, {self.workers} at once (one per '
                    'runtime stream), each published when done')
        return (f'{count} cameras: batches of up to {self.limit} frames arriving within '
                f"{float(self._param('batch_window')):g} ms")

    def stop(self) -> None:
        """Finish the frames in flight and stop the workers (idempotent)."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        self._threads = []

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = self._collect(first)
            try:
                self._process(batch)
            except Exception as exc:  # noqa: BLE001 - the worker outlives any one batch
                for index, *_ in batch:
                    self._error(index, f'frame dropped: {type(exc).__name__}: {exc}')
            finally:
                for index, *_ in batch:
                    self.cameras[index].reopen()

    def _collect(self, first: tuple[int, Any, Any, int]) -> list[Any]:
        """Return the first frame and those arriving within the window, up to the limit."""
        batch = [first]
        deadline = time.monotonic() + float(self._param('batch_window')) / 1000.0
        limit = self.limit
        while len(batch) < limit:
            left = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:  # stop: run what was taken, then end
                self._queue.put(None)
                break
            batch.append(item)
        return batch

    def _process(self, batch: list[tuple[int, Any, Any, int]]) -> None:
        """Convert each frame once, run every model on the batch, publish per camera.

        Items are ``(camera index, msg, dds times, called ns)``; the first model's stages are
        timed on the batch's clock, the others' and their outputs' count to no stage.
        """
        started, started_ns = time.monotonic(), time.time_ns()
        clock = FrameClock()
        with timing(clock):
            converted = map_frames(_convert, batch)
            mark('convert')
        taken = []
        for (index, msg, times, called_ns), array in zip(batch, converted):
            self._frames.stats.on_received()
            if isinstance(array, ImageConversionError):
                self._error(index, f'skipping image: {array}')
                continue
            taken.append((index, msg, *array, way_in(times, called_ns, started_ns)))
        models = self._frames.models
        if not taken or not models:
            return
        results: dict[str, list[Any]] = {}
        for model in models:  # every model on the whole batch, then the outputs
            with _timed(clock, model is models[0]):
                try:
                    results[model.name] = model.pipeline.process_batch(
                        [(image, encoding) for _, _, image, encoding, _ in taken],
                        model.params.current)
                except Exception as exc:  # noqa: BLE001 - one bad batch must not stop the node
                    for index, *_ in taken:
                        self._error(index, f"model '{model.name}': inference failed on a "
                                           f'frame: {type(exc).__name__}: {exc}')
        done = [False] * len(taken)
        first_done = [False] * len(taken)
        for position, (index, msg, image, encoding, _) in enumerate(taken):
            frame = Frame(image, encoding, msg.header, input=self._topics[index],
                          result_of=functools.partial(_result_of, results, position))
            for model in models:
                if model.name not in results:
                    continue
                first = model is models[0]
                with _timed(clock, first):
                    ok = self._publish(model, index, results[model.name][position], frame)
                if first:
                    first_done[position] = ok
                done[position] |= ok
        now_ns = self._node.get_clock().now().nanoseconds
        for ok, timed, (index, msg, _, _, own) in zip(done, first_done, taken):
            if timed:
                spent = {**clock.spent, **own}
                self._frames.stages.add(spent)
                self.cameras[index].stages.add(spent)
            if ok:
                stamp = msg.header.stamp
                latency = stamp_latency(stamp.sec, stamp.nanosec, now_ns)
                processing = time.monotonic() - started
                self.cameras[index].stats.on_processed(latency, processing)
                self._frames.stats.on_processed(latency, processing)

    def _publish(self, model: Any, index: int, result: Any, frame: Frame) -> bool:
        """Publish a result on camera ``index``'s outputs; False (one line) if they raise."""
        try:
            model.outputs.cameras[index].publish(result, frame.header, frame)
        except Exception as exc:  # noqa: BLE001 - one bad frame must not stop the node
            self._error(index, output_failure(model.name, exc))
            return False
        mark('publish')
        return True

    def error_from(self, index: int) -> Callable[[str], None]:
        """Return what counts and logs an error about one of camera ``index``'s frames."""
        return functools.partial(self._error, index)

    def _error(self, index: int, text: str) -> None:
        """Count an error on the camera's entry and the node's; log it (rate-limited)."""
        self.cameras[index].stats.on_error(text)
        self._frames.frame_error(f"camera '{self._topics[index]}': {text}")


@contextlib.contextmanager
def _timed(clock: FrameClock, first: bool) -> Iterator[None]:
    """Time the block on the batch's ``clock`` for the first model; for another, to no stage.

    The clock begins again after another model's block, so its time counts to none of the
    first model's stages.
    """
    if first:
        with timing(clock):
            yield
        return
    with timing(FrameClock()):
        yield
    clock.restart()


def _convert(item: tuple[int, Any, Any, int]) -> tuple[Any, str] | ImageConversionError:
    """One camera's message as (array, encoding), or why it cannot be (on a pool thread)."""
    msg = item[1]
    try:
        return to_array(msg)
    except ImageConversionError as exc:
        return exc


def _result_of(results: dict[str, list[Any]], position: int, name: str) -> Any:
    """Model ``name``'s result on the frame at ``position`` (None: it did not run or failed)."""
    found = results.get(name)
    return None if found is None else found[position]
