"""The single-camera frame path's own take: real rclpy, real DDS, no executor in between.

The inference thread waits on the image subscription itself (``compat.SubscriptionWaiter``)
while the executor leaves that subscription and its QoS events out of its wait set
(``frame_path._Pulled``) and runs the node's other entities. These tests check each half
against rclpy and Fast DDS: the waiter takes what a publisher sends (with the middleware's
message info) and serves the subscription's incompatible-QoS event, a guard condition or a
destroyed subscription ends its wait without a frame, and an executor spinning the same
node never calls the pulled subscription's callback while it runs the node's timers.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.executors import SingleThreadedExecutor
from rclpy.guard_condition import GuardCondition
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from std_msgs.msg import String

from node_harness import node_in_own_context
from vision_nodes.ros import compat
from vision_nodes.ros.frame_path import _Pulled
from vision_nodes.tools.client import wait_for

QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
#: A wait that only a test failure lets run out.
LONG_S = 60.0
_topics = itertools.count()


@pytest.fixture(scope='module')
def ros():
    """One node per test module in its own context (the session's DDS domain)."""
    with node_in_own_context('frame_pull_test') as node:
        yield node


@pytest.fixture
def topic() -> str:
    return f'/frame_pull_test/topic_{next(_topics)}'


@pytest.fixture
def guard(ros):
    gc = GuardCondition(None, None, context=ros.context)
    yield gc
    gc.destroy()


def _matched(pub) -> None:
    assert wait_for(lambda: pub.get_subscription_count() > 0, 30.0)


def test_the_waiter_takes_what_a_publisher_sends_with_its_message_info(ros, topic, guard):
    sub = ros.create_subscription(String, topic, lambda _: None, QOS, raw=True,
                                  callback_group=_Pulled())
    pub = ros.create_publisher(String, topic, QOS)
    _matched(pub)
    waiter = compat.SubscriptionWaiter(ros.context)
    pub.publish(String(data='frame one'))
    taken = waiter.take(sub, guard, LONG_S)
    assert taken is not None
    data, info = taken
    assert isinstance(data, bytes) and b'frame one' in data
    assert info['source_timestamp'] > 0 and info['received_timestamp'] >= info['source_timestamp']
    assert waiter.take(sub, guard, 0.05) is None  # taken once: nothing left to take
    ros.destroy_publisher(pub)
    ros.destroy_subscription(sub)


def test_a_triggered_guard_ends_the_wait_without_a_frame(ros, topic, guard):
    sub = ros.create_subscription(String, topic, lambda _: None, QOS, raw=True)
    waiter = compat.SubscriptionWaiter(ros.context)
    for subscription in (sub, None):  # None: no subscription (lazy, nobody listening)
        timer = threading.Timer(0.2, guard.trigger)
        timer.start()
        started = time.monotonic()
        assert waiter.take(subscription, guard, LONG_S) is None
        assert time.monotonic() - started < LONG_S  # the guard ended it, not the time
        timer.join()
    ros.destroy_subscription(sub)


def test_a_subscription_destroyed_during_the_wait_gives_no_frame_and_no_error(ros, topic,
                                                                              guard):
    sub = ros.create_subscription(String, topic, lambda _: None, QOS, raw=True)
    waiter = compat.SubscriptionWaiter(ros.context)
    result: list = []
    thread = threading.Thread(target=lambda: result.append(waiter.take(sub, guard, LONG_S)))
    thread.start()
    time.sleep(0.2)
    ros.destroy_subscription(sub)  # destroyed once the waiter lets go of it
    guard.trigger()
    thread.join(LONG_S)
    assert result == [None]
    assert waiter.take(sub, guard, 0.01) is None  # a destroyed subscription: no frame, no raise


def test_the_executor_leaves_a_pulled_subscription_to_its_taker(ros, topic, guard):
    called: list = []
    sub = ros.create_subscription(String, topic, called.append, QOS, raw=True,
                                  callback_group=_Pulled())
    ticks: list = []
    timer = ros.create_timer(0.01, lambda: ticks.append(1))
    pub = ros.create_publisher(String, topic, QOS)
    _matched(pub)
    executor = SingleThreadedExecutor(context=ros.context)
    executor.add_node(ros)
    pub.publish(String(data='for the taker'))
    deadline = time.monotonic() + LONG_S
    while len(ticks) < 20 and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)  # the timer runs, the subscription's callback not
    assert len(ticks) >= 20 and called == []
    taken = compat.SubscriptionWaiter(ros.context).take(sub, guard, LONG_S)
    assert taken is not None and b'for the taker' in taken[0]
    executor.remove_node(ros)
    executor.shutdown()
    ros.destroy_timer(timer)
    ros.destroy_publisher(pub)
    ros.destroy_subscription(sub)


def test_the_waiter_serves_the_subscriptions_incompatible_qos_event(ros, topic, guard):
    seen: list = []
    events = SubscriptionEventCallbacks(incompatible_qos=seen.append)
    sub = ros.create_subscription(String, topic, lambda _: None, QOS, raw=True,
                                  event_callbacks=events, callback_group=_Pulled())
    pub = ros.create_publisher(String, topic, qos_profile_sensor_data)  # best effort: refused
    waiter = compat.SubscriptionWaiter(ros.context)
    deadline = time.monotonic() + LONG_S
    while not seen and time.monotonic() < deadline:
        assert waiter.take(sub, guard, 0.5) is None  # an event is served, no frame taken
    assert seen and seen[0].total_count >= 1
    ros.destroy_publisher(pub)
    ros.destroy_subscription(sub)
