"""``sensor_msgs/Image`` as CDR bytes: the node's own images (depth, masks, annotated).

The header fields, written by :class:`.cdr_writer.CdrWriter` (``height``, ``width``,
``encoding``, ``is_bigendian``, ``step``, then the ``data`` length), then the pixels, copied
once, straight from the array into the bytes that ``Publisher.publish`` takes as they are.
"""

from __future__ import annotations

import numpy as np

from .cdr_writer import CdrWriter


def encode_image(pixels: np.ndarray, encoding: str, header, is_bigendian: int = 0) -> bytes:
    """Serialise a ``sensor_msgs/Image`` of a C-contiguous (H, W[, C]) array, as rclpy would.

    ``step`` is the array's row stride; the pixels are copied once, into the returned bytes
    (padding bytes are zeros, where rclpy's serialiser leaves whatever was in memory).
    """
    if not pixels.flags.c_contiguous or pixels.ndim not in (2, 3):
        raise ValueError(f'an image is a C-contiguous (H, W[, C]) array, got shape '
                         f'{pixels.shape}')
    writer = CdrWriter()
    writer.header(header.stamp.sec, header.stamp.nanosec, header.frame_id)
    writer.uint32(pixels.shape[0])
    writer.uint32(pixels.shape[1])
    writer.string(encoding)
    writer.uint8(is_bigendian)
    writer.uint32(pixels.strides[0])
    writer.uint32(pixels.nbytes)
    return b''.join((writer.out, memoryview(pixels).cast('B')))
