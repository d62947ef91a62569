"""A ``diagnostic_msgs/DiagnosticArray`` from frame statistics and the node's static facts.

The node publishes it on ``/diagnostics`` about once a second: one ``DiagnosticStatus`` named
after the node, whose level and message come from :func:`vision_nodes.stats.assess` and whose
key/values (every one listed in docs/field-io.md, Diagnostics) say what runs where, how
fast, and how much memory it holds. Nothing here computes statistics: it formats them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from std_msgs.msg import Header

from ...stats import Health, HealthLimits, StatsSnapshot, assess, host_rss_bytes
from ...text import clip

_MIB = 1 << 20


@dataclass(frozen=True)
class NodeFacts:
    """What a node runs and where; fixed between two configures."""

    node_name: str                   # fully qualified, e.g. '/vision_node'
    hardware_id: str = ''            # e.g. 'cpu' or 'cuda:0 NVIDIA H100'; '' = device
    models: Sequence[str] = ()
    backend: str = ''
    precision: str = ''
    device: str = ''
    engine_cache: str = ''           # e.g. 'hit', 'built in 41.2 s', 'not used'
    #: Each reduced precision's agreement with fp32, e.g. '0.987 box mAP50-95 of fp32 on 12
    #: images' ('' when every model runs fp32).
    agreement: str = ''
    image_topic: str = ''
    image_transport: str = ''        # 'raw' or 'compressed'
    qos: str = ''                    # e.g. 'reliable, depth 1 (auto)'
    #: The RMW and, with Fast DDS, the profile file the process runs with.
    middleware: str = ''


def _ms(seconds: float | None) -> str:
    return 'n/a' if seconds is None else f'{seconds * 1e3:.1f}'


def status_values(snap: StatsSnapshot, facts: NodeFacts, limits: HealthLimits, state: str,
                  device_memory_bytes: int | None = None,
                  rss_bytes: int | None = None) -> list[tuple[str, str]]:
    """Return the key/value pairs of the node's status, in a fixed order."""
    since_last = snap.since_last_image_s
    values = [
        ('state', state),
        ('image topic', facts.image_topic),
        ('image transport', facts.image_transport),
        ('subscription QoS', facts.qos),
        ('middleware', facts.middleware),
        ('frames received', str(snap.received)),
        ('frames processed', str(snap.processed)),
        ('frames dropped', str(snap.dropped)),
        ('errors', str(snap.errors)),
        ('window (s)', f'{snap.window_s:g}'),
        ('input rate (Hz)', f'{snap.input_rate_hz:.2f}'),
        ('processed rate (Hz)', f'{snap.processed_rate_hz:.2f}'),
        ('expected rate (Hz)', f'{limits.expected_rate_hz:g}' if limits.expected_rate_hz > 0
         else 'not checked'),
        ('frames dropped in window', str(snap.dropped_in_window)),
        ('errors in window', str(snap.errors_in_window)),
        ('latency p50 (ms)', _ms(snap.latency_p50_s)),
        ('latency p95 (ms)', _ms(snap.latency_p95_s)),
        ('max latency (ms)', _ms(limits.max_latency_s) if limits.max_latency_s > 0
         else 'not checked'),
        ('processing p50 (ms)', _ms(snap.processing_p50_s)),
        ('time since last image (s)', 'never' if since_last is None else f'{since_last:.2f}'),
        ('last error', snap.last_error or ''),
        ('models', ', '.join(facts.models)),
        ('backend', facts.backend),
        ('precision', facts.precision),
        ('precision agreement', facts.agreement or 'fp32 (nothing to measure)'),
        ('device', facts.device),
        ('engine cache', facts.engine_cache),
        ('host RSS (MiB)', 'n/a' if rss_bytes is None else f'{rss_bytes / _MIB:.0f}'),
    ]
    if device_memory_bytes is not None:
        values.append(('device memory (MiB)', f'{device_memory_bytes / _MIB:.0f}'))
    return values


def diagnostic_status(snap: StatsSnapshot, facts: NodeFacts, limits: HealthLimits,
                      state: str = 'active', health: Health | None = None,
                      explain_silence: Callable[[], str] | None = None,
                      device_memory_bytes: int | None = None,
                      extra: Mapping[str, str] | None = None,
                      delivery: tuple[float, int] | None = None,
                      explain_slow_delivery: Callable[[], str] | None = None
                      ) -> DiagnosticStatus:
    """Build the node's ``DiagnosticStatus``; ``health`` defaults to :func:`assess`'s."""
    health = health or assess(snap, limits, state, explain_silence, delivery,
                              explain_slow_delivery)
    status = DiagnosticStatus()
    status.level = bytes([health.level])
    status.name = facts.node_name
    status.message = clip(health.message, 600)
    status.hardware_id = facts.hardware_id or facts.device or facts.backend
    pairs = status_values(snap, facts, limits, state, device_memory_bytes, host_rss_bytes())
    pairs += list((extra or {}).items())
    status.values = [KeyValue(key=str(k), value=clip(v, 300)) for k, v in pairs]
    return status


def diagnostic_array(stamp, *statuses: DiagnosticStatus) -> DiagnosticArray:
    """Wrap statuses into the ``DiagnosticArray`` published on ``/diagnostics``."""
    return DiagnosticArray(header=Header(stamp=stamp), status=list(statuses))
