"""Frame statistics and health rules behind the node's diagnostics. ROS-free.

:class:`FrameStats` is updated from the node's threads (the subscription callback counts
frames received and the stale frames the middleware dropped meanwhile; the inference worker
counts frames processed, their latency and errors) and read about once a second to publish
``/diagnostics``. Every update is O(1) under one lock; the sliding window is kept as bounded
deques of event times that are pruned when read.

:func:`assess` turns a :class:`StatsSnapshot` and the limits the user set
(:class:`HealthLimits`) into a level and a one-line reason: the rules are listed in the
Diagnostics section of docs/field-io.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from .text import clip

#: Diagnostic levels, the values of ``diagnostic_msgs/DiagnosticStatus``.
OK, WARN, ERROR = 0, 1, 2
LEVEL_NAMES = {OK: 'OK', WARN: 'WARN', ERROR: 'ERROR'}

#: Processing below this fraction of ``expected_rate`` is a WARN ...
RATE_WARN_FRACTION = 0.9
#: ... and below this one an ERROR.
RATE_ERROR_FRACTION = 0.5
#: Latency p95 above ``max_latency`` is a WARN, above this multiple of it an ERROR.
LATENCY_ERROR_FACTOR = 2.0
#: Rates are judged only once images have been arriving for this long (seconds).
RATE_SETTLE_S = 3.0
#: A median DDS delivery → callback time (the ``receive`` stage) above this is a WARN:
#: ~2 ms for a 2.6 MB image with config/fastdds_large_images.xml, 12-24 ms with stock Fast DDS
#: repairing its fragments (docs/benchmarks.md).
SLOW_DELIVERY_S = 0.010
#: ... judged over at least this many frames.
DELIVERY_MIN_FRAMES = 10


@dataclass(frozen=True)
class StatsSnapshot:
    """What :class:`FrameStats` knew at one moment. Times in seconds, rates in Hz."""

    received: int            # totals since the last reset (activation)
    processed: int
    dropped: int
    errors: int
    received_in_window: int  # the same over the sliding window
    processed_in_window: int
    dropped_in_window: int
    errors_in_window: int
    input_rate_hz: float
    processed_rate_hz: float
    latency_p50_s: float | None   # image stamp → publish; None without samples
    latency_p95_s: float | None
    processing_p50_s: float | None  # time the worker spent on a frame
    since_last_image_s: float | None  # None: no image since the reset
    since_first_image_s: float | None
    since_reset_s: float
    window_s: float
    last_error: str | None


@dataclass(frozen=True)
class HealthLimits:
    """User limits the health rules check; 0 switches a check off."""

    expected_rate_hz: float = 0.0
    max_latency_s: float = 0.0
    no_image_timeout_s: float = 5.0


@dataclass(frozen=True)
class Health:
    """A level (:data:`OK`, :data:`WARN`, :data:`ERROR`) and the one-line reason for it."""

    level: int
    message: str


def _percentile(ordered: list[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` (0-100) of an ascending, non-empty list."""
    position = (len(ordered) - 1) * q / 100.0
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class FrameStats:
    """Thread-safe counters and a sliding window of frame events (O(1) per update).

    ``window_s`` is the span rates and percentiles cover; ``max_events`` bounds the memory
    of each event kind (at rates above ``max_events / window_s`` the window shrinks to the
    newest ``max_events`` events, and rates are measured over those).
    """

    def __init__(self, window_s: float = 10.0, max_events: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if window_s <= 0 or max_events < 2:
            raise ValueError('window_s must be > 0 and max_events >= 2')
        self.window_s = float(window_s)
        self._clock = clock
        self._lock = threading.Lock()
        self._max = int(max_events)
        self.reset()

    def reset(self) -> None:
        """Forget everything; the node calls this on activate."""
        with self._lock:
            self._reset_at = self._clock()
            self._totals = {'received': 0, 'processed': 0, 'dropped': 0, 'errors': 0}
            self._received: deque = deque(maxlen=self._max)
            self._processed: deque = deque(maxlen=self._max)  # (time, latency, processing)
            self._dropped: deque = deque(maxlen=self._max)
            self._errors: deque = deque(maxlen=self._max)
            self._first_image: float | None = None
            self._first_processed: float | None = None
            self._last_image: float | None = None
            self._last_error: str | None = None

    def on_received(self) -> None:
        """Count a frame that arrived (before it is queued for the worker)."""
        with self._lock:
            now = self._clock()
            self._totals['received'] += 1
            self._received.append(now)
            self._last_image = now
            if self._first_image is None:
                self._first_image = now

    def on_dropped(self) -> None:
        """Count a stale frame dropped before the inference thread could take it."""
        with self._lock:
            self._totals['dropped'] += 1
            self._dropped.append(self._clock())

    def on_processed(self, latency_s: float | None = None,
                     processing_s: float | None = None) -> None:
        """Count a frame whose result was published.

        ``latency_s``: image stamp → publish (None when the image had no stamp);
        ``processing_s``: the worker's time on the frame.
        """
        with self._lock:
            now = self._clock()
            self._totals['processed'] += 1
            self._processed.append((now, latency_s, processing_s))
            if self._first_processed is None:
                self._first_processed = now

    def on_error(self, message: str = '') -> None:
        """Count a frame that failed (bad image, inference error); keep its message."""
        with self._lock:
            self._totals['errors'] += 1
            self._errors.append(self._clock())
            if message:
                self._last_error = clip(message)

    def _prune(self, events: deque, cutoff: float, timed=lambda e: e) -> None:
        while events and timed(events[0]) <= cutoff:
            events.popleft()

    def _rate(self, events: deque, now: float, cutoff: float, first: float | None,
              timed=lambda e: e) -> float:
        """Events per second over the window, or since ``first`` when that is more recent."""
        count = len(events)
        if count == 0:
            return 0.0
        oldest = timed(events[0])
        if count == self._max and oldest > cutoff:  # saturated: measure over what is kept
            start = oldest
        elif first is not None and first > cutoff:  # the stream began inside the window
            start = first
        else:
            return count / self.window_s
        # The first event starts the clock; the ones after it make the rate.
        return (count - 1) / (now - start) if now > start and count > 1 else 0.0

    def snapshot(self) -> StatsSnapshot:
        """Return the current counters, rates and percentiles."""
        with self._lock:
            now = self._clock()
            cutoff = now - self.window_s
            stamp = (lambda e: e[0])
            for events in (self._received, self._dropped, self._errors):
                self._prune(events, cutoff)
            self._prune(self._processed, cutoff, stamp)
            latencies = sorted(e[1] for e in self._processed if e[1] is not None)
            processing = sorted(e[2] for e in self._processed if e[2] is not None)
            return StatsSnapshot(
                received=self._totals['received'], processed=self._totals['processed'],
                dropped=self._totals['dropped'], errors=self._totals['errors'],
                received_in_window=len(self._received),
                processed_in_window=len(self._processed),
                dropped_in_window=len(self._dropped), errors_in_window=len(self._errors),
                input_rate_hz=self._rate(self._received, now, cutoff, self._first_image),
                processed_rate_hz=self._rate(self._processed, now, cutoff,
                                             self._first_processed, stamp),
                latency_p50_s=_percentile(latencies, 50) if latencies else None,
                latency_p95_s=_percentile(latencies, 95) if latencies else None,
                processing_p50_s=_percentile(processing, 50) if processing else None,
                since_last_image_s=None if self._last_image is None else now - self._last_image,
                since_first_image_s=(None if self._first_image is None
                                     else now - self._first_image),
                since_reset_s=now - self._reset_at, window_s=self.window_s,
                last_error=self._last_error)


def stamp_latency(stamp_sec: int, stamp_nanosec: int, now_ns: int) -> float | None:
    """Seconds from an image's header stamp to ``now_ns`` (same clock); None if unstamped."""
    if stamp_sec == 0 and stamp_nanosec == 0:
        return None
    return (now_ns - (stamp_sec * 1_000_000_000 + stamp_nanosec)) / 1e9


def host_rss_bytes() -> int | None:
    """Resident memory of this process from ``/proc/self/statm`` (None where there is none)."""
    try:
        with open('/proc/self/statm', 'rb') as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf('SC_PAGE_SIZE')


def _rate_reason(snap: StatsSnapshot, expected: float) -> str:
    """Say why processing is slow: the input is slow, or the model cannot keep up."""
    text = f'processing {snap.processed_rate_hz:.1f} Hz, expected {expected:g} Hz'
    if snap.input_rate_hz < RATE_WARN_FRACTION * expected:
        return (f'{text}: images arrive at only {snap.input_rate_hz:.1f} Hz (a slower camera, '
                'or frames lost on the way: a best-effort subscription loses large frames '
                'with stock Fast DDS)')
    share = snap.dropped_in_window / max(snap.received_in_window, 1)
    return (f'{text}: images arrive at {snap.input_rate_hz:.1f} Hz and {share:.0%} are '
            'dropped unprocessed (the model is slower than the camera: a faster backend or '
            'precision, a smaller model, or a lower camera rate)')


def assess(snap: StatsSnapshot, limits: HealthLimits, state: str = 'active',
           explain_silence: Callable[[], str] | None = None,
           delivery: tuple[float, int] | None = None,
           explain_slow_delivery: Callable[[], str] | None = None) -> Health:
    """Apply the health rules; the worst level wins and the reasons are joined.

    ``state`` is the lifecycle state: anything but ``active`` is OK (not expected to
    process). ``explain_silence`` is called only when no image arrived for
    ``limits.no_image_timeout_s``; it returns the likely cause (see
    :func:`vision_nodes.ros.inputs.qos.explain_silence`). ``delivery`` is the median seconds from
    DDS delivery to the node's callback and the number of frames it is taken over;
    ``explain_slow_delivery`` is called only when that median is above
    :data:`SLOW_DELIVERY_S` (see :func:`vision_nodes.ros.inputs.qos.explain_slow_delivery`).
    """
    if state != 'active':
        return Health(OK, f'{state}: not processing images')
    found: list[tuple[int, str]] = []
    timeout = limits.no_image_timeout_s
    waited = snap.since_reset_s if snap.since_last_image_s is None else snap.since_last_image_s
    if timeout > 0 and waited >= timeout:
        since = 'since activation' if snap.since_last_image_s is None else 'since the last one'
        cause = explain_silence() if explain_silence is not None else ''
        found.append((ERROR, f'no image for {waited:.0f} s ({since})' +
                      (f': {cause}' if cause else '')))
    expected = limits.expected_rate_hz
    settled = (snap.since_first_image_s or 0.0) >= min(RATE_SETTLE_S, snap.window_s)
    if expected > 0 and settled and not found:
        if snap.processed_rate_hz < RATE_ERROR_FRACTION * expected:
            found.append((ERROR, _rate_reason(snap, expected)))
        elif snap.processed_rate_hz < RATE_WARN_FRACTION * expected:
            found.append((WARN, _rate_reason(snap, expected)))
    bound = limits.max_latency_s
    if bound > 0 and snap.latency_p95_s is not None and snap.latency_p95_s > bound:
        level = ERROR if snap.latency_p95_s > LATENCY_ERROR_FACTOR * bound else WARN
        found.append((level, f'latency p95 {snap.latency_p95_s * 1e3:.0f} ms is above '
                             f'max_latency {bound * 1e3:.0f} ms'))
    if delivery is not None and delivery[1] >= DELIVERY_MIN_FRAMES \
            and delivery[0] > SLOW_DELIVERY_S:
        cause = explain_slow_delivery() if explain_slow_delivery is not None else ''
        found.append((WARN, f'images reach the node {delivery[0] * 1e3:.0f} ms after DDS '
                            'delivered them (median)' + (f': {cause}' if cause else '')))
    if snap.errors_in_window:
        last = f' (last: {snap.last_error})' if snap.last_error else ''
        if snap.processed_in_window == 0:
            found.append((ERROR, f'every frame failed in the last {snap.window_s:.0f} s: '
                                 f'{snap.errors_in_window} errors{last}'))
        else:
            found.append((WARN, f'{snap.errors_in_window} frames failed in the last '
                                f'{snap.window_s:.0f} s{last}'))
    if not found:
        return Health(OK, f'processing {snap.processed_rate_hz:.1f} Hz')
    level = max(lvl for lvl, _ in found)
    return Health(level, '; '.join(text for _, text in sorted(found, key=lambda f: -f[0])))
