"""The node's image input: raw or compressed, QoS auto, lazy; created on activate.

One subscription feeds every model of the node: ``image`` (``sensor_msgs/Image``) or, with
``image_transport: compressed``, ``<image>/compressed`` (``sensor_msgs/CompressedImage``, named
as image_transport names it: the remapped base topic plus ``/compressed``). It is created with
an explicit QoS (chosen by the node from ``qos_reliability``, see :mod:`.qos`) and reports
publishers it cannot hear through rclpy's incompatible-QoS event, which otherwise fails
silently ("no detections"). :meth:`ImageInput.update` (a 2 Hz timer while active) keeps it as
it should be: subscribed only while an output has a subscriber in lazy mode, re-subscribed
when ``qos_reliability: auto`` sees a publisher the current QoS cannot reach.

The subscription is raw: rclpy hands over the message's serialized bytes, which
:mod:`..wire.cdr_reader` reads in place (the pixels stay where rclpy put them, no message object
is built), and the callback gets an object with the typed message's fields. Bytes that are not a
well-formed message are refused there, in one line, like any other bad image.
"""

from __future__ import annotations

from typing import Any, Callable

from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image

from ...text import clip
from ..params import qos_overrides
from ..process import compat
from ..wire.cdr_reader import CdrError, read_compressed, read_image
from .qos import choose_qos, explain_silence, review_qos, subscription_qos

try:  # Iron and later
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble
    from rclpy.qos_event import SubscriptionEventCallbacks


def compressed_topic(node, base: str = 'image') -> str:
    """Return the topic of ``base``'s compressed images: ``<resolved base>/compressed``.

    As image_transport does: the base name is expanded and remapped first (``image:=/cam/
    image_raw`` gives ``/cam/image_raw/compressed``); a remap of ``image`` does not apply to
    the name ``image/compressed`` itself.
    """
    return node.resolve_topic_name(base).rstrip('/') + '/compressed'


class ImageInput:
    """The subscription to the raw or compressed image topic, re-creatable with another QoS."""

    def __init__(self, node: Any, callback: Callable[..., None], param: Callable[[str], Any],
                 log_error: Callable[[str], None], callback_group: Any = None,
                 topic: str = 'image', on_error: Callable[[str], None] | None = None) -> None:
        """Subscribe (later) to ``topic``: ``image`` (remappable), or one of ``image_topics``.

        ``callback(msg, info)`` takes each frame and its message info (None where rclpy gives
        none: Humble); ``on_error`` (default ``log_error``) counts and logs a frame whose
        bytes are refused.
        """
        self._node = node
        self._callback = callback
        self._on_error = on_error or log_error
        self._group = callback_group
        self._param = param
        self._log_error = log_error
        self._idle_logged = False
        transport = param('image_transport')
        self.transport = transport
        if transport == 'compressed':
            self.msg_type, self._name = CompressedImage, compressed_topic(node, topic)
            self.type_name = 'sensor_msgs/msg/CompressedImage'
            self._read = read_compressed
        else:
            self.msg_type, self._name = Image, topic
            self.type_name = 'sensor_msgs/msg/Image'
            self._read = read_image
        #: The topic subscribed: the name resolved as rcl resolves it (remapping applied).
        self.topic_name = node.resolve_topic_name(self._name)
        #: How errors name this input: the name its remap rule takes (also for compressed).
        self.label = topic
        self._sub = None
        #: Called after the subscription is made, re-made or dropped (the frame path that
        #: waits on it itself looks again: :meth:`~.frame_path.FramePath.take_from`).
        self.on_change: Callable[[], None] | None = None
        #: The QoS of the current (or last) subscription, overrides applied.
        self.qos: QoSProfile | None = None
        #: ``qos_overrides.<topic>.subscription.*`` given at start-up, by policy: they beat
        #: qos_reliability / qos_depth (and auto). A bad one is a ValueError, at activate.
        self.overrides = qos_overrides.given(node, self.topic_name, 'subscription')

    @property
    def subscribed(self) -> bool:
        """Whether the subscription exists."""
        return self._sub is not None

    @property
    def subscription(self) -> Any:
        """Return the current rclpy subscription; None while there is none."""
        return self._sub

    def deliver(self, data: bytes, info: Any) -> None:
        """Hand the frame in ``data`` on with its message info (None: rclpy gave none).

        The subscription's callback; a frame path that takes from :attr:`subscription` itself,
        outside the executor, calls it with what it took.
        """
        try:
            msg = self._read(data)
        except CdrError as exc:
            self._on_error(f'skipping image: {exc}')
            return
        self._callback(msg, info)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def subscribe(self, qos: QoSProfile) -> None:
        """(Re)create the subscription with this QoS, the overrides given applied over it."""
        self.unsubscribe()
        events = SubscriptionEventCallbacks(incompatible_qos=self._on_incompatible_qos)
        qos = qos_overrides.own_copy(qos)
        chosen = self._policies(qos)
        self._sub = self._node.endpoints.subscription(
            self.msg_type, self._name, compat.with_message_info(self.deliver), qos,
            label=self.label,
            event_callbacks=events, callback_group=self._group, raw=True,
            qos_overriding_options=qos_overrides.options(self.overrides))
        self.qos = qos
        self._changed()
        if self.overrides:
            replaced = ', '.join(f'{p} {chosen[p]}' for p in self.overrides)
            self._node.get_logger().info(
                f"QoS of '{clip(self.topic_name, 120)}': "
                f"{qos_overrides.describe(self.overrides, self.topic_name, 'subscription')}, "
                f"given, over the node's {replaced} (qos_reliability "
                f"{self._param('qos_reliability')}, qos_depth {self._param('qos_depth')})")

    @staticmethod
    def _policies(qos: QoSProfile) -> dict[str, str]:
        """Return the overridable policies of ``qos`` as the overrides write them."""
        return {'history': qos.history.name.lower(), 'depth': str(qos.depth),
                'reliability': qos.reliability.name.lower(),
                'durability': qos.durability.name.lower()}

    def unsubscribe(self) -> None:
        """Destroy the subscription (idempotent)."""
        if self._sub is not None:
            self._node.endpoints.destroy(self._sub)
            self._sub = None
            self._changed()

    def check_topic(self) -> None:
        """Refuse (TopicClashError) a topic that clashes with another of the node's."""
        self._node.endpoints.plan('input', self.msg_type, self._name, self.label)

    def publishers(self) -> list[Any]:
        """Endpoint infos (with QoS) of the publishers on the topic."""
        return self._node.get_publishers_info_by_topic(self.topic_name)

    def update(self, wanted: bool) -> None:
        """Subscribe, unsubscribe or re-subscribe: lazy mode (``wanted``), QoS auto."""
        log = self._node.get_logger()
        if wanted and not self.subscribed:
            self.subscribe(self._choose_qos())
            if self._param('lazy'):
                log.info('lazy: an output has a subscriber; taking images')
        elif not wanted and (self.subscribed or not self._idle_logged):
            self.unsubscribe()
            log.info('lazy: no subscriber on any output; not taking images')
        elif wanted and self._param('qos_reliability') == 'auto' and \
                'reliability' not in self.overrides:  # given: auto has nothing to change
            change = review_qos(self.publishers(), self.qos, int(self._param('qos_depth')),
                                self.topic_name)
            if change is not None:
                log.warning(f're-subscribing: {change.reason}')
                self.subscribe(change.profile)
        self._idle_logged = not wanted

    def update_in_timer(self, wanted: Callable[[], bool]) -> None:
        """:meth:`update` on the executor's thread, where a failure must not escape.

        Activate checked the image topic; what only rcl can refuse (a topic another node of
        this process holds with another type) is logged, rate-limited, and retried.
        """
        try:
            self.update(wanted())
        except Exception as exc:  # noqa: BLE001 - the node must keep spinning
            self._log_error(f'cannot take images: {clip(exc, 600)}')

    def _choose_qos(self) -> QoSProfile:
        """Return the QoS for ``qos_reliability`` (auto: what all cameras reach)."""
        reliability, depth = self._param('qos_reliability'), int(self._param('qos_depth'))
        if reliability != 'auto':
            return subscription_qos(reliability, depth)
        choice = choose_qos(self.publishers(), depth, self.topic_name)
        self._node.get_logger().info(choice.reason)
        return choice.profile

    def _on_incompatible_qos(self, info: Any) -> None:
        """Report a publisher on the image topic that cannot reach us."""
        policy = getattr(info.last_policy_kind, 'name', str(info.last_policy_kind))
        fix = ('qos_overrides.<topic>.subscription.reliability' if 'reliability' in
               self.overrides else 'qos_reliability')
        hint = (f' (a best-effort camera: set {fix} to best_effort'
                f"{'' if 'reliability' in self.overrides else ' or auto'})"
                if 'RELIABILITY' in policy.upper() else '')
        self._log_error(f"a publisher on '{self.topic_name}' offers a QoS incompatible with "
                        f'this subscription (policy {policy}){hint}; its images are not '
                        'received')

    def qos_text(self) -> str:
        """Describe the subscription's QoS for the diagnostics ('reliable, depth 1 (auto)')."""
        if self.qos is None:
            return 'n/a'
        reliable = self.qos.reliability == ReliabilityPolicy.RELIABLE
        source = 'qos_overrides' if self.overrides else self._param('qos_reliability')
        return (f"{'reliable' if reliable else 'best effort'}, depth {self.qos.depth} "
                f'({source})')

    def explain_silence(self) -> str:
        """Why no image arrives (for the diagnostics)."""
        return explain_silence(self.publishers(), self.qos or subscription_qos('reliable', 1),
                               self.topic_name, self.type_name)
