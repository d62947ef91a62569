"""The thread that takes a multi-camera node's frames, outside the executor.

One thread waits on every camera's image subscription at once
(:class:`~..process.compat.SubscriptionWait`), leaving out a camera that holds a frame (its frame
waits for a batch or runs): newer frames of that camera wait in the middleware, whose KEEP_LAST
history keeps only the newest. When it wakes it takes one frame from each camera that has one,
with rcl's take where it can (:mod:`..process.rcl_take`: one copy of the message fewer), and
hands each to its camera (``deliver``), which passes it to the batcher (:mod:`.batcher`). A
camera that lets go of its frame, or whose subscription is made, re-made or dropped, wakes it.

So the executor's thread never takes a frame: it stays free for services, parameters and
timers, as with one camera, whose frames the inference thread takes itself
(:meth:`~.frame_path.FramePath.take_from`).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Sequence

from rclpy.exceptions import InvalidHandle

from ..process import compat

#: Longest wait before the thread looks again at which cameras it waits on (a safety: every
#: change wakes it).
_POLL_S = 0.1


class FrameTaker:
    """Wait on several image inputs' subscriptions; deliver each ready camera's next frame."""

    def __init__(self, context: Any, sources: Sequence[Any],
                 holding: Sequence[Callable[[], bool]],
                 frame_errors: Sequence[Callable[[str], None]],
                 log_error: Callable[[str], None]) -> None:
        """Take the frames of ``sources`` (:class:`~.subscription.ImageInput` s) in ``context``.

        Each source gives its current rclpy ``subscription`` (None while it has none) and
        ``deliver``s a taken message; ``holding[i]()`` says whether camera ``i`` still holds
        a frame (then it is not taken from). A frame whose delivery raises is dropped and
        counted by ``frame_errors[i]``, as the single camera's inference thread does;
        ``log_error`` gets what a wait or a take raised.
        """
        self._context = context
        self._sources = list(sources)
        self._holding = list(holding)
        self._frame_errors = list(frame_errors)
        self._log_error = log_error
        self._wait: compat.SubscriptionWait | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        """Start taking; each source's ``on_change`` wakes the thread from now on."""
        self._stopping = False
        self._wait = compat.SubscriptionWait(self._context)
        for source in self._sources:
            source.on_change = self._wait.wake
        self._thread = threading.Thread(target=self._loop, name='frame taker', daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Look again at once: a camera let go of its frame (from any thread).

        Nothing once stopped: a batch finishing while the node deactivates still lets go.
        """
        wait = self._wait
        if wait is not None:
            try:
                wait.wake()
            except InvalidHandle:  # stopped meanwhile
                pass

    def stop(self) -> None:
        """Stop taking, after the frames being taken are delivered (idempotent)."""
        if self._thread is None:
            return
        self._stopping = True
        self._wait.wake()
        self._thread.join()
        self._thread = None
        for source in self._sources:
            source.on_change = None
        wait, self._wait = self._wait, None
        wait.destroy()

    def _loop(self) -> None:
        wait = self._wait
        while not self._stopping:
            subscriptions = [None if holding() else source.subscription
                             for source, holding in zip(self._sources, self._holding)]
            try:
                ready = wait.wait(subscriptions, _POLL_S)
            except InvalidHandle:  # the context is gone (the process is ending)
                return
            except Exception as exc:  # noqa: BLE001 - an event's callback; keep taking
                self._log_error(f'image subscription: {type(exc).__name__}: {exc}')
                time.sleep(_POLL_S)
                continue
            refused = False
            for position in ready:
                source = self._sources[position]
                try:
                    taken = wait.take_now(subscriptions[position])
                except Exception as exc:  # noqa: BLE001 - one camera's take; keep the others
                    self._log_error(f"image subscription '{source.label}': "
                                    f'{type(exc).__name__}: {exc}')
                    refused = True  # still ready: the next wait would return at once
                    continue
                if taken is None:
                    continue
                try:
                    source.deliver(*taken)
                except Exception as exc:  # noqa: BLE001 - costs this frame, not the thread
                    self._frame_errors[position](
                        f'frame dropped: {type(exc).__name__}: {exc}')
            if refused:  # as after a failed wait: no busy loop on a take rcl keeps refusing
                time.sleep(_POLL_S)
