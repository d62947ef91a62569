"""Error logging that a flood of bad input cannot turn into a flood of log lines.

Each distinct message is logged at once and then at most once per ``period_s``; on top of
that, at most ``burst`` lines per ``period_s`` go out in all, whatever their text, and the
number held back is reported with the next line that goes out. Texts are clipped
(:func:`vision_nodes.text.clip`) before they are compared or logged, so a message that
quotes untrusted input stays one bounded line.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable

from ...text import clip


class LogLimiter:
    """Rate-limited, clipped logging of repeated and distinct messages (thread-safe)."""

    def __init__(self, log: Callable[[str], None], period_s: float = 5.0, burst: int = 10,
                 limit: int = 300, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._period = period_s
        self._burst = burst
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._last: OrderedDict[str, float] = OrderedDict()
        self._window_start = -period_s
        self._in_window = 0
        #: Lines held back since the last one that went out.
        self.suppressed = 0

    def __call__(self, text: str) -> bool:
        """Log ``text`` unless the limits hold it back; True when it went out."""
        line = clip(text, self._limit)
        now = self._clock()
        with self._lock:
            last = self._last.get(line)
            if last is not None and now - last < self._period:
                self.suppressed += 1
                return False
            if now - self._window_start >= self._period:
                self._window_start, self._in_window = now, 0
            if self._in_window >= self._burst:
                self.suppressed += 1
                return False
            self._in_window += 1
            self._last[line] = now
            self._last.move_to_end(line)
            while len(self._last) > 256:
                self._last.popitem(last=False)
            held, self.suppressed = self.suppressed, 0
        if held:
            line += f' ({held} similar or repeated messages suppressed before this one)'
        self._log(line)
        return True
