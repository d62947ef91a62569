"""The frame path's subscription end: DDS timestamps and sequence gaps, per frame taken.

A real rclpy node (the path needs its guard condition); frames go to a sink instead of the
inference thread, so what the callback hands over is seen as it is. Then the inference thread
taking its frames itself (``take_from``): real DDS, real wait sets, and no executor spinning
at all, so whatever arrives was taken by that thread.
"""

from __future__ import annotations

import threading
import time

import pytest
from rclpy.exceptions import InvalidHandle
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from std_msgs.msg import Header

from node_harness import node_in_own_context
from vision_nodes.ros.inputs.frame_path import FramePath
from vision_nodes.ros.process import compat
from vision_nodes.ros.process.compat import SubscriptionWait
from vision_nodes.tools.client import wait_for

RELIABLE = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)


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


def test_a_frame_that_came_while_one_was_held_is_timed_from_its_letting_go(node):
    sink = Sink()
    path = FramePath(node, log_error=lambda _: None, lazy=lambda: False, sink=sink)
    now = time.time_ns()
    path.on_image('first', _info(1, now - 3_000_000, now - 2_000_000))
    assert path.holding
    _, times, called = sink.items[-1]
    # Nothing was in flight: taken as delivered.
    assert times == (now - 3_000_000, now - 2_000_000, now - 2_000_000) and called >= now
    # The next frame arrives while the first is processed, then the path lets go of it.
    arrived = time.time_ns()
    path.reopen()
    opened = path._opened_ns
    assert not path.holding and opened >= arrived
    path.on_image('second', _info(2, arrived - 1_000_000, arrived))
    _, times, called = sink.items[-1]
    # dds_in stays the middleware's; receive starts when the frame could be taken.
    assert times[:2] == (arrived - 1_000_000, arrived) and times[2] == opened
    assert called >= opened
    # Without the middleware's timestamps the frame carries none.
    path.reopen()
    path.on_image('third', {'source_timestamp': 0, 'received_timestamp': 0})
    assert sink.items[-1][1] is None


def test_the_gap_in_sequence_numbers_counts_dropped_frames(node):
    sink = Sink()
    path = FramePath(node, log_error=lambda _: None, lazy=lambda: False, sink=sink)
    now = time.time_ns()
    for seq in (7, 8, 12):  # 9, 10 and 11 were replaced in the middleware
        path.on_image(f'frame {seq}', _info(seq, now, now))
        path.reopen()
    snap = path.stats.snapshot()
    assert [m for m, _, _ in sink.items] == ['frame 7', 'frame 8', 'frame 12']
    assert (snap.received, snap.dropped) == (6, 3)


def test_the_subscription_callback_gets_the_message_info_where_rclpy_gives_it(node, monkeypatch):
    """with_message_info: this rclpy hands the info (timestamps, sequence number) on; Humble's,
    which calls a callback with the message alone, gets None for it (no drops counted)."""
    sink = Sink()
    path = FramePath(node, log_error=lambda _: None, lazy=lambda: False, sink=sink)
    pub = node.create_publisher(Header, 'info_frames', RELIABLE)
    sub = node.create_subscription(Header, 'info_frames', compat.with_message_info(path.on_image),
                                   RELIABLE)
    waiter = SubscriptionWait(node.context)
    try:
        assert compat.MESSAGE_INFO  # kilted: callbacks may take the info
        assert wait_for(lambda: pub.get_subscription_count() > 0, 30.0)
        pub.publish(Header(frame_id='with info'))
        taken = []
        assert wait_for(lambda: taken.append(waiter.take(sub, 0.1)) or taken[-1], 60.0)
        sub.callback(*taken[-1])  # as the executor would call it: (message, info)
        msg, times, _ = sink.items[-1]
        assert msg.frame_id == 'with info'
        assert times is not None and times[0] <= times[1]  # DDS source and reception times
        humble = []
        monkeypatch.setattr(compat, 'MESSAGE_INFO', False)
        compat.with_message_info(lambda msg, info: humble.append((msg, info)))('m')
        assert humble == [('m', None)]
        path.on_image('alone')  # what a Humble subscription hands over
        assert sink.items[-1][0] == 'alone' and sink.items[-1][1] is None
        assert path.stats.snapshot().dropped == 0
    finally:
        waiter.destroy()
        node.destroy_subscription(sub)
        node.destroy_publisher(pub)


def _pair(node, topic: str, **kwargs):
    """A raw subscription (never spun) and a publisher of ``Header`` on ``topic``, matched."""
    sub = node.create_subscription(Header, topic, lambda _: None, RELIABLE, raw=True, **kwargs)
    pub = node.create_publisher(Header, topic, RELIABLE)
    assert wait_for(lambda: pub.get_subscription_count() > 0, 30.0)
    return sub, pub


def test_a_subscription_wait_takes_the_message_and_ends_on_wake(node):
    """The wait set outside the executor: a message with its DDS info; wake; no subscription."""
    waiter = SubscriptionWait(node.context)
    sub, pub = _pair(node, 'wait_takes')
    try:
        assert waiter.take(None, 0.01) is None  # nothing to wait on but the wake-up
        pub.publish(Header(frame_id='one'))
        taken = None
        for _ in range(300):  # 0.1 s waits: the sample may still be on its way
            taken = taken or waiter.take(sub, 0.1)
        data, info = taken  # rcl's take: a read-only view of its pooled buffer (test_rcl_take)
        assert isinstance(data, memoryview) and data.readonly
        assert deserialize_message(bytes(data), Header).frame_id == 'one'
        assert info['received_timestamp'] >= info['source_timestamp'] > 0
        # Nothing more to take: a wake from another thread ends a long wait.
        timer = threading.Timer(0.2, waiter.wake)
        timer.start()
        started = time.monotonic()
        assert waiter.take(sub, 600.0) is None
        assert time.monotonic() - started < 300.0
        timer.join()
    finally:
        waiter.destroy()
        node.destroy_publisher(pub)
        node.destroy_subscription(sub)


def test_a_subscription_destroyed_during_the_wait_ends_it_safely(node):
    """Another thread destroys the subscription being waited on: the wait ends, nothing breaks."""
    waiter = SubscriptionWait(node.context)
    sub, pub = _pair(node, 'wait_destroyed')
    results = []
    thread = threading.Thread(target=lambda: results.append(waiter.take(sub, 600.0)))
    try:
        thread.start()
        time.sleep(0.2)  # let it wait (it would end the same way if it had not begun)
        node.destroy_subscription(sub)
        waiter.wake()
        thread.join(300.0)
        assert not thread.is_alive() and results == [None]
        assert waiter.take(sub, 0.01) is None  # destroyed before the wait: None, no error
    finally:
        waiter.wake()
        thread.join(300.0)
        waiter.destroy()
        node.destroy_publisher(pub)
    # A destroyed wait has nothing left to wait for: it says so, it does not return at once.
    with pytest.raises(InvalidHandle):
        waiter.take(None, 600.0)


def test_the_subscriptions_events_run_in_the_wait(node):
    """An incompatible publisher's event reaches the subscription's callback in the wait."""
    from vision_nodes.ros.inputs.subscription import SubscriptionEventCallbacks

    heard = []
    waiter = SubscriptionWait(node.context)
    sub = node.create_subscription(
        Header, 'wait_events', lambda _: None, RELIABLE, raw=True,
        event_callbacks=SubscriptionEventCallbacks(incompatible_qos=heard.append))
    pub = node.create_publisher(Header, 'wait_events', QoSProfile(
        depth=1, reliability=ReliabilityPolicy.BEST_EFFORT))
    try:
        assert wait_for(lambda: waiter.take(sub, 0.1) is None and bool(heard), 60.0)
        assert heard[0].total_count >= 1
    finally:
        waiter.destroy()
        node.destroy_publisher(pub)
        node.destroy_subscription(sub)


def test_the_executor_leaves_the_image_subscriptions_messages_to_the_taking_thread(node):
    """A subscription in the path's callback group is never run by a spinning executor: the
    control subscription beside it, on the same topic, gets three messages; the image one's
    callback none, and the newest message waits in it for the thread that takes."""
    from rclpy.executors import SingleThreadedExecutor

    path = FramePath(node, log_error=lambda _: None, lazy=lambda: False)
    ran, control = [], []
    sub = node.create_subscription(Header, 'left_alone', ran.append, RELIABLE, raw=True,
                                   callback_group=path.callback_group)
    seen = node.create_subscription(Header, 'left_alone', control.append, RELIABLE)
    pub = node.create_publisher(Header, 'left_alone', RELIABLE)
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    waiter = SubscriptionWait(node.context)
    try:
        assert wait_for(lambda: pub.get_subscription_count() == 2, 30.0)
        for index in range(3):
            pub.publish(Header(frame_id=str(index)))
            assert wait_for(lambda: (executor.spin_once(0.05), len(control) > index)[1], 60.0)
        assert ran == []
        taken = []  # what the executor left: the newest message, whenever it has arrived

        def took_newest() -> bool:
            got = waiter.take(sub, 0.1)
            if got is not None:
                taken.append(deserialize_message(bytes(got[0]), Header).frame_id)
            return taken[-1:] == ['2']
        assert wait_for(took_newest, 60.0), taken
        assert ran == []
    finally:
        executor.remove_node(node)
        executor.shutdown()
        waiter.destroy()
        for entity in (sub, seen):
            node.destroy_subscription(entity)
        node.destroy_publisher(pub)


class Source:
    """An image input as the frame path and the taker see it (``ImageInput``'s members), on
    ``Header``.

    The subscription and DDS are real; ``deliver`` notes the thread it runs on.
    """

    label = 'camera'

    def __init__(self, path: FramePath, subscription) -> None:
        self.subscription = subscription
        self.on_change = None
        self.threads: list[str] = []
        self._path = path

    def deliver(self, data: bytes, info) -> None:
        self.threads.append(threading.current_thread().name)
        self._path.on_image(data, info)


class Failing(Source):
    """A source whose first delivered frame raises (a reader, a callback gone wrong)."""

    label = 'failing'

    def deliver(self, data: bytes, info) -> None:
        if not self.threads:
            self.threads.append('raised')
            raise RuntimeError('unreadable frame')
        super().deliver(data, info)


def test_a_frame_that_raises_on_delivery_costs_that_frame_not_the_inference_thread(node):
    errors: list[str] = []
    path = FramePath(node, log_error=errors.append, lazy=lambda: False)
    sub, pub = _pair(node, 'own_failing')
    try:
        path.take_from(Failing(path, sub))
        path.start()
        assert wait_for(lambda: (pub.publish(Header(frame_id='a')),
                                 path.stats.snapshot().received >= 1)[1], 60.0)
        assert errors == ['frame dropped: RuntimeError: unreadable frame']
        assert path.stats.snapshot().errors == 1
    finally:
        path.stop()
        node.destroy_publisher(pub)
        node.destroy_subscription(sub)


def test_the_inference_thread_takes_its_frames_itself(node):
    """take_from: no executor spins, yet frames arrive, taken on the inference thread."""
    path = FramePath(node, log_error=lambda _: None, lazy=lambda: False)
    sub, pub = _pair(node, 'own_frames')
    source = Source(path, sub)
    try:
        path.take_from(source)
        assert source.on_change is not None  # a new subscription wakes the thread
        path.start()
        pub.publish(Header(frame_id='a'))
        assert wait_for(lambda: path.stats.snapshot().received >= 1, 60.0)
        assert set(source.threads) == {'inference'}
        # A new subscription: the thread waits on it from the change on.
        node.destroy_subscription(sub)
        sub = source.subscription = node.create_subscription(
            Header, 'own_frames', lambda _: None, RELIABLE, raw=True)
        source.on_change()
        assert wait_for(lambda: pub.get_subscription_count() == 1, 30.0)
        assert wait_for(lambda: (pub.publish(Header(frame_id='b')),
                                 path.stats.snapshot().received >= 2)[1], 60.0)
        assert set(source.threads) == {'inference'}
    finally:
        path.stop()
        assert source.on_change is None
        node.destroy_publisher(pub)
        node.destroy_subscription(sub)


def test_a_wait_on_several_subscriptions_says_which_are_ready(node):
    """wait: the positions of the subscriptions with a message, None and destroyed ones left out;
    take_now takes without waiting, and gives None for a destroyed subscription."""
    waiter = SubscriptionWait(node.context)
    first, first_pub = _pair(node, 'wait_several_a')
    second, second_pub = _pair(node, 'wait_several_b')
    gone = node.create_subscription(Header, 'wait_several_c', lambda _: None, RELIABLE, raw=True)
    node.destroy_subscription(gone)
    try:
        second_pub.publish(Header(frame_id='b'))
        ready = []
        assert wait_for(lambda: ready.append(waiter.wait([first, None, second, gone], 0.1))
                        or ready[-1], 60.0)
        assert ready[-1] == [2]
        data, _ = waiter.take_now(second)
        assert deserialize_message(bytes(data), Header).frame_id == 'b'
        assert waiter.take_now(second) is None  # nothing left: no wait
        assert waiter.take_now(gone) is None
    finally:
        waiter.destroy()
        for pub in (first_pub, second_pub):
            node.destroy_publisher(pub)
        for sub in (first, second):
            node.destroy_subscription(sub)


def _taken_cameras(node, name: str, first: type):
    """Two cameras on topics ``<name>_a`` and ``_b`` (the first a ``first``), each with its
    path into a sink, and a FrameTaker for both (not started); sources keep their ``pub``."""
    from vision_nodes.ros.inputs.frame_taker import FrameTaker

    errors: list[str] = []
    sinks = [Sink(), Sink()]
    paths = [FramePath(node, log_error=errors.append, lazy=lambda: False, sink=sink)
             for sink in sinks]
    sources = []
    for kind, path, suffix in ((first, paths[0], 'a'), (Source, paths[1], 'b')):
        sub, pub = _pair(node, f'{name}_{suffix}')
        sources.append(kind(path, sub))
        sources[-1].pub = pub
    taker = FrameTaker(node.context, sources, [lambda p=p: p.holding for p in paths],
                       [p.frame_error for p in paths], errors.append)
    return errors, sinks, paths, sources, taker


def test_the_taker_takes_each_cameras_frames_but_not_from_a_camera_holding_one(node):
    """FrameTaker, as a multi-camera node uses it: no executor spins, yet both cameras' frames
    arrive, taken on the taker's thread; a camera holding a frame is not taken from until it
    lets go (reopen wakes the taker); a new subscription is waited on from its change on."""
    errors, sinks, paths, sources, taker = _taken_cameras(node, 'taker', Source)
    (sub_a, sub_b), (pub_a, pub_b) = [s.subscription for s in sources], [s.pub for s in sources]

    def frame_ids(sink):
        return [deserialize_message(bytes(msg), Header).frame_id for msg, _, _ in sink.items]

    try:
        for path in paths:
            path.taken_by(taker.wake)
            path.reset()
        taker.start()
        assert all(s.on_change is not None for s in sources)
        pub_a.publish(Header(frame_id='a1'))
        pub_b.publish(Header(frame_id='b1'))
        assert wait_for(lambda: all(sink.items for sink in sinks), 60.0)
        assert {t for s in sources for t in s.threads} == {'frame taker'}
        assert all(path.holding for path in paths)
        # Camera a holds its frame; b lets go of its and sends another: b's comes, a's stays.
        pub_a.publish(Header(frame_id='a2'))
        paths[1].reopen()
        assert not paths[1].holding
        pub_b.publish(Header(frame_id='b2'))
        assert wait_for(lambda: len(sinks[1].items) == 2, 60.0)
        assert frame_ids(sinks[1]) == ['b1', 'b2'] and frame_ids(sinks[0]) == ['a1']
        paths[0].reopen()  # a lets go: its frame waiting in the middleware comes next
        assert wait_for(lambda: len(sinks[0].items) == 2, 60.0)
        assert frame_ids(sinks[0]) == ['a1', 'a2']
        # A new subscription for b: the taker waits on it from the change on.
        node.destroy_subscription(sub_b)
        sub_b = sources[1].subscription = node.create_subscription(
            Header, 'taker_b', lambda _: None, RELIABLE, raw=True)
        sources[1].on_change()
        paths[1].reopen()
        assert wait_for(lambda: (pub_b.publish(Header(frame_id='b3')),
                                 len(sinks[1].items) >= 3)[1], 60.0)
        assert frame_ids(sinks[1])[2] == 'b3' and errors == []
    finally:
        taker.stop()
        taker.stop()  # idempotent
        assert all(s.on_change is None for s in sources)
        for pub in (pub_a, pub_b):
            node.destroy_publisher(pub)
        for sub in (sub_a, sub_b):
            node.destroy_subscription(sub)


def test_the_taker_outlives_a_failing_camera_and_a_wake_after_it_stopped(node):
    """A camera whose frame raises costs that frame, in one line counted on that camera; the
    other camera's frames and its own next ones still come. A batch that lets go after the
    taker stopped is fine."""
    errors, sinks, paths, sources, taker = _taken_cameras(node, 'failing', Failing)
    (sub_a, sub_b), (pub_a, pub_b) = [s.subscription for s in sources], [s.pub for s in sources]
    try:
        for path in paths:
            path.taken_by(taker.wake)
        taker.start()
        assert wait_for(lambda: (pub_a.publish(Header(frame_id='a')), bool(errors))[1], 60.0)
        assert errors[0] == 'frame dropped: RuntimeError: unreadable frame'
        assert paths[0].stats.snapshot().errors == 1  # counted on that camera
        assert wait_for(lambda: (pub_a.publish(Header(frame_id='a')),
                                 pub_b.publish(Header(frame_id='b')),
                                 sinks[0].items and sinks[1].items)[2], 60.0)
        assert len(errors) == 1
    finally:
        taker.stop()
        paths[0].reopen()  # a batch finishing after the stop: nothing to wake, no error
        for pub in (pub_a, pub_b):
            node.destroy_publisher(pub)
        for sub in (sub_a, sub_b):
            node.destroy_subscription(sub)


def test_the_taker_backs_off_a_take_rcl_keeps_refusing(node, monkeypatch):
    """A take that raises leaves the subscription ready: the taker logs it and waits a poll
    interval before trying again, instead of spinning on it; the other camera still gets its
    frames. (rcl's refusals are real, test_rcl_take; here the take of camera a raises.)"""
    from vision_nodes.ros.inputs import frame_taker
    from vision_nodes.ros.process.rcl_take import TakeError

    errors, sinks, paths, sources, taker = _taken_cameras(node, 'refused', Source)
    real_take = SubscriptionWait.take_now
    refused_at: list[float] = []

    def take_now(self, subscription):
        if subscription is sources[0].subscription:
            refused_at.append(time.monotonic())
            raise TakeError('rcl could not take a message (error 1): refused')
        return real_take(self, subscription)

    monkeypatch.setattr(SubscriptionWait, 'take_now', take_now)
    try:
        for path in paths:
            path.taken_by(taker.wake)
        taker.start()
        sources[0].pub.publish(Header(frame_id='a'))
        assert wait_for(lambda: len(refused_at) >= 3, 60.0)
        assert wait_for(lambda: (sources[1].pub.publish(Header(frame_id='b')),
                                 bool(sinks[1].items))[1], 60.0)
        # Three tries take at least two back-offs (a busy machine only makes them longer).
        assert refused_at[2] - refused_at[0] >= 2 * frame_taker._POLL_S * 0.9
        assert errors[0] == ("image subscription 'camera': TakeError: rcl could not take a "
                             'message (error 1): refused') and sinks[0].items == []
    finally:
        taker.stop()
        for source in sources:
            node.destroy_publisher(source.pub)
            node.destroy_subscription(source.subscription)
