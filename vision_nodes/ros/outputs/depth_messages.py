"""Depth results → ``sensor_msgs/Image`` (REP 118) and the matching ``CameraInfo``.

A metric result becomes a ``32FC1`` image in metres on ``depth``; a relative one the same
encoding, unitless, on ``depth/relative`` (the node picks the topic from
:attr:`DepthResult.metric`). Pixel data is copied once, from the array's memory into the
serialised message (rclpy then neither converts nor serialises the pixels again). Metric
results are metres along the optical axis, NaN where invalid and +Inf beyond the model's range
(REP 118 / REP 117); relative ones are the model's unitless values.
"""

from __future__ import annotations

import array
import sys

import numpy as np
from sensor_msgs.msg import CameraInfo, RegionOfInterest

from ...tasks.depth import DepthResult
from .image_cdr import encode_image

#: Encodings of the published images.
DEPTH_ENCODING = '32FC1'
COLORED_ENCODING = 'rgb8'
_BIG_ENDIAN = int(sys.byteorder == 'big')


def image_cdr(pixels: np.ndarray, encoding: str, header) -> bytes:
    """Serialise a ``sensor_msgs/Image`` of a C-contiguous (H, W[, C]) array, pixels in order."""
    return encode_image(pixels, encoding, header, _BIG_ENDIAN)


def depth_pixels(result: DepthResult) -> np.ndarray:
    """Return the depth map as the C-contiguous float32 (H, W) array the image carries."""
    depth = np.ascontiguousarray(result.depth, dtype=np.float32)
    if depth.ndim != 2:
        raise ValueError(f'a depth map is (height, width), got shape {depth.shape}')
    return depth


def colored_pixels(rgb: np.ndarray) -> np.ndarray:
    """Return a colourised depth map as the C-contiguous uint8 (H, W, 3) array it carries."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f'a colourised depth image is (height, width, 3), got {rgb.shape}')
    return rgb


def depth_to_cdr(result: DepthResult, header) -> bytes:
    """Serialise the ``32FC1`` Image of a depth map, with the input image's ``header``."""
    return image_cdr(depth_pixels(result), DEPTH_ENCODING, header)


def colored_to_cdr(rgb: np.ndarray, header) -> bytes:
    """Serialise the ``rgb8`` Image of a colourised depth map (:func:`tasks.depth.colorize`)."""
    return image_cdr(colored_pixels(rgb), COLORED_ENCODING, header)


def described_shape(info: CameraInfo) -> tuple[int, int]:
    """(height, width) of the images ``info`` describes: its ROI if set, over its binning."""
    height = info.roi.height or info.height
    width = info.roi.width or info.width
    return height // max(1, info.binning_y), width // max(1, info.binning_x)


def camera_info_for(info: CameraInfo, header, shape: tuple[int, int] | None = None
                    ) -> CameraInfo:
    """Return a copy of ``info`` carrying ``header`` (the depth image's stamp and frame).

    ``depth_image_proc`` pairs a depth image with the CameraInfo of the same stamp to make a
    point cloud. With ``shape`` (the depth map's height, width), a CameraInfo for images of
    another size (after its ROI and binning) is refused with a ValueError saying both, rather
    than republished to give a wrong cloud; an uncalibrated one (size 0) is passed on.
    """
    if shape is not None and (info.height or info.width):
        expected = described_shape(info)
        if expected != (int(shape[0]), int(shape[1])):
            raise ValueError(f'camera_info describes {expected[1]}x{expected[0]} images but '
                             f'the depth image is {shape[1]}x{shape[0]}')
    out = CameraInfo()
    out.header = header
    out.height, out.width = info.height, info.width
    out.distortion_model = info.distortion_model
    out.d = array.array('d', info.d)
    out.k, out.r, out.p = np.array(info.k), np.array(info.r), np.array(info.p)
    out.binning_x, out.binning_y = info.binning_x, info.binning_y
    roi = info.roi
    out.roi = RegionOfInterest(x_offset=roi.x_offset, y_offset=roi.y_offset,
                               height=roi.height, width=roi.width, do_rectify=roi.do_rectify)
    return out
