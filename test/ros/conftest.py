"""Fixtures the test/ros files share (test/conftest.py's apply here too).

Under pytest's default import mode this file is the module named ``conftest`` for the files of
test/ros (each conftest.py outside a package is imported under that name, the nearest one
last), so it also gives them the checkout's ``ROOT``, as test/conftest.py does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope='module')
def bus_msg(bus_bgr):
    """bus.jpg as a bgr8 sensor_msgs/Image."""
    from vision_nodes.ros.inputs.conversion import numpy_to_image

    return numpy_to_image(bus_bgr, 'bgr8')
