"""Conversion between ``sensor_msgs/Image`` and NumPy arrays, written without cv_bridge.

``image_to_numpy`` returns a *view* on the message buffer wherever the layout allows it
(no copy), honouring ``step`` (row padding) and ``is_bigendian``. ``numpy_to_image`` builds a
message from an array. Both raise :class:`~vision_nodes.images.ImageConversionError` with a
message that names the problem, so callers can log it and skip the frame.
"""

from __future__ import annotations

import array
import sys

import numpy as np

from ..images import ENCODINGS, ImageConversionError
from ..limits import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS
from ..text import show


def _as_bytes_view(data) -> np.ndarray:
    """Return a flat uint8 view of a message's ``data`` field without copying."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1).view(np.uint8)
    if isinstance(data, (bytes, bytearray, memoryview, array.array)):
        return np.frombuffer(data, dtype=np.uint8)
    # Fallback for plain sequences of ints (slow, but correct).
    return np.asarray(data, dtype=np.uint8)


def image_to_numpy(msg) -> np.ndarray:
    """Convert a ``sensor_msgs/Image`` into an ``(H, W)`` or ``(H, W, C)`` array.

    The result is a view on ``msg.data`` when possible (always for 8-bit encodings); it is
    read-only and may be non-contiguous when rows are padded. Big-endian multi-byte data is
    returned with a big-endian dtype (values are correct; call ``np.ascontiguousarray`` with a
    native dtype before heavy maths). Images beyond ``MAX_IMAGE_PIXELS`` pixels or
    ``MAX_IMAGE_BYTES`` bytes of rows (:mod:`vision_nodes.limits`) are refused.
    """
    encoding = msg.encoding
    info = ENCODINGS.get(encoding)
    if info is None:
        raise ImageConversionError(
            f'unsupported image encoding {show(encoding, 40)} '
            f"(supported: {', '.join(sorted(ENCODINGS))})")
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height <= 0 or width <= 0:
        raise ImageConversionError(f'image has no pixels ({width}x{height})')
    if height * width > MAX_IMAGE_PIXELS or height * step > MAX_IMAGE_BYTES:
        raise ImageConversionError(
            f'image of {width}x{height} px, step {step} B is larger than this node accepts '
            f'({MAX_IMAGE_PIXELS} px, {MAX_IMAGE_BYTES} B of rows): send a smaller image')
    dtype = info.dtype
    if dtype.itemsize > 1:
        dtype = dtype.newbyteorder('>' if msg.is_bigendian else '<')
    row_bytes = width * info.channels * dtype.itemsize
    if step < row_bytes:
        raise ImageConversionError(
            f'step {step} is smaller than one row of {width} px x {info.channels} ch x '
            f'{dtype.itemsize} B = {row_bytes} B ({encoding})')
    buf = _as_bytes_view(msg.data)
    needed = step * (height - 1) + row_bytes
    if buf.size < needed:
        raise ImageConversionError(
            f'data holds {buf.size} B but {height} rows of step {step} need {needed} B')
    # One strided view covers packed and padded rows alike; numpy tolerates unaligned rows.
    out = np.ndarray(shape=(height, width, info.channels), dtype=dtype, buffer=buf,
                     offset=0, strides=(step, info.channels * dtype.itemsize, dtype.itemsize))
    out.flags.writeable = False
    if info.channels == 1:
        out = out[:, :, 0]
    return out


def numpy_to_image(array_: np.ndarray, encoding: str, header=None):
    """Build a ``sensor_msgs/Image`` from an array (packed rows, native byte order)."""
    from sensor_msgs.msg import Image

    info = ENCODINGS.get(encoding)
    if info is None:
        raise ImageConversionError(f"unsupported image encoding '{encoding}'")
    arr = np.asarray(array_)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] != info.channels:
        raise ImageConversionError(
            f'array of shape {array_.shape} does not match {encoding} ({info.channels} channels)')
    if arr.dtype.newbyteorder('=') != info.dtype.newbyteorder('='):
        raise ImageConversionError(
            f'array dtype {arr.dtype} does not match {encoding} ({info.dtype})')
    arr = np.ascontiguousarray(arr, dtype=info.dtype.newbyteorder('='))
    msg = Image()
    if header is not None:
        msg.header = header
    msg.height, msg.width = int(arr.shape[0]), int(arr.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = int(sys.byteorder == 'big' and arr.dtype.itemsize > 1)
    msg.step = int(arr.shape[1] * info.channels * arr.dtype.itemsize)
    msg.data = array.array('B', arr.tobytes())
    return msg
