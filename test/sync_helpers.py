"""An approximate-time synchroniser for tests: message_filters is not installable here.

Follows the policy of message_filters' Python ``ApproximateTimeSynchronizer`` (ros2/
message_filters), so a test that pairs images with detections checks what a user's
``message_filters`` code would get:

* one queue per input, keyed by header stamp (a second message with the same stamp replaces
  the first); beyond ``queue_size`` entries the oldest stamp is dropped;
* when a message arrives, every other input's queued stamps within ``slop`` of its stamp are
  candidates, closest first; if an input has none, nothing is emitted;
* the candidate combinations are tried in that order, and the first whose stamps (the new
  message's included) span strictly less than ``slop`` is emitted, once: its messages leave
  their queues.

Headerless messages (``allow_headerless``) are not supported: every output of the node
carries its input's header. The C++ ``ApproximateTime`` policy uses a different search (it
waits for the best set across queues); this one is the Python package's.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Sequence


def stamp_ns(msg) -> int:
    """Return a message's ``header.stamp`` in nanoseconds."""
    stamp = msg.header.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


class ApproximateTimeSynchronizer:
    """Pair messages of ``inputs`` streams whose stamps lie within ``slop`` seconds."""

    def __init__(self, inputs: int, queue_size: int, slop: float,
                 callback: Callable[..., None] | None = None) -> None:
        if inputs < 2 or queue_size < 1 or slop < 0:
            raise ValueError('need inputs >= 2, queue_size >= 1 and slop >= 0')
        self.queue_size = queue_size
        self.slop_ns = int(round(slop * 1e9))
        self.callback = callback
        #: Every emitted set, in order (also when a callback is given).
        self.sets: list[tuple[Any, ...]] = []
        self._queues: list[dict[int, Any]] = [{} for _ in range(inputs)]
        self._lock = threading.Lock()
        self._subscriptions: list = []

    def add(self, index: int, msg, stamp: int | None = None) -> tuple[Any, ...] | None:
        """Queue ``msg`` on input ``index``; return the set it completed, if any."""
        stamp = stamp_ns(msg) if stamp is None else stamp
        with self._lock:
            queue = self._queues[index]
            queue[stamp] = msg
            while len(queue) > self.queue_size:
                del queue[min(queue)]
            if stamp not in queue:  # it was the oldest and fell out
                return None
            candidates = []
            for other_index, other in enumerate(self._queues):
                if other_index == index:
                    continue
                near = sorted((s for s in other if abs(s - stamp) <= self.slop_ns),
                              key=lambda s: abs(s - stamp))
                if not near:
                    return None
                candidates.append(near)
            for combination in itertools.product(*candidates):
                stamps = list(combination)
                stamps.insert(index, stamp)
                if max(stamps) - min(stamps) < self.slop_ns:
                    found = tuple(q.pop(s) for q, s in zip(self._queues, stamps))
                    break
            else:
                return None
        self.sets.append(found)
        if self.callback is not None:
            self.callback(*found)
        return found

    def connect(self, node, inputs: Sequence[tuple[type, str, Any]]) -> list:
        """Subscribe ``node`` to each ``(msg_type, topic, qos)``, feeding input 0, 1, ..."""
        if len(inputs) != len(self._queues):
            raise ValueError(f'expected {len(self._queues)} inputs, got {len(inputs)}')
        for index, (msg_type, topic, qos) in enumerate(inputs):
            self._subscriptions.append(node.create_subscription(
                msg_type, topic, lambda msg, index=index: self.add(index, msg), qos))
        return list(self._subscriptions)

    def pending(self) -> list[int]:
        """Return how many messages wait in each input's queue."""
        with self._lock:
            return [len(q) for q in self._queues]
