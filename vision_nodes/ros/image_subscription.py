"""The node's image subscription: created on activate, destroyed on deactivate or when idle.

One subscription feeds every model of the node: ``image`` (``sensor_msgs/Image``) or, with
``image_transport: compressed``, ``<image>/compressed`` (``sensor_msgs/CompressedImage``, named
as image_transport names it: the remapped base topic plus ``/compressed``). It is created with
an explicit QoS (chosen by the node from ``qos_reliability``, see :mod:`.qos`) and reports
publishers it cannot hear through rclpy's incompatible-QoS event, which otherwise fails
silently ("no detections").
"""

from __future__ import annotations

from typing import Any, Callable

from rclpy.qos import QoSProfile
from sensor_msgs.msg import CompressedImage, Image

from .compressed_input import compressed_topic

try:  # Iron and later
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble
    from rclpy.qos_event import SubscriptionEventCallbacks


class ImageSubscription:
    """The subscription to the raw or compressed image topic, re-creatable with another QoS."""

    def __init__(self, node: Any, callback: Callable[..., None],
                 on_incompatible: Callable[[Any], None], transport: str = 'raw',
                 callback_group: Any = None) -> None:
        self._node = node
        self._callback = callback
        self._group = callback_group
        self._on_incompatible = on_incompatible
        self.transport = transport
        if transport == 'compressed':
            self.msg_type, self._name = CompressedImage, compressed_topic(node)
            self.type_name = 'sensor_msgs/msg/CompressedImage'
        else:
            self.msg_type, self._name = Image, 'image'
            self.type_name = 'sensor_msgs/msg/Image'
        #: The topic subscribed: the name resolved as rcl resolves it (remapping applied).
        self.topic_name = node.resolve_topic_name(self._name)
        #: How errors name this input: the name its remap rule takes (also for compressed).
        self.label = 'image'
        self._sub = None
        #: The QoS of the current (or last) subscription.
        self.qos: QoSProfile | None = None

    @property
    def subscribed(self) -> bool:
        """Whether the subscription exists."""
        return self._sub is not None

    def subscribe(self, qos: QoSProfile) -> None:
        """(Re)create the subscription with this QoS."""
        self.unsubscribe()
        events = SubscriptionEventCallbacks(incompatible_qos=self._on_incompatible)
        self._sub = self._node.endpoints.subscription(
            self.msg_type, self._name, self._callback, qos, label=self.label,
            event_callbacks=events, callback_group=self._group)
        self.qos = qos

    def unsubscribe(self) -> None:
        """Destroy the subscription (idempotent)."""
        if self._sub is not None:
            self._node.endpoints.destroy(self._sub)
            self._sub = None

    def check_topic(self) -> None:
        """Refuse (TopicClashError) a topic that clashes with another of the node's."""
        self._node.endpoints.plan('input', self.msg_type, self._name, self.label)

    def publishers(self) -> list[Any]:
        """Endpoint infos (with QoS) of the publishers on the topic."""
        return self._node.get_publishers_info_by_topic(self.topic_name)
