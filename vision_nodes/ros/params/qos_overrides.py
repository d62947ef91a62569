"""``qos_overrides.<topic>.publisher|subscription.<policy>``: QoS a user sets, the rclpy way.

ROS 2 lets a user change an endpoint's QoS at start-up with read-only parameters named after its
resolved topic (``qos_overrides./detections.publisher.reliability: best_effort`` in a
parameters file, or ``-p``), declared by rclpy when the endpoint is created with
``QoSOverridingOptions``. Here:

* every publisher declares history, depth, reliability and durability, the node's own QoS as
  their defaults (``ros2 param list`` shows them), and takes the values given;
* an image subscription declares only the policies given for its topic: the others follow
  ``qos_reliability`` / ``qos_depth``, whose ``auto`` re-subscribes with another QoS when the
  cameras change (a declared read-only default would pin the first choice). What is given
  beats the automatic match, and the node logs which was used;
* a value rclpy cannot read is refused first, in one line naming the parameter, the value and
  the rule (rclpy would end the transition with its own exception).
"""

from __future__ import annotations

import copy
from typing import Any

from rclpy.qos import QoSPolicyKind, QoSProfile
from rclpy.qos_overriding_options import QoSOverridingOptions

from ...text import clip, show
from ..process import compat

PREFIX = 'qos_overrides.'
#: The policies a user may override, and the values each takes (None: an integer).
POLICIES: dict[str, tuple[str, ...] | None] = {
    'history': ('keep_last', 'keep_all', 'system_default'),
    'depth': None,
    'reliability': ('reliable', 'best_effort', 'system_default'),
    'durability': ('volatile', 'transient_local', 'system_default'),
}
#: Largest queue depth an override may ask for (a frame-sized message each).
MAX_DEPTH = 10000


def name(topic: str, kind: str, policy: str) -> str:
    """Return the parameter that overrides ``policy`` of the ``kind`` endpoint on ``topic``."""
    return f'{PREFIX}{topic}.{kind}.{policy}'


def given(node: Any, topic: str, kind: str) -> dict[str, Any]:
    """Return the overrides given for the ``kind`` endpoint on ``topic``, by policy.

    ``kind`` is 'publisher' or 'subscription', ``topic`` the resolved name. A value that
    cannot be, or a policy this node does not override, is a ValueError in one line.
    """
    start = name(topic, kind, '')
    out: dict[str, Any] = {}
    for key, param in compat.parameter_overrides(node).items():
        if not key.startswith(start):
            continue
        policy, value = key[len(start):], getattr(param, 'value', param)
        problem = refusal(policy, value) if policy in POLICIES else \
            f"'{clip(policy, 40)}' is not a QoS policy it overrides ({', '.join(POLICIES)})"
        if problem:
            raise ValueError(f'parameter {clip(key, 160)}: {problem}')
        out[policy] = value
    return out


def refusal(policy: str, value: Any) -> str | None:
    """Why ``value`` cannot be ``policy``'s override (None: it can)."""
    choices = POLICIES[policy]
    if choices is None:
        if isinstance(value, bool) or not isinstance(value, int) or \
                not 1 <= value <= MAX_DEPTH:
            return f'{show(value)} is not an integer from 1 to {MAX_DEPTH}'
        return None
    if not isinstance(value, str) or value.lower() not in choices:
        return f"{show(value)} is not one of {', '.join(choices)}"
    return None


def options(policies: Any) -> QoSOverridingOptions:
    """Return rclpy's options declaring ``policies`` (names of :data:`POLICIES`)."""
    return QoSOverridingOptions([QoSPolicyKind[p.upper()] for p in policies])


def publisher_options() -> QoSOverridingOptions:
    """Return what every publisher declares: each policy of :data:`POLICIES`."""
    return options(POLICIES)


def own_copy(qos: Any) -> Any:
    """Return a profile rclpy may change (it writes the overrides into the one it gets)."""
    return copy.copy(qos) if isinstance(qos, QoSProfile) else qos


def describe(values: dict[str, Any], topic: str, kind: str) -> str:
    """Describe ``values``: ``reliability best_effort (qos_overrides./image.subscription.*)``."""
    policies = ', '.join(f'{policy} {clip(value, 40)}' for policy, value in values.items())
    return f'{policies} ({PREFIX}{clip(topic, 120)}.{kind}.*)'
