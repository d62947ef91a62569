"""Every topic the node publishes or subscribes, in one table that refuses clashes in one line.

Remapping can put two of the node's endpoints on one topic (``-r label_info:=detections``) or
an input on one of its outputs (``-r image:=detections``). Left to rcl, the first case ends a
transition with a raw ``RCLError`` (a second endpoint of another type on a topic in one
process), two outputs of one type would mix their messages, and an input on an output would
feed the node its own results. Each publisher and subscription of the node is created here:
its name is resolved as rcl resolves it (namespace and remapping applied) and checked against
the node's other endpoints before anything is created, and a clash is a
:class:`TopicClashError` naming both endpoints. What rcl still refuses (a topic another node
of this process holds with another type) becomes the same one-line error; another process
using the topic with another type is legal in DDS and logged once as a warning, since neither
side hears the other.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Sequence

from ...text import clip
from ..params import qos_overrides
from .compat import RCLError


class TopicClashError(ValueError):
    """Two endpoints of the node on one topic, or one rcl refuses; names both, one line."""


def type_name(msg_type: Any) -> str:
    """``vision_msgs/msg/Detection2DArray`` for the message class, as the ROS graph names it."""
    return f"{msg_type.__module__.split('.')[0]}/msg/{msg_type.__name__}"


@dataclass(frozen=True)
class Endpoint:
    """One publisher (``output``) or subscription (``input``) of the node."""

    direction: str
    #: As the node names it ('detections', 'people/label_info', '/diagnostics').
    name: str
    #: The resolved topic (namespace and remapping applied).
    topic: str
    type_name: str

    def __str__(self) -> str:
        return f"{self.direction} '{clip(self.name, 80)}' ({self.type_name})"


def _clash(new: Endpoint, old: Endpoint) -> str | None:
    """Why ``new`` may not share its topic with ``old`` (None: it may)."""
    topic = clip(new.topic, 120)
    if new.direction == old.direction == 'output':
        kind = 'of different types' if new.type_name != old.type_name else 'and would mix'
        return (f'{new} and {old} are both on topic \'{topic}\' ({kind}): each output needs '
                'a topic of its own; remap one of them elsewhere')
    if new.direction != old.direction:
        listener, own = (new, old) if new.direction == 'input' else (old, new)
        return (f"the {listener.direction} '{clip(listener.name, 80)}' topic '{topic}' is one "
                f"of this node's own outputs ('{clip(own.name, 80)}', {own.type_name}): remap "
                f"'{clip(listener.name, 80)}' to the topic it should read")
    if new.type_name != old.type_name:
        return (f"{new} and {old} are both on topic '{topic}' with different types: remap "
                'one of them elsewhere')
    return None


class Endpoints:
    """The node's publishers and subscriptions, by resolved topic (see the module docstring)."""

    def __init__(self, node: Any, warn: Callable[[str], None],
                 declaring: Callable[[], ContextManager[Any]] = contextlib.nullcontext) -> None:
        """Keep the endpoints of ``node``; ``warn`` logs a foreign type on a topic.

        ``declaring()`` is the context in which the node declares parameters itself (the
        ``qos_overrides.*`` ones rclpy declares with each endpoint).
        """
        self._node = node
        self._warn = warn
        self._declaring = declaring
        self._entities: dict[int, tuple[Any, Endpoint, Callable[[Any], Any]]] = {}
        self._warned: set[tuple[str, str]] = set()
        #: Transitions and the executor's timers (lazy, QoS) both make and drop endpoints.
        self._lock = threading.Lock()

    def plan(self, direction: str, msg_type: Any, name: str, label: str = '') -> Endpoint:
        """Resolve ``name`` and refuse a clash with the node's endpoints; create nothing.

        ``name`` is resolved as rcl will resolve it when the endpoint is created with it
        (rcl remaps the name it is given, so it must be given the unresolved name).
        ``label`` is how errors name the endpoint (default: ``name``).
        """
        new = Endpoint(direction, label or name, self._node.resolve_topic_name(name),
                       type_name(msg_type))
        with self._lock:
            others = [old for _, old, _ in self._entities.values()]
        for old in others:
            if old.topic == new.topic:
                reason = _clash(new, old)
                if reason:
                    raise TopicClashError(reason)
        return new

    def publishers(self, specs: Sequence[tuple[Any, str, Any]], lifecycle: bool = True
                   ) -> list[Any]:
        """Create a publisher for each ``(msg_type, name, qos)``: all of them, or none."""
        made: list[Any] = []
        try:
            for msg_type, name, qos in specs:
                made.append(self.publisher(msg_type, name, qos, lifecycle=lifecycle))
        except BaseException:
            for entity in made:
                self.destroy(entity)
            raise
        return made

    def publisher(self, msg_type: Any, name: str, qos: Any, lifecycle: bool = False) -> Any:
        """Create a (lifecycle) publisher on ``name`` after checking its topic.

        Its QoS takes the ``qos_overrides.<topic>.publisher.*`` parameters given at start-up
        (:mod:`..params.qos_overrides`; a bad value is a ValueError in one line).
        """
        endpoint = self.plan('output', msg_type, name)
        qos_overrides.given(self._node, endpoint.topic, 'publisher')
        if lifecycle:
            create, destroy = (self._node.create_lifecycle_publisher,
                               self._node.destroy_lifecycle_publisher)
        else:
            create, destroy = self._node.create_publisher, self._node.destroy_publisher
        return self._add(endpoint, destroy, lambda: create(
            msg_type, name, qos_overrides.own_copy(qos),
            qos_overriding_options=qos_overrides.publisher_options()))

    def subscription(self, msg_type: Any, name: str, callback: Callable[..., None], qos: Any,
                     label: str = '', **kwargs: Any) -> Any:
        """Create a subscription to ``name`` (``label`` names it in errors) after checking."""
        endpoint = self.plan('input', msg_type, name, label)
        return self._add(endpoint, self._node.destroy_subscription,
                         lambda: self._node.create_subscription(
                             msg_type, name, callback, qos, **kwargs))

    def destroy(self, entity: Any) -> None:
        """Destroy a publisher or subscription made here (one not made here is left alone)."""
        with self._lock:
            entry = self._entities.pop(id(entity), None)
        if entry is not None:
            entry[2](entity)

    def _add(self, endpoint: Endpoint, destroy: Callable[[Any], Any],
             create: Callable[[], Any]) -> Any:
        try:
            with self._declaring():
                entity = create()
        except RCLError as exc:  # another node of this process holds the topic
            held = ', '.join(sorted(self._types(endpoint.topic) - {endpoint.type_name}))
            why = (f'this process already has it as {clip(held, 160)}' if held
                   else f'rcl refuses it ({clip(exc, 200)})')
            raise TopicClashError(
                f"{endpoint} cannot use topic '{clip(endpoint.topic, 120)}': {why}; remap "
                f"'{clip(endpoint.name, 80)}' elsewhere") from None
        with self._lock:
            self._entities[id(entity)] = (entity, endpoint, destroy)
        self._warn_foreign_types(endpoint)
        return entity

    def _types(self, topic: str) -> set[str]:
        return {t for name, types in self._node.get_topic_names_and_types() if name == topic
                for t in types}

    def _warn_foreign_types(self, endpoint: Endpoint) -> None:
        others = self._types(endpoint.topic) - {endpoint.type_name}
        key = (endpoint.name, endpoint.topic)
        if others and key not in self._warned:
            self._warned.add(key)
            self._warn(f"{endpoint} is on topic '{clip(endpoint.topic, 120)}', which the ROS "
                       f"graph also has as {clip(', '.join(sorted(others)), 160)}: endpoints "
                       'of different types on one topic do not hear each other')
