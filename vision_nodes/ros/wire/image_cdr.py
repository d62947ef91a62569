"""``sensor_msgs/Image`` as CDR bytes: the node's own images (depth, masks, annotated).

The header fields, written by :class:`.cdr_writer.CdrWriter` (``height``, ``width``,
``encoding``, ``is_bigendian``, ``step``, then the ``data`` length), then the pixels, copied
once, straight from the array into the bytes that ``Publisher.publish`` takes as they are.
"""

from __future__ import annotations

import sys

import numpy as np

from .cdr_writer import CdrWriter


def big_endian(dtype: np.dtype) -> int:
    """Return ``is_bigendian`` for pixels of ``dtype``: 1 for multi-byte big-endian values."""
    order = dtype.byteorder if dtype.byteorder != '=' else \
        ('>' if sys.byteorder == 'big' else '<')
    return int(dtype.itemsize > 1 and order == '>')


def encode_image(pixels: np.ndarray, encoding: str, header) -> bytes:
    """Serialise a ``sensor_msgs/Image`` of a C-contiguous (H, W[, C]) array, as rclpy would.

    ``step`` is the array's row stride and ``is_bigendian`` its values' byte order; the pixels
    are copied once, into the returned bytes (padding bytes are zeros, where rclpy's serialiser
    leaves whatever was in memory).
    """
    if not pixels.flags.c_contiguous or pixels.ndim not in (2, 3):
        raise ValueError(f'an image is a C-contiguous (H, W[, C]) array, got shape '
                         f'{pixels.shape}')
    writer = CdrWriter()
    writer.header(header.stamp.sec, header.stamp.nanosec, header.frame_id)
    writer.uint32(pixels.shape[0])
    writer.uint32(pixels.shape[1])
    writer.string(encoding)
    writer.uint8(big_endian(pixels.dtype))
    writer.uint32(pixels.strides[0])
    writer.uint32(pixels.nbytes)
    return b''.join((writer.out, memoryview(pixels).cast('B')))
