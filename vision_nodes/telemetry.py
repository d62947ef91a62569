"""The runtimes' usage telemetry, kept off: the node sends nothing anywhere.

``import openvino`` imports OpenVINO's model converter, which starts Intel's usage telemetry
(the ``openvino_telemetry`` package, a dependency of the ``openvino`` wheel). Where no consent
file exists, it counts as consent: it writes a client ID and a usage count under ``~/intel``
at every import, and sends events to Google Analytics from a pool of threads (one thread
from the import on; six, idle, in a node after a few configures). NNCF, which quantizes int8,
sends its own through the same package. Both take a stub that does nothing when that package
cannot be imported, which is what :func:`no_telemetry` arranges; the package's ``__init__``
calls it, so it holds before any of this package's modules imports OpenVINO or NNCF.
"""

from __future__ import annotations

import sys

#: The module OpenVINO's converter and NNCF send their telemetry with.
TELEMETRY_MODULE = 'openvino_telemetry'


def no_telemetry() -> bool:
    """Make the telemetry package unimportable in this process; False: it was imported first.

    A ``None`` entry in ``sys.modules`` makes its import raise ``ImportError``, which OpenVINO
    and NNCF catch to run without telemetry. Where something imported it before this package
    (a program that imported OpenVINO first), it is left as it is.
    """
    return sys.modules.setdefault(TELEMETRY_MODULE, None) is None
