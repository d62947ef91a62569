"""The frame path's subscription end: DDS timestamps and sequence gaps, per frame taken.

A real rclpy node (the path needs its guard condition); frames go to a sink instead of the
inference thread, so what the callback hands over is seen as it is.
"""

from __future__ import annotations

import time

import pytest

from node_harness import node_in_own_context
from vision_nodes.ros.inputs.frame_path import FramePath


class Sink:
    """Stands where the inference thread's queue (or the batcher) stands: keeps what it gets."""

    def __init__(self) -> None:
        self.items: list = []

    def put(self, item) -> None:
        self.items.append(item)


@pytest.fixture(scope='module')
def node():
    with node_in_own_context('frame_path_test') as node:
        yield node


def _info(seq: int, source_ns: int, received_ns: int) -> dict:
    return {'source_timestamp': source_ns, 'received_timestamp': received_ns,
            'publication_sequence_number': seq, 'publisher_gid': {'data': b'g' * 16}}


def test_a_frame_that_came_while_the_gate_was_shut_is_timed_from_its_opening(node):
    sink = Sink()
    path = FramePath(node, log_error=lambda _: None, lazy=lambda: False, sink=sink)
    try:
        now = time.time_ns()
        path.on_image_with_info('first', _info(1, now - 3_000_000, now - 2_000_000))
        assert not path.gate.open
        _, times, called = sink.items[-1]
        # Nothing was in flight: taken as delivered.
        assert times == (now - 3_000_000, now - 2_000_000, now - 2_000_000) and called >= now
        # The next frame arrives while the first is processed, then the gate opens.
        arrived = time.time_ns()
        path.reopen()
        opened = path._opened_ns
        assert path.gate.open and opened >= arrived
        path.on_image_with_info('second', _info(2, arrived - 1_000_000, arrived))
        _, times, called = sink.items[-1]
        # dds_in stays the middleware's; receive starts when the frame could be taken.
        assert times[:2] == (arrived - 1_000_000, arrived) and times[2] == opened
        assert called >= opened
        # Without the middleware's timestamps the frame carries none.
        path.reopen()
        path.on_image_with_info('third', {'source_timestamp': 0, 'received_timestamp': 0})
        assert sink.items[-1][1] is None
    finally:
        path.close()


def test_the_gap_in_sequence_numbers_counts_dropped_frames(node):
    sink = Sink()
    path = FramePath(node, log_error=lambda _: None, lazy=lambda: False, sink=sink)
    try:
        now = time.time_ns()
        for seq in (7, 8, 12):  # 9, 10 and 11 were replaced in the middleware
            path.on_image_with_info(f'frame {seq}', _info(seq, now, now))
            path.reopen()
        snap = path.stats.snapshot()
        assert [m for m, _, _ in sink.items] == ['frame 7', 'frame 8', 'frame 12']
        assert (snap.received, snap.dropped) == (6, 3)
    finally:
        path.close()
