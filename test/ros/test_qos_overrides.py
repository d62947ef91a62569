"""``qos_overrides.<topic>.publisher|subscription.*`` on a real node process (issue #33 item 8).

Given in a parameters file as ROS users write them, the overrides reach DDS: a publisher's
reliability and durability change what the graph shows (and every publisher declares its
policies, read-only), an image subscription's explicit reliability beats the automatic QoS
match (the log says so), and a bad value is one line naming the parameter, the value and the
rule.
"""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip('rclpy', reason='rclpy (ROS 2) is not installed')
pytest.importorskip('vision_msgs.msg', reason='vision_msgs is not built (scripts/setup_env.sh)')

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from node_harness import Harness  # noqa: E402
from vision_nodes.ros.params import qos_overrides  # noqa: E402
from vision_nodes.tools.client import wait_for  # noqa: E402


def _params(model_dir, cache, overrides: dict) -> dict:
    """Node parameters with ``overrides`` ({topic: {kind: {policy: value}}}) nested as in a
    parameters file."""
    return {'model_dir': str(model_dir), 'engine_cache_dir': str(cache), 'backend': 'onnx',
            'qos_overrides': overrides}


def _qos_of(client, topic: str, node_name: str, publishers: bool = True):
    """The QoS the graph shows for the node's endpoint on ``topic``."""
    infos = (client.node.get_publishers_info_by_topic(topic) if publishers
             else client.node.get_subscriptions_info_by_topic(topic))
    mine = [i for i in infos if i.node_name == node_name]
    return mine[0].qos_profile if mine else None


def test_publisher_overrides_reach_dds_and_every_publisher_declares_them(
        model_dir, engine_cache_dir):
    overrides = {'/detections': {'publisher': {'reliability': 'best_effort', 'depth': 7}},
                 '/label_info': {'publisher': {'durability': 'volatile'}}}
    h = Harness(_params(model_dir, engine_cache_dir, overrides), 'vn_qos_pub')
    try:
        c = h.client
        assert c.change_state('configure', timeout=600)
        assert wait_for(lambda: None not in (_qos_of(c, '/detections', 'vn_qos_pub'),
                                             _qos_of(c, '/label_info', 'vn_qos_pub')), 30.0)
        assert _qos_of(c, '/detections', 'vn_qos_pub').reliability == \
            ReliabilityPolicy.BEST_EFFORT
        assert _qos_of(c, '/label_info', 'vn_qos_pub').durability == DurabilityPolicy.VOLATILE
        name = qos_overrides.name
        values = c.get_parameters(name('/detections', 'publisher', 'reliability'),
                                  name('/detections', 'publisher', 'depth'),
                                  name('/label_info', 'publisher', 'reliability'),
                                  name('/diagnostics', 'publisher', 'durability'))
        assert list(values.values()) == ['best_effort', 7, 'reliable', 'volatile']
        refused = c.set_parameters(**{name('/detections', 'publisher', 'depth'): 3})[0]
        assert not refused.successful  # read-only: at start-up only, as in rclcpp
        assert 'typo' not in h.node.output()  # nothing unknown among the overrides
    finally:
        h.close()


def test_an_explicit_subscription_override_beats_the_automatic_match(
        model_dir, engine_cache_dir):
    """A reliable camera: auto would subscribe reliable; the override says best effort."""
    overrides = {'/image': {'subscription': {'reliability': 'best_effort'}}}
    h = Harness(_params(model_dir, engine_cache_dir, overrides), 'vn_qos_sub')
    try:
        c = h.client
        camera = c.publisher(Image, '/image', QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE))
        assert wait_for(lambda: c.node.count_publishers('/image') == 1, 30.0)
        assert c.change_state('configure', timeout=600) and c.change_state('activate')
        assert wait_for(lambda: _qos_of(c, '/image', 'vn_qos_sub', False) is not None, 30.0)
        assert _qos_of(c, '/image', 'vn_qos_sub', False).reliability == \
            ReliabilityPolicy.BEST_EFFORT
        assert camera.get_subscription_count() == 1  # best effort hears a reliable camera
        log = h.node.output()
        assert 'QoS auto: reliable, as every publisher' in log
        assert ("QoS of '/image': reliability best_effort (qos_overrides./image.subscription.*)"
                ", given, over the node's reliability reliable") in log
        assert c.get_parameters(qos_overrides.name('/image', 'subscription', 'reliability')) \
            == {'qos_overrides./image.subscription.reliability': 'best_effort'}
    finally:
        h.close()


@pytest.mark.parametrize('policy, value, rule', [
    ('reliability', 'sometimes', "'sometimes' is not one of reliable, best_effort, "
                                 'system_default'),
    ('depth', 0, '0 is not an integer from 1 to 10000'),
    ('deadline', 5, "'deadline' is not a QoS policy it overrides (history, depth, "
                    'reliability, durability)')])
def test_a_bad_override_is_one_line_and_configure_fails(
        model_dir, engine_cache_dir, policy, value, rule):
    overrides = {'/detections': {'publisher': {policy: value}}}
    h = Harness(_params(model_dir, engine_cache_dir, overrides), 'vn_qos_bad')
    try:
        assert not h.client.change_state('configure', timeout=600)
        assert h.client.get_state() == 'unconfigured'
        line = (f'configure failed: parameter qos_overrides./detections.publisher.{policy}: '
                f'{rule}')
        assert wait_for(lambda: line in h.node.output(), 10.0), h.node.output()[-2000:]
    finally:
        h.close()


class _Node:
    """What qos_overrides reads of a node: its start-up parameter values."""

    def __init__(self, **values):
        self._parameter_overrides = {k: Parameter(k, value=v) for k, v in values.items()}


def test_given_reads_only_its_topic_and_kind():
    node = _Node(**{'qos_overrides./a.publisher.depth': 4,
                    'qos_overrides./a.subscription.reliability': 'best_effort',
                    'qos_overrides./ab.publisher.depth': 9, 'confidence_threshold': 0.5})
    assert qos_overrides.given(node, '/a', 'publisher') == {'depth': 4}
    assert qos_overrides.given(node, '/a', 'subscription') == {'reliability': 'best_effort'}
    assert qos_overrides.given(node, '/b', 'publisher') == {}
