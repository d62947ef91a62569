"""Names of a multi-camera node: which image topics, and each camera's output namespace.

``image_topics`` lists the cameras; each camera's results go to its image topic's namespace
(``/front/image_raw`` -> ``/front/``, so ``/front/detections``), or to the namespace
``output_namespaces`` gives it. What a camera reads beside its image (its ``camera_info``, a
detector's ``depth_topic``) is a sibling of its image topic: a relative name resolved in the
image topic's namespace (:func:`camera_sibling`). Two cameras may never publish to one
namespace: that would mix their results on one topic, so it is refused in one line at
configure, naming the fix.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ...text import clip, show

#: The characters a ROS name may hold (rcl's rules for their order are checked by rcl).
_NAME_CHARACTERS = re.compile(r'[A-Za-z0-9_/~{}]*')


def name_problem(name: str) -> str | None:
    """Return why rcl would refuse the topic or namespace ``name`` (the rule), None if fine.

    The name is expanded as rcl does (``~``, ``{node}``, ``{ns}``; an unknown substitution is
    refused) and the result validated as a full name, so what passes here also passes at
    activate, where rcl resolves it.
    """
    from rclpy.exceptions import InvalidTopicNameException
    from rclpy.expand_topic_name import expand_topic_name
    from rclpy.validate_full_topic_name import validate_full_topic_name

    if not _NAME_CHARACTERS.fullmatch(name):  # before rcl, which reads a C string
        return ("a name has only ASCII letters, digits, '_', '/', and '~', '{', '}' "
                'for substitutions')
    try:
        validate_full_topic_name(expand_topic_name(name, 'node', '/'))
    except InvalidTopicNameException as exc:
        why = str(exc).splitlines()[0] if str(exc) else ''
        return clip(why.removeprefix('Invalid topic name: ').rstrip(':') or 'invalid', 200)
    except ValueError as exc:  # rcl's expansion: "topic name 'x' is invalid: <rule>, at <file>"
        why = str(exc).splitlines()[0] if str(exc) else ''
        why = why.split(' is invalid: ', 1)[-1].rsplit(', at ', 1)[0]
        return clip(why or 'invalid', 200)
    return None


def check_topic(param: str, value: str) -> str | None:
    """Return why ``value`` of the topic-name parameter ``param`` is refused; None if fine."""
    if not value.strip():
        return f'{param} is empty: give a topic name'
    why = name_problem(value.strip())
    return None if why is None else f'{param} {show(value, 80)} is not a valid ROS name ({why})'


def check_names(param: str, value: Any) -> str | None:
    """Return why ``value`` (a list of topic names or namespaces) is refused; None if fine."""
    seen = set()
    for name in value:
        if not name.strip():
            return f'{param} has an empty entry: give a topic name or remove it'
        why = name_problem(name.strip().rstrip('/') or '/x')
        if why is not None:
            return f'{param} entry {show(name, 80)} is not a valid ROS name ({why})'
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


def camera_sibling(namespace: str, name: str, param: str) -> str:
    """Return the topic ``name`` of one camera: relative names go in its image's ``namespace``.

    ``namespace`` is '' on a single-camera node: ``name`` is then used as given. With several
    cameras an absolute or private name would be one topic read by every camera (another
    camera's depth paired with this camera's frames), so it is refused in one line.
    """
    name = name.strip()
    if not namespace:
        return name
    if name.startswith(('/', '~')):
        raise ValueError(f'{param} {show(name, 80)} is one topic for every camera: with '
                         'image_topics give a relative name (e.g. depth_registered/image_rect), '
                         "read beside each camera's image topic")
    return f'{namespace}{name}'
