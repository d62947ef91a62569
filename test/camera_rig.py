"""A calibrated colour camera with an aligned depth image, as the 3D tests feed a node.

Not a test module: test/ros files that publish camera_info and depth import it.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from sensor_msgs.msg import CameraInfo, Image

from vision_nodes.tools.client import VisionNodeClient, wait_for


def pinhole_info(width: int, height: int, fx: float, fy: float | None = None,
                 k: Sequence[float] | None = None) -> CameraInfo:
    """Return a plumb_bob CameraInfo: focal lengths ``fx``, ``fy`` (default ``fx``), centred.

    The principal point is the image centre with pixel centres at whole numbers
    (``width / 2 - 0.5``); ``k`` replaces the whole matrix.
    """
    info = CameraInfo(width=width, height=height, distortion_model='plumb_bob')
    default = [fx, 0, width / 2 - 0.5, 0, fx if fy is None else fy, height / 2 - 0.5, 0, 0, 1]
    info.k = np.array(k if k is not None else default, np.float64)
    return info


def depth_camera(client: VisionNodeClient, depth_topic: str = '/aligned_depth'
                 ) -> tuple[Any, Any, Any]:
    """Return publishers of ``/image``, ``depth_topic`` and ``/camera_info``.

    Returns once the node subscribes to the depth image and camera_info (30 s at most).
    """
    images = client.publisher(Image, '/image', 10)
    depths = client.publisher(Image, depth_topic, 10)
    infos = client.publisher(CameraInfo, '/camera_info', 10)
    assert wait_for(lambda: depths.get_subscription_count() > 0
                    and infos.get_subscription_count() > 0, 30.0)
    return images, depths, infos
