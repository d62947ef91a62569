"""The test-only approximate-time synchroniser (test/sync_helpers.py) on its own.

The cases follow the Python message_filters ApproximateTimeSynchronizer policy: queue per
input bounded by queue_size, candidates within slop closest first, a set spanning strictly
less than slop emitted once. The last test pairs messages sent over real DDS.
"""

from __future__ import annotations

import random

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import Image
from std_msgs.msg import Header
from vision_msgs.msg import Detection2DArray

from sync_helpers import ApproximateTimeSynchronizer, stamp_ns
from vision_nodes.tools.client import wait_for


class Msg:
    """A stamped message with a label, enough for the synchroniser."""

    def __init__(self, seconds: float, label: str = '') -> None:
        total = int(round(seconds * 1e9))
        self.header = Header()
        self.header.stamp.sec, self.header.stamp.nanosec = divmod(total, 1_000_000_000)
        self.label = label

    def __repr__(self) -> str:
        return f'Msg({stamp_ns(self) / 1e9:g}, {self.label!r})'


def test_equal_stamps_pair_when_the_second_arrives():
    sync = ApproximateTimeSynchronizer(2, queue_size=1, slop=0.1)
    for t in range(5):
        a, b = Msg(t, 'image'), Msg(t, 'detections')
        assert sync.add(0, a) is None
        assert sync.add(1, b) == (a, b)
    assert len(sync.sets) == 5 and sync.pending() == [0, 0]


@pytest.mark.parametrize('count', [1, 4, 9])
def test_scrambled_streams_recombine(count):
    rng = random.Random(count)
    first = [Msg(t, f'a{t}') for t in range(count)]
    second = [Msg(t + 0.01, f'b{t}') for t in range(count)]
    sync = ApproximateTimeSynchronizer(2, queue_size=count, slop=0.1)
    for msg in rng.sample(first, count):
        assert sync.add(0, msg) is None
    for msg in rng.sample(second, count):
        sync.add(1, msg)
    assert set(sync.sets) == set(zip(first, second))


def test_slop_bounds_the_spread_strictly():
    sync = ApproximateTimeSynchronizer(2, queue_size=10, slop=0.1)
    sync.add(0, Msg(1.0))
    assert sync.add(1, Msg(1.05)) is not None  # within slop
    sync.add(0, Msg(2.0))
    assert sync.add(1, Msg(2.15)) is None      # beyond slop
    sync.add(0, Msg(3.0))
    assert sync.add(1, Msg(3.1)) is None       # spread equal to slop: not < slop
    assert sync.pending() == [2, 2]


def test_queue_size_drops_the_oldest():
    sync = ApproximateTimeSynchronizer(2, queue_size=2, slop=0.05)
    for t in (1.0, 2.0, 3.0):
        sync.add(0, Msg(t))
    assert sync.pending() == [2, 0]
    assert sync.add(1, Msg(1.0)) is None  # its partner was dropped
    assert sync.add(1, Msg(2.0)) is not None
    # A message older than everything in a full queue falls out at once.
    sync = ApproximateTimeSynchronizer(2, queue_size=1, slop=0.05)
    sync.add(0, Msg(5.0))
    sync.add(1, Msg(5.5))
    assert sync.add(1, Msg(5.01)) is None and sync.pending() == [1, 1]


def test_closest_candidate_wins_and_is_used_once():
    sync = ApproximateTimeSynchronizer(2, queue_size=10, slop=0.1)
    far, near = Msg(1.06, 'far'), Msg(1.02, 'near')
    sync.add(0, far)
    sync.add(0, near)
    detections = Msg(1.0, 'detections')
    assert sync.add(1, detections) == (near, detections)
    again = Msg(1.0, 'again')
    assert sync.add(1, again) == (far, again)
    assert sync.pending() == [0, 0]


def test_same_stamp_replaces_the_queued_message():
    sync = ApproximateTimeSynchronizer(2, queue_size=5, slop=0.1)
    sync.add(0, Msg(1.0, 'old'))
    newer = Msg(1.0, 'new')
    sync.add(0, newer)
    assert sync.pending() == [1, 0]
    assert sync.add(1, Msg(1.0))[0] is newer


def test_three_inputs_need_all_three():
    sync = ApproximateTimeSynchronizer(3, queue_size=5, slop=0.05)
    sync.add(0, Msg(1.00))
    assert sync.add(1, Msg(1.01)) is None
    found = sync.add(2, Msg(1.03))
    assert [stamp_ns(m) for m in found] == [1_000_000_000, 1_010_000_000, 1_030_000_000]
    # A combination spanning more than slop is refused even if each pair is close.
    sync.add(0, Msg(2.00))
    sync.add(1, Msg(2.04))
    assert sync.add(2, Msg(2.08)) is None


def test_callback_receives_each_set():
    got = []
    sync = ApproximateTimeSynchronizer(2, 3, 0.1, callback=lambda a, b: got.append((a, b)))
    a, b = Msg(1.0), Msg(1.0)
    sync.add(0, a)
    sync.add(1, b)
    assert got == [(a, b)] == sync.sets


def test_bad_arguments():
    with pytest.raises(ValueError):
        ApproximateTimeSynchronizer(1, 5, 0.1)
    with pytest.raises(ValueError):
        ApproximateTimeSynchronizer(2, 0, 0.1)


def test_pairs_messages_sent_over_dds():
    """Images and detections with stamps a few ms apart, published by another node."""
    context = rclpy.Context()
    rclpy.init(context=context)
    sender = rclpy.create_node('sync_sender', context=context)
    receiver = rclpy.create_node('sync_receiver', context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(receiver)
    try:
        sync = ApproximateTimeSynchronizer(2, queue_size=10, slop=0.02)
        sync.connect(receiver, [(Image, '/sync_test/image', 10),
                                (Detection2DArray, '/sync_test/detections', 10)])
        images = sender.create_publisher(Image, '/sync_test/image', 10)
        detections = sender.create_publisher(Detection2DArray, '/sync_test/detections', 10)
        assert wait_for(lambda: images.get_subscription_count() == 1
                        and detections.get_subscription_count() == 1, 10)
        for frame in range(5):
            image = Image(header=Msg(100 + frame).header)
            image.header.frame_id = f'frame{frame}'
            answer = Detection2DArray(header=Msg(100 + frame + 0.004).header)
            answer.header.frame_id = f'frame{frame}'
            images.publish(image)
            detections.publish(answer)
        assert wait_for(lambda: (executor.spin_once(timeout_sec=0.05), len(sync.sets))[1] == 5,
                        10)
        assert [(a.header.frame_id, b.header.frame_id) for a, b in sync.sets] == \
            [(f'frame{i}', f'frame{i}') for i in range(5)]
    finally:
        executor.shutdown()
        sender.destroy_node()
        receiver.destroy_node()
        rclpy.shutdown(context=context)
