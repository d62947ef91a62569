"""Names of a multi-camera node: which image topics, and each camera's output namespace.

``image_topics`` lists the cameras; each camera's results go to its image topic's namespace
(``/front/image_raw`` -> ``/front/``, so ``/front/detections``), or to the namespace
``output_namespaces`` gives it. Two cameras may never publish to one namespace: that would mix
their results on one topic, so it is refused in one line at configure, naming the fix.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..text import clip, show


def check_names(param: str, value: Any) -> str | None:
    """Return why ``value`` (a list of topic names or namespaces) is refused; None if fine."""
    from rclpy.exceptions import InvalidTopicNameException
    from rclpy.validate_topic_name import validate_topic_name

    seen = set()
    for name in value:
        if not name.strip():
            return f'{param} has an empty entry: give a topic name or remove it'
        try:
            validate_topic_name(name.strip().rstrip('/') or '/x')
        except InvalidTopicNameException as exc:
            why = str(exc).splitlines()[0] if str(exc) else 'not a valid ROS name'
            return f'{param} entry {show(name, 80)} is not a valid ROS name ({clip(why, 200)})'
        key = name.strip().rstrip('/')
        if key in seen:
            return f'{param} lists {show(name, 80)} twice'
        seen.add(key)
    return None


def topic_namespace(topic: str) -> str:
    """Return a topic's namespace with a trailing slash ('/front/image_raw' -> '/front/')."""
    head, _, _ = topic.strip().rstrip('/').rpartition('/')
    return f'{head}/' if head else ''


def output_namespaces(topics: Sequence[str], overrides: Sequence[str]) -> list[str]:
    """Each camera's output namespace (ending in '/'); ValueError in one line if they clash."""
    if overrides and len(overrides) != len(topics):
        raise ValueError(f'output_namespaces has {len(overrides)} entries but image_topics '
                         f'has {len(topics)}: give one namespace per camera, in the same order, '
                         'or leave output_namespaces empty')
    chosen = [o.strip().rstrip('/') + '/' for o in overrides] if overrides else \
        [topic_namespace(t) for t in topics]
    for index, (topic, space) in enumerate(zip(topics, chosen)):
        if space in ('', '/'):
            raise ValueError(f'image topic {show(topic, 80)} has no namespace of its own for '
                             'its results: use a topic like /front/image_raw, or set '
                             'output_namespaces')
        if space in chosen[:index]:
            other = topics[chosen.index(space)]
            raise ValueError(f'image topics {show(other, 80)} and {show(topic, 80)} would '
                             f'both publish under {show(space, 80)}: set output_namespaces '
                             '(one namespace per camera)')
    return chosen
