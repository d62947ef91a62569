"""The runtimes' usage telemetry, kept off: the node sends nothing anywhere.

Two runtimes start telemetry when they are imported, unless told not to:

- ONNX Runtime (1.31 on Linux): at ``import onnxruntime`` it writes a device ID and an event
  store (``onnxruntime.db``) under ``~/.cache/Microsoft/DeveloperTools/.onnxruntime``, for
  Microsoft's telemetry. ``ORT_DISABLE_TELEMETRY=1``, read at that import, turns it off; a
  value the user set is kept.
- ``import openvino`` imports OpenVINO's model converter, which starts Intel's usage telemetry
  (the ``openvino_telemetry`` package, a dependency of the ``openvino`` wheel). Where no
  consent file exists, it counts as consent: it writes a client ID and a usage count under
  ``~/intel`` at every import, and sends events to Google Analytics from a pool of threads
  (one thread from the import on; six, idle, in a node after a few configures). NNCF, which
  quantizes int8, sends its own through the same package. Both take a stub that does
  nothing when that package cannot be imported, which is what :func:`no_telemetry` arranges.

The package's ``__init__`` calls :func:`no_telemetry`, so both hold before any of this
package's modules imports a runtime.
"""

from __future__ import annotations

import os
import sys

#: The module OpenVINO's converter and NNCF send their telemetry with.
OPENVINO_TELEMETRY = 'openvino_telemetry'
#: ONNX Runtime's switch, read when it is imported.
ORT_SWITCH = 'ORT_DISABLE_TELEMETRY'


def no_telemetry() -> None:
    """Turn ONNX Runtime's and OpenVINO's telemetry off for runtimes not imported yet.

    ONNX Runtime: ``ORT_DISABLE_TELEMETRY=1`` unless the environment sets it (also for child
    processes). OpenVINO and NNCF: a ``None`` entry in ``sys.modules`` makes the telemetry
    package's import raise ``ImportError``, which both catch to run without it; where
    something imported it first (a program that imported OpenVINO before this package), it
    is left as it is.
    """
    os.environ.setdefault(ORT_SWITCH, '1')
    sys.modules.setdefault(OPENVINO_TELEMETRY, None)
