"""Image encodings (``sensor_msgs/Image`` names) and what they mean as NumPy arrays.

ROS-free: the table of encodings, their channel orders, and the error every image problem
raises (:class:`ImageConversionError`, whose message names the problem so callers can log it
and skip the frame). Messages are turned into arrays in :mod:`vision_nodes.ros.image_input`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class ImageConversionError(ValueError):
    """An image message that cannot be converted (unsupported encoding or malformed layout)."""


@dataclass(frozen=True)
class EncodingInfo:
    """How one ``sensor_msgs/Image`` encoding maps onto a NumPy array."""

    dtype: np.dtype
    channels: int
    color_order: str  # 'rgb', 'bgr', 'rgba', 'bgra', 'mono' or 'depth'


_U8 = np.dtype(np.uint8)

ENCODINGS: dict[str, EncodingInfo] = {
    'rgb8': EncodingInfo(_U8, 3, 'rgb'),
    'bgr8': EncodingInfo(_U8, 3, 'bgr'),
    'rgba8': EncodingInfo(_U8, 4, 'rgba'),
    'bgra8': EncodingInfo(_U8, 4, 'bgra'),
    'mono8': EncodingInfo(_U8, 1, 'mono'),
    '8UC1': EncodingInfo(_U8, 1, 'mono'),
    '8UC3': EncodingInfo(_U8, 3, 'bgr'),
    'mono16': EncodingInfo(np.dtype(np.uint16), 1, 'mono'),
    '16UC1': EncodingInfo(np.dtype(np.uint16), 1, 'depth'),
    '32FC1': EncodingInfo(np.dtype(np.float32), 1, 'depth'),
}

#: Encodings a colour model can consume (converted to RGB by the task).
COLOR_ENCODINGS = ('rgb8', 'bgr8', 'rgba8', 'bgra8', 'mono8', '8UC1', '8UC3')

_RGB_CHANNELS = {'rgb': (0, 1, 2), 'rgba': (0, 1, 2), 'bgr': (2, 1, 0), 'bgra': (2, 1, 0),
                 'mono': (0, 0, 0)}


def rgb_channels(encoding: str) -> tuple[int, int, int] | None:
    """Return the source channel indices of R, G and B for a colour encoding, else None."""
    if encoding not in COLOR_ENCODINGS:
        return None
    return _RGB_CHANNELS[ENCODINGS[encoding].color_order]


def to_rgb(image: np.ndarray, encoding: str) -> np.ndarray:
    """Return an (H, W, 3) uint8 RGB array for any colour encoding in :data:`COLOR_ENCODINGS`.

    ``rgb8`` comes back as the same view; other encodings are converted (one copy).
    """
    channels = rgb_channels(encoding)
    if channels is None:
        raise ImageConversionError(
            f"encoding '{encoding}' is not a colour encoding this model accepts "
            f"(accepted: {', '.join(COLOR_ENCODINGS)})")
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=2)
    # Slices, not fancy indexing: rgb/bgr/rgba/bgra come back as views.
    return image[:, :, :3] if channels[0] == 0 else image[:, :, 2::-1]
