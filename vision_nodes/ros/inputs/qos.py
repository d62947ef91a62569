"""Image subscription QoS that every camera on the topic can reach, and why, in one line.

A subscription only receives from publishers whose QoS is compatible with it: a reliable
subscription gets *nothing* from a best-effort camera (``qos_profile_sensor_data``, most
drivers), without an error unless someone listens for the incompatible-QoS event. These
functions read the publishers on the image topic (``node.get_publishers_info_by_topic``) and

* :func:`choose_qos`: pick the subscription QoS every one of them reaches (reliable when all
  are reliable, best effort as soon as one is not; volatile, which any durability serves;
  KEEP_LAST with the node's ``qos_depth``), with the reason to log;
* :func:`incompatibility` / :func:`review_qos`: tell whether a publisher reaches the current
  subscription, and what to re-subscribe with when a new one does not (or when the last
  best-effort one left);
* :func:`explain_silence`: say why no image arrives (no publisher: wrong topic name; a
  publisher of another type; a QoS mismatch, naming the publishers and their reliability; or
  matching publishers that send nothing), for the diagnostics;
* :func:`explain_slow_delivery`: say why delivered images reach the node late (stock Fast
  DDS repairing the fragments of large images), for the diagnostics.

Deadline, liveliness and lifespan stay at their defaults on the subscription, which accept
every publisher; reliability and durability are the policies that decide.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Sequence

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ...text import clip, show_path
from ..process.launch_arguments import DDS_PROFILE_VARIABLE, is_fast_dds

try:  # Galactic and later
    from rclpy.qos import QoSCompatibility, qos_check_compatible
except ImportError:  # pragma: no cover - older rclpy: the explicit rules below only
    QoSCompatibility = qos_check_compatible = None

#: ``qos_reliability`` parameter values → policies.
RELIABILITY = {'reliable': ReliabilityPolicy.RELIABLE,
               'best_effort': ReliabilityPolicy.BEST_EFFORT}
_NAMES = {ReliabilityPolicy.RELIABLE: 'reliable', ReliabilityPolicy.BEST_EFFORT: 'best effort'}
_DURABILITY = {DurabilityPolicy.VOLATILE: 'volatile',
               DurabilityPolicy.TRANSIENT_LOCAL: 'transient local'}

#: What best effort costs with stock Fast DDS (docs/benchmarks.md).
LARGE_IMAGE_CAVEAT = (
    'with stock Fast DDS a best-effort subscription loses most multi-megabyte (raw) frames to '
    'dropped fragments: start the camera driver, the sender, with '
    'FASTDDS_DEFAULT_PROFILES_FILE=config/fastdds_large_images.xml')
#: Why delivered images reach the node late, with stock Fast DDS (docs/benchmarks.md).
SLOW_DELIVERY_CAUSE = (
    'stock Fast DDS sends a multi-megabyte raw image in fragments and repairs lost ones '
    'slowly; start the camera driver, the sender, and this node with '
    'FASTDDS_DEFAULT_PROFILES_FILE=config/fastdds_large_images.xml (the launch files: '
    'dds_profile:=large_images), or take compressed images; a CPU too busy to run the node '
    'does the same')
#: Publishers named in one line at most; the rest are counted.
_LISTED = 3
#: camera_info subscriptions (3D detections, depth outputs): best effort hears reliable and
#: best-effort publishers alike; only the newest K matters.
CAMERA_INFO_IN = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST,
                            reliability=ReliabilityPolicy.BEST_EFFORT)


@dataclass(frozen=True)
class QosChoice:
    """A subscription QoS and the one-line reason it was chosen."""

    profile: QoSProfile
    reason: str

    @property
    def reliability(self) -> str:
        """Return the qos_reliability parameter value that names the choice."""
        return ('reliable' if self.profile.reliability == ReliabilityPolicy.RELIABLE
                else 'best_effort')


def subscription_qos(reliability: str, depth: int) -> QoSProfile:
    """Return the image subscription's QoS: ``reliability`` ('reliable'/'best_effort'), depth."""
    return QoSProfile(depth=int(depth), history=HistoryPolicy.KEEP_LAST,
                      reliability=RELIABILITY[reliability],
                      durability=DurabilityPolicy.VOLATILE)


def _rmw(given: str | None = None) -> str:
    """Return ``given``, else the RMW implementation in use ('' when it cannot be told)."""
    if given is not None:
        return given
    try:
        from rclpy.utilities import get_rmw_implementation_identifier
        return get_rmw_implementation_identifier()
    except Exception:  # noqa: BLE001 - only decides which caveat or cause is shown
        return ''


def _caveat(rmw: str | None) -> str:
    return f' ({LARGE_IMAGE_CAVEAT})' if is_fast_dds(_rmw(rmw)) else ''


def dds_profile(environ: Mapping[str, str] | None = None) -> str:
    """Return the Fast DDS profile file this process was started with ('' for none)."""
    return (os.environ if environ is None else environ).get(DDS_PROFILE_VARIABLE, '').strip()


def middleware(rmw: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """Say which middleware the node runs on, and with Fast DDS which profile file."""
    rmw = _rmw(rmw)
    if not is_fast_dds(rmw):
        return clip(rmw, 60) or 'unknown'
    profile = dds_profile(environ)
    return f'{rmw}, profile {show_path(profile)}' if profile else \
        f"{rmw}, Fast DDS's default settings (no {DDS_PROFILE_VARIABLE})"


def explain_slow_delivery(rmw: str | None = None,
                          environ: Mapping[str, str] | None = None) -> str:
    """Return the likely reason delivered images reach the node late, naming what to change.

    With Fast DDS, when this node already runs with a profile file, only the sender is left
    to start with it.
    """
    rmw = _rmw(rmw)
    if is_fast_dds(rmw):
        profile = dds_profile(environ)
        if not profile:
            return SLOW_DELIVERY_CAUSE
        return (f'this node runs with the Fast DDS profile {show_path(profile)}; start the '
                'camera driver, the sender, with it too (the sender decides how an image is '
                'fragmented), or take compressed images; a CPU too busy to run the node does '
                'the same')
    which = f' ({clip(rmw, 60)})' if rmw else ''
    return ('a CPU too busy to run the node, or middleware settings made for small messages'
            f'{which}: for large raw images see its documentation, or take compressed images')


def _reliability_name(qos: QoSProfile) -> str:
    return _NAMES.get(qos.reliability, 'unknown reliability')


def publisher_name(info) -> str:
    """Return ``/namespace/node`` of a publisher's ``TopicEndpointInfo``, made safe to log."""
    namespace = info.node_namespace.rstrip('/')
    return clip(f'{namespace}/{info.node_name}' if info.node_name else '(unnamed node)', 80)


def _listing(infos: Sequence, with_qos: bool = True) -> str:
    parts = [publisher_name(i) + (f' ({_reliability_name(i.qos_profile)})' if with_qos else '')
             for i in infos[:_LISTED]]
    if len(infos) > _LISTED:
        parts.append(f'{len(infos) - _LISTED} more')
    return ', '.join(parts)


def incompatibility(publisher: QoSProfile, subscription: QoSProfile) -> str | None:
    """Return why ``publisher`` cannot reach ``subscription``, or None when it can."""
    if (subscription.reliability == ReliabilityPolicy.RELIABLE
            and publisher.reliability != ReliabilityPolicy.RELIABLE):
        return (f'it publishes {_reliability_name(publisher)} and the subscription is '
                'reliable')
    if (subscription.durability == DurabilityPolicy.TRANSIENT_LOCAL
            and publisher.durability != DurabilityPolicy.TRANSIENT_LOCAL):
        return 'it publishes volatile and the subscription is transient local'
    if qos_check_compatible is not None:
        try:
            verdict, reason = qos_check_compatible(publisher, subscription)
        except Exception:  # noqa: BLE001 - a profile the checker cannot read: rules above hold
            return None
        if verdict == QoSCompatibility.ERROR:
            return clip(reason.strip().rstrip(';'))
    return None


def choose_qos(publishers: Sequence, depth: int, topic: str = 'image',
               rmw: str | None = None) -> QosChoice:
    """Pick the subscription QoS that every publisher in ``publishers`` reaches.

    ``publishers`` are the ``TopicEndpointInfo`` of ``node.get_publishers_info_by_topic``.
    Reliable when all are reliable (or there is none yet: rclcpp's default, and no frame is
    lost to a dropped fragment); best effort as soon as one is best effort or unknown.
    """
    topic = clip(topic, 120)
    reliable = subscription_qos('reliable', depth)
    if not publishers:
        return QosChoice(reliable, (
            f"QoS auto: no publisher on '{topic}' yet, subscribing reliable (rclcpp's "
            'default); a best-effort publisher that appears later switches the subscription '
            'to best effort'))
    others = [i for i in publishers if i.qos_profile.reliability != ReliabilityPolicy.RELIABLE]
    if not others:
        return QosChoice(reliable, (
            f"QoS auto: reliable, as every publisher on '{topic}' is: "
            f'{_listing(publishers, with_qos=False)}'))
    return QosChoice(subscription_qos('best_effort', depth), (
        f"QoS auto: best effort, as {_listing(others)} on '{topic}' would send nothing to a "
        f'reliable subscription{_caveat(rmw)}'))


def review_qos(publishers: Sequence, current: QoSProfile, depth: int, topic: str = 'image',
               rmw: str | None = None) -> QosChoice | None:
    """Return the QoS to re-subscribe with when the publishers changed, else None.

    A new publisher the current subscription cannot reach makes it best effort; once no
    best-effort publisher is left, it goes back to reliable. With no publisher at all the
    current subscription stays (a camera restarting does not flip it back and forth).
    """
    if not publishers:
        return None
    choice = choose_qos(publishers, depth, topic, rmw)
    if (choice.profile.reliability == current.reliability
            and choice.profile.durability == current.durability):
        return None
    return choice


def explain_silence(publishers: Sequence, subscription: QoSProfile, topic: str,
                    expected_type: str = 'sensor_msgs/msg/Image',
                    rmw: str | None = None) -> str:
    """Return the likely reason no image arrives on ``topic``, naming what to change."""
    topic = clip(topic, 120)
    if not publishers:
        return (f"no publisher on '{topic}': a wrong topic name? Remap image:=<camera topic> "
                "(ros2 topic list -t shows the image topics)")
    wrong = [i for i in publishers if i.topic_type != expected_type]
    if wrong:
        kind = clip(wrong[0].topic_type, 80)
        hint = ''
        if kind.endswith('/CompressedImage'):
            hint = ': set image_transport to compressed and remap image to the base topic'
        elif kind.endswith('/Image') and expected_type.endswith('/CompressedImage'):
            hint = ': a raw topic; set image_transport to raw, or remap image to a camera ' \
                'that also publishes <topic>/compressed'
        return (f"{_listing(wrong, with_qos=False)} publish {kind} on '{topic}', not "
                f'{expected_type}{hint}')
    blocked = [(i, incompatibility(i.qos_profile, subscription)) for i in publishers]
    blocked = [(i, why) for i, why in blocked if why]
    if blocked:
        info, why = blocked[0]
        fix = ('set qos_reliability to best_effort (or auto)' if 'reliab' in why
               else 'match the publisher')
        return (f"QoS mismatch: {_listing([i for i, _ in blocked])} on '{topic}' cannot reach "
                f'this subscription ({why}): {fix}')
    caveat = ''
    lossy = (subscription.reliability != ReliabilityPolicy.RELIABLE
             or any(i.qos_profile.reliability != ReliabilityPolicy.RELIABLE for i in publishers))
    if lossy:
        caveat = _caveat(rmw)
    return (f"{len(publishers)} publisher(s) on '{topic}' match this "
            f'{_reliability_name(subscription)} subscription ({_listing(publishers)}) but '
            f'sent nothing: is the camera streaming?{caveat}')
