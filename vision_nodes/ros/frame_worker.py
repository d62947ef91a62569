"""One inference thread fed by a one-slot mailbox: the newest frame wins.

The image subscription's callback only drops the message into the mailbox and returns, so the
executor's thread stays free to answer services and take the next message while a frame is
being processed. A frame still waiting when a newer one arrives is replaced (and counted as
dropped): a frame is never queued behind inference, so what the node publishes is always
about the newest image it could process.
"""

from __future__ import annotations

import threading
from typing import Any, Callable


class FrameWorker:
    """Process submitted frames on a thread of its own, newest first, one at a time."""

    def __init__(self, process: Callable[[Any], None],
                 on_drop: Callable[[], None] = lambda: None, name: str = 'inference') -> None:
        self._process = process
        self._on_drop = on_drop
        self._name = name
        self._cv = threading.Condition()
        self._pending: Any = None
        self._has_pending = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (no-op when running)."""
        with self._cv:
            if self._thread is not None:
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            self._thread.start()

    def submit(self, frame: Any) -> None:
        """Hand a frame over; a frame still waiting is replaced and counted as dropped."""
        with self._cv:
            if self._thread is None or self._stopping:
                return
            dropped = self._has_pending
            self._pending, self._has_pending = frame, True
            self._cv.notify()
        if dropped:
            self._on_drop()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop after the frame in flight (a waiting one is discarded); True once stopped."""
        with self._cv:
            thread = self._thread
            if thread is None:
                return True
            self._stopping = True
            self._pending, self._has_pending = None, False
            self._cv.notify()
        thread.join(timeout)
        if thread.is_alive():
            return False
        with self._cv:
            self._thread = None
        return True

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._has_pending and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                frame, self._pending, self._has_pending = self._pending, None, False
            self._process(frame)
