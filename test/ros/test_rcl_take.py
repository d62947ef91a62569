"""rcl's take into pooled buffers (``ros/process/rcl_take.py``), against rclpy's own take.

Real rcl, rmw and DDS: what it takes is the message rclpy serializes, its info what rclpy's
take gives for the same publisher, and a buffer is never reused while a view of it lives.
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message, serialize_message
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from node_harness import node_in_own_context
from vision_nodes.ros.process import rcl_take
from vision_nodes.ros.process.compat import SubscriptionWait
from vision_nodes.ros.process.rcl_take import RclTake, TakeError
from vision_nodes.tools.client import wait_for

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope='module')
def node():
    with node_in_own_context('rcl_take_test') as node:
        yield node


@pytest.fixture
def taker():
    taker = RclTake.load()
    assert taker is not None, 'rclpy has loaded rcl and rcutils: the take must bind to them'
    yield taker
    taker.close()


@pytest.fixture
def pair(node, request):
    """A raw subscription (never spun) and a publisher on the test's own topic, matched."""
    msg_type = getattr(request, 'param', Header)
    topic = 'rcl_take_' + request.node.name.split('[')[0][-40:]
    sub = node.create_subscription(msg_type, topic, lambda _: None, RELIABLE, raw=True)
    pub = node.create_publisher(msg_type, topic, RELIABLE)
    assert wait_for(lambda: pub.get_subscription_count() > 0, 30.0)
    yield sub, pub
    node.destroy_publisher(pub)
    node.destroy_subscription(sub)


def _next(take, timeout: float = 60.0):
    """Wait for the next message: DDS may still be delivering it."""
    taken = []
    assert wait_for(lambda: taken.append(take()) or taken[-1] is not None, timeout, 0.01)
    return taken[-1]


def _same(data, msg) -> bool:
    """Whether ``data`` serializes ``msg`` (CDR's alignment padding is left as it was)."""
    return len(data) == len(serialize_message(msg)) and \
        deserialize_message(bytes(data), type(msg)) == msg


def _address(view: memoryview) -> int:
    return np.frombuffer(view, np.uint8).ctypes.data


def test_it_takes_the_serialized_message_with_rclpys_info(pair, taker):
    sub, pub = pair
    first, second = Header(frame_id='by rclpy'), Header(frame_id='by rcl')
    pub.publish(first)
    pub.publish(second)
    with sub.handle:
        by_rclpy = _next(lambda: sub.handle.take_message(sub.msg_type, True))
        data, info = _next(lambda: taker.take(sub.handle.pointer))
    assert _same(by_rclpy[0], first)
    assert isinstance(data, memoryview) and data.readonly
    assert _same(data, second)
    expected = by_rclpy[1]
    assert set(info) == set(expected)
    assert info['publisher_gid'] == expected['publisher_gid']  # the same publisher, read alike
    assert info['publication_sequence_number'] == expected['publication_sequence_number'] + 1
    # Fast DDS gives no reception sequence number: None for both, as rclpy turns it.
    assert (info['reception_sequence_number'] is None) == \
        (expected['reception_sequence_number'] is None)
    assert expected['source_timestamp'] <= info['source_timestamp'] <= info['received_timestamp']
    with sub.handle:
        assert taker.take(sub.handle.pointer) is None  # nothing left: None, no error


@pytest.mark.parametrize('pair', [Image], indirect=True)
def test_a_lent_buffer_is_never_reused_while_a_view_of_it_lives(pair, taker):
    """Frames held downstream keep their bytes; buffers come back once their views are gone."""
    sub, pub = pair
    rng = np.random.default_rng(7)

    def image(rows: int) -> Image:
        pixels = rng.integers(0, 256, rows * 64 * 3, np.uint8)
        return Image(height=rows, width=64, encoding='bgr8', step=192, data=pixels.tobytes())

    sent = [image(rows) for rows in (1080, 8, 1080)]
    for msg in sent:
        pub.publish(msg)
    with sub.handle:
        held = [_next(lambda: taker.take(sub.handle.pointer))[0] for _ in sent]
    assert all(_same(view, msg) for view, msg in zip(held, sent))
    addresses = [_address(view) for view in held]
    assert len(set(addresses)) == 3  # three lent at once: three buffers
    # A slice, a NumPy array of it: each keeps the buffer lent, as the image reader's do.
    pixels = np.frombuffer(held[0], np.uint8)[-1000:]
    kept = pixels.copy()
    del held
    gc.collect()
    for rows in (1080, 1200):  # the largest free buffer first; then one the middleware grows
        again = image(rows)
        pub.publish(again)
        with sub.handle:
            data, _ = _next(lambda: taker.take(sub.handle.pointer))
        assert _same(data, again)
        if rows == 1080:
            assert _address(data) == addresses[2]  # the frame-sized buffer given back, reused
        del data
    assert np.array_equal(pixels, kept)  # never the one still seen through ``pixels``


def test_closing_frees_the_pool_and_a_view_outlives_it(pair, taker):
    sub, pub = pair
    pub.publish(Header(frame_id='outlives'))
    pub.publish(Header(frame_id='returned'))
    with sub.handle:
        kept, _ = _next(lambda: taker.take(sub.handle.pointer))
        returned, _ = _next(lambda: taker.take(sub.handle.pointer))
    del returned
    assert len(taker._pool._free) == 1
    taker.close()
    assert taker._pool._free == []
    assert _same(kept, Header(frame_id='outlives'))
    del kept  # given back to a closed pool: freed, not kept
    assert taker._pool._free == []


def test_a_refused_take_raises_rcls_reason(taker):
    invalid = ctypes.c_void_p(0)  # an rcl_subscription_t whose implementation is NULL
    with pytest.raises(TakeError, match=r'error 400\): .*subscription'):
        taker.take(ctypes.addressof(invalid))
    assert taker._pool._free  # the buffer borrowed for it came back


def test_the_environment_turns_it_off_and_the_wait_takes_with_rclpy(node, pair, monkeypatch):
    sub, pub = pair
    monkeypatch.setenv('VISION_NODES_RCL_TAKE', '0')
    assert RclTake.load() is None
    waiter = SubscriptionWait(node.context)
    try:
        pub.publish(Header(frame_id='rclpy'))
        data, info = _next(lambda: waiter.take(sub, 0.1))
        assert isinstance(data, bytes) and _same(data, Header(frame_id='rclpy'))
        assert info['publication_sequence_number'] == 1
    finally:
        waiter.destroy()


def test_without_rcl_loaded_there_is_no_take(monkeypatch):
    assert rcl_take._loaded('libvision_nodes_no_such_library.so') is None
    monkeypatch.delattr(rcl_take.os, 'RTLD_NOLOAD')  # Windows: no way to look without loading
    assert rcl_take._loaded('librcl.so') is None and RclTake.load() is None
