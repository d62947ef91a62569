"""vision_nodes: a ROS 2 lifecycle node for detection and depth models on any accelerator."""

from .telemetry import no_telemetry as _no_telemetry

__version__ = '0.1.0'

_no_telemetry()  # before any module of this package imports a runtime (docs/security.md)
