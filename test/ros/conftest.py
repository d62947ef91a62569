"""Fixtures the test/ros files share (test/conftest.py's apply here too).

No test imports this module by name: under pytest's default import mode every conftest.py
outside a package is the module ``conftest``, and which one that is depends on the files named.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope='module')
def bus_msg(bus_bgr):
    """bus.jpg as a bgr8 sensor_msgs/Image."""
    from vision_nodes.ros.inputs.conversion import numpy_to_image

    return numpy_to_image(bus_bgr, 'bgr8')
