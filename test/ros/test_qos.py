"""QoS auto against real rclpy publishers: their graph infos in, a subscription that DDS matches.

Each test creates publishers with the QoS real cameras use, reads their TopicEndpointInfo back
from the graph, asks vision_nodes.ros.inputs.qos for a subscription, then creates it and lets
DDS say whether every publisher matched it (``publisher.get_subscription_count()``).
"""

from __future__ import annotations

import itertools

import pytest
import rclpy
from rclpy.qos import (DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data)
from sensor_msgs.msg import CompressedImage, Image

from node_harness import node_in_own_context
from vision_nodes.ros.inputs.qos import (LARGE_IMAGE_CAVEAT, choose_qos, explain_silence,
                                         incompatibility, review_qos, subscription_qos)
from vision_nodes.tools.client import wait_for

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
BEST_EFFORT = qos_profile_sensor_data  # what most camera drivers use
_topics = itertools.count()


@pytest.fixture(scope='module')
def ros():
    """One node per test module in its own context (the session's DDS domain)."""
    with node_in_own_context('qos_test') as node:
        yield node


@pytest.fixture
def topic() -> str:
    return f'/qos_test/camera_{next(_topics)}/image'


def _publishers(node, topic: str, profiles, msg_type=Image, count_on=None):
    """Create one publisher per profile on ``topic`` (each from its own node, as cameras are)."""
    pubs, nodes = [], []
    for index, profile in enumerate(profiles):
        owner = rclpy.create_node(f'camera_{index}', namespace='/drivers', context=node.context)
        nodes.append(owner)
        pubs.append(owner.create_publisher(msg_type, topic, profile))
    assert wait_for(lambda: len(node.get_publishers_info_by_topic(topic)) == len(profiles), 30.0)
    return pubs, nodes


def _matched_by_dds(node, pubs, topic: str, profile: QoSProfile) -> list[bool]:
    """Subscribe with ``profile``; return, per publisher, whether DDS matched them."""
    sub = node.create_subscription(Image, topic, lambda _: None, profile)
    wait_for(lambda: all(p.get_subscription_count() > 0 for p in pubs), 3.0)
    matched = [p.get_subscription_count() > 0 for p in pubs]
    node.destroy_subscription(sub)
    return matched


def _cleanup(nodes) -> None:
    for owner in nodes:
        owner.destroy_node()


@pytest.mark.parametrize('profiles,expected', [
    ([RELIABLE], ReliabilityPolicy.RELIABLE),
    ([RELIABLE, LATCHED], ReliabilityPolicy.RELIABLE),
    ([BEST_EFFORT], ReliabilityPolicy.BEST_EFFORT),
    ([RELIABLE, BEST_EFFORT], ReliabilityPolicy.BEST_EFFORT),
], ids=['reliable', 'reliable+transient-local', 'best-effort', 'mixed'])
def test_choice_reaches_every_publisher(ros, topic, profiles, expected):
    pubs, nodes = _publishers(ros, topic, profiles)
    try:
        infos = ros.get_publishers_info_by_topic(topic)
        choice = choose_qos(infos, depth=1, topic=topic, rmw='rmw_fastrtps_cpp')
        assert choice.profile.reliability == expected
        assert choice.profile.durability == DurabilityPolicy.VOLATILE
        assert choice.profile.depth == 1
        assert all(incompatibility(i.qos_profile, choice.profile) is None for i in infos)
        assert _matched_by_dds(ros, pubs, topic, choice.profile) == [True] * len(pubs)
        assert topic in choice.reason and '\n' not in choice.reason
        if expected == ReliabilityPolicy.BEST_EFFORT:
            assert '/drivers/camera_' in choice.reason and LARGE_IMAGE_CAVEAT in choice.reason
            assert choice.reliability == 'best_effort'
        else:
            assert 'reliable' in choice.reason and 'Fast DDS' not in choice.reason
    finally:
        _cleanup(nodes)


def test_incompatibility_agrees_with_dds(ros, topic):
    """What incompatibility() predicts is what DDS does, for both subscriptions."""
    pubs, nodes = _publishers(ros, topic, [RELIABLE, BEST_EFFORT])
    try:
        infos = {i.node_name: i for i in ros.get_publishers_info_by_topic(topic)}
        ordered = [infos['camera_0'], infos['camera_1']]
        for reliability in ('reliable', 'best_effort'):
            sub = subscription_qos(reliability, 1)
            predicted = [incompatibility(i.qos_profile, sub) is None for i in ordered]
            assert predicted == _matched_by_dds(ros, pubs, topic, sub)
        reason = incompatibility(ordered[1].qos_profile, subscription_qos('reliable', 1))
        assert reason == 'it publishes best effort and the subscription is reliable'
    finally:
        _cleanup(nodes)


def test_no_publisher_yet_subscribes_reliable(ros, topic):
    choice = choose_qos(ros.get_publishers_info_by_topic(topic), depth=3, topic=topic)
    assert choice.profile.reliability == ReliabilityPolicy.RELIABLE
    assert choice.profile.depth == 3 and 'no publisher' in choice.reason


def test_review_switches_when_a_best_effort_camera_appears_and_back(ros, topic):
    current = subscription_qos('reliable', 1)
    assert review_qos(ros.get_publishers_info_by_topic(topic), current, 1, topic) is None
    pubs, nodes = _publishers(ros, topic, [RELIABLE])
    try:
        infos = ros.get_publishers_info_by_topic(topic)
        assert review_qos(infos, current, 1, topic) is None  # reachable: nothing to do
        camera = rclpy.create_node('usb_cam', context=ros.context)
        nodes.append(camera)
        camera.create_publisher(Image, topic, BEST_EFFORT)
        assert wait_for(lambda: len(ros.get_publishers_info_by_topic(topic)) == 2, 30.0)
        change = review_qos(ros.get_publishers_info_by_topic(topic), current, 1, topic)
        assert change is not None and change.reliability == 'best_effort'
        assert '/usb_cam (best effort)' in change.reason
        current = change.profile
        camera.destroy_node()
        nodes.remove(camera)
        assert wait_for(lambda: len(ros.get_publishers_info_by_topic(topic)) == 1, 30.0)
        back = review_qos(ros.get_publishers_info_by_topic(topic), current, 1, topic)
        assert back is not None and back.reliability == 'reliable'
    finally:
        _cleanup(nodes)
    # No publisher left: the subscription stays as it is.
    assert wait_for(lambda: not ros.get_publishers_info_by_topic(topic), 30.0)
    assert review_qos(ros.get_publishers_info_by_topic(topic), current, 1, topic) is None


def test_caveat_only_for_fast_dds(ros, topic):
    pubs, nodes = _publishers(ros, topic, [BEST_EFFORT])
    try:
        infos = ros.get_publishers_info_by_topic(topic)
        assert LARGE_IMAGE_CAVEAT not in choose_qos(infos, 1, topic, 'rmw_cyclonedds_cpp').reason
        assert LARGE_IMAGE_CAVEAT in choose_qos(infos, 1, topic, 'rmw_fastrtps_cpp').reason
    finally:
        _cleanup(nodes)


# ----------------------------------------------------------------- why no image arrives
def test_silence_without_publisher_names_the_topic(ros, topic):
    text = explain_silence(ros.get_publishers_info_by_topic(topic),
                           subscription_qos('reliable', 1), topic)
    assert text.startswith(f"no publisher on '{topic}'") and 'Remap image:=' in text


def test_silence_from_a_qos_mismatch_names_the_publisher(ros, topic):
    pubs, nodes = _publishers(ros, topic, [BEST_EFFORT, RELIABLE])
    try:
        text = explain_silence(ros.get_publishers_info_by_topic(topic),
                               subscription_qos('reliable', 1), topic)
        assert text.startswith('QoS mismatch: /drivers/camera_0 (best effort)')
        assert 'camera_1' not in text  # the reliable one is reachable
        assert 'set qos_reliability to best_effort (or auto)' in text
    finally:
        _cleanup(nodes)


def test_silence_with_matching_publishers(ros, topic):
    pubs, nodes = _publishers(ros, topic, [BEST_EFFORT])
    try:
        text = explain_silence(ros.get_publishers_info_by_topic(topic),
                               subscription_qos('best_effort', 1), topic,
                               rmw='rmw_fastrtps_cpp')
        assert "1 publisher(s) on '" in text and 'is the camera streaming?' in text
        assert LARGE_IMAGE_CAVEAT in text  # best effort may be losing large frames
    finally:
        _cleanup(nodes)


def test_silence_from_a_compressed_topic(ros, topic):
    pubs, nodes = _publishers(ros, topic, [RELIABLE], msg_type=CompressedImage)
    try:
        text = explain_silence(ros.get_publishers_info_by_topic(topic),
                               subscription_qos('reliable', 1), topic)
        assert 'publish sensor_msgs/msg/CompressedImage' in text
        assert 'set image_transport to compressed' in text
    finally:
        _cleanup(nodes)


def test_silence_from_a_raw_topic_where_compressed_is_expected(ros, topic):
    pubs, nodes = _publishers(ros, topic, [RELIABLE], msg_type=Image)
    try:
        text = explain_silence(ros.get_publishers_info_by_topic(topic),
                               subscription_qos('reliable', 1), topic,
                               expected_type='sensor_msgs/msg/CompressedImage')
        assert 'publish sensor_msgs/msg/Image' in text and 'set image_transport to raw' in text
    finally:
        _cleanup(nodes)


def test_many_publishers_are_listed_briefly(ros, topic):
    pubs, nodes = _publishers(ros, topic, [BEST_EFFORT] * 5)
    try:
        choice = choose_qos(ros.get_publishers_info_by_topic(topic), 1, topic, 'rmw_x')
        assert choice.reason.count('/drivers/camera_') == 3 and '2 more' in choice.reason
    finally:
        _cleanup(nodes)
