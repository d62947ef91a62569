"""The node's image subscription: created on activate, destroyed on deactivate or when idle.

One subscription feeds every model of the node. It is created with an explicit QoS (chosen by
the node from ``qos_reliability``) and reports publishers it cannot hear through rclpy's
incompatible-QoS event, which otherwise fails silently ("no detections").
"""

from __future__ import annotations

from typing import Any, Callable

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image

try:  # Iron and later
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble
    from rclpy.qos_event import SubscriptionEventCallbacks

RELIABILITY = {'reliable': ReliabilityPolicy.RELIABLE,
               'best_effort': ReliabilityPolicy.BEST_EFFORT}


def image_qos(reliability: str, depth: int) -> QoSProfile:
    """Subscription QoS: ``reliable`` or ``best_effort``, keep last ``depth``, volatile."""
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=RELIABILITY[reliability],
                      durability=DurabilityPolicy.VOLATILE)


class ImageSubscription:
    """The subscription to ``image`` (raw) or ``image/compressed`` (compressed)."""

    def __init__(self, node: Any, callback: Callable[[Any], None],
                 on_incompatible: Callable[[Any], None], transport: str = 'raw') -> None:
        self._node = node
        self._callback = callback
        self._on_incompatible = on_incompatible
        self.transport = transport
        self.msg_type = CompressedImage if transport == 'compressed' else Image
        self._topic = 'image/compressed' if transport == 'compressed' else 'image'
        self.topic_name = node.resolve_topic_name(self._topic)
        self._sub = None
        #: The reliability of the current subscription ('reliable' / 'best_effort').
        self.reliability = ''

    @property
    def subscribed(self) -> bool:
        """Whether the subscription exists."""
        return self._sub is not None

    def subscribe(self, reliability: str, depth: int) -> None:
        """(Re)create the subscription with this QoS."""
        self.unsubscribe()
        events = SubscriptionEventCallbacks(incompatible_qos=self._on_incompatible)
        self._sub = self._node.create_subscription(
            self.msg_type, self._topic, self._callback, image_qos(reliability, depth),
            event_callbacks=events)
        self.reliability = reliability

    def unsubscribe(self) -> None:
        """Destroy the subscription (idempotent)."""
        if self._sub is not None:
            self._node.destroy_subscription(self._sub)
            self._sub = None

    def publishers(self) -> list[Any]:
        """Endpoint infos (with QoS) of the publishers on the topic."""
        return self._node.get_publishers_info_by_topic(self.topic_name)
