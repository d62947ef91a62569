"""``sensor_msgs/Image`` and ``CompressedImage`` ↔ NumPy arrays, written without cv_bridge.

:func:`to_array` is the node's one input adapter, for ``Image`` and ``CompressedImage``
alike (both frame paths call it). ``image_to_array`` reads an ``Image``: the encodings of
:data:`~vision_nodes.images.ENCODINGS` come back as a *view* on the message buffer (no copy),
honouring ``step`` (row padding) and ``is_bigendian``; camera encodings (YUV, Bayer: see
:mod:`vision_nodes.images`) are converted once, to a new ``rgb8`` array. ``image_to_numpy``
is the view alone. ``compressed_to_numpy`` reads a ``CompressedImage`` the way
image_transport's plugin does: its bytes and ``format`` go to
:func:`vision_nodes.image_codecs.decode_compressed` (ROS-free), which returns the decoded array
and the ``sensor_msgs/Image`` encoding describing it. ``numpy_to_image`` builds a message from
an array; ``numpy_to_compressed`` as the ``compressed`` publisher plugin of image_transport
would (colour → BGR, 16-bit mono JPEG → 8 bits, the same ``format`` strings), for tests, the
benchmarks and scripts. All raise
:class:`~vision_nodes.images.ImageConversionError` with a message that names the problem, so
callers can log it and skip the frame.
"""

from __future__ import annotations

import array
import sys

import cv2
import numpy as np

from ...image_codecs import decode_compressed
from ...images import (CAMERA_ENCODINGS, ENCODINGS, ImageConversionError, Plane, camera_to_rgb,
                       image_planes, rgb_channels)
from ...limits import MAX_IMAGE_BYTES, MAX_IMAGE_PIXELS
from ...text import clip, show

#: image_transport's ``jpeg_quality`` default.
DEFAULT_JPEG_QUALITY = 95
#: image_transport's ``png_level`` default.
DEFAULT_PNG_LEVEL = 3


def _as_bytes_view(data) -> np.ndarray:
    """Return a flat uint8 view of a message's ``data`` field without copying."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1).view(np.uint8)
    if isinstance(data, (bytes, bytearray, memoryview, array.array)):
        return np.frombuffer(data, dtype=np.uint8)
    # Fallback for plain sequences of ints (slow, but correct).
    return np.asarray(data, dtype=np.uint8)


def _plane_views(buf: np.ndarray, step: int, planes: tuple[Plane, ...], dtype: np.dtype,
                 encoding: str) -> list[np.ndarray]:
    """Strided (rows, cols, channels) views of ``planes`` in ``buf``, checked against its size."""
    first = planes[0]
    row_bytes = first.cols * first.channels * dtype.itemsize
    if step < row_bytes:
        raise ImageConversionError(
            f'step {step} is smaller than one row of {first.cols} px x {first.channels} ch x '
            f'{dtype.itemsize} B = {row_bytes} B ({encoding})')
    offset, starts = 0, []
    for plane in planes:
        starts.append(offset)
        offset += plane.rows * plane.stride * step
    last = planes[-1]
    needed = starts[-1] + last.stride * step * (last.rows - 1) + \
        last.cols * last.channels * dtype.itemsize
    if buf.size < needed:
        rows = ' then '.join(f'{p.rows} rows of step {p.stride * step}' for p in planes)
        raise ImageConversionError(f'data holds {buf.size} B but {rows} need {needed} B')
    # One strided view per plane covers packed and padded rows alike; numpy tolerates
    # unaligned rows.
    views = [np.ndarray(shape=(p.rows, p.cols, p.channels), dtype=dtype, buffer=buf,
                        offset=start, strides=(p.stride * step, p.channels * dtype.itemsize,
                                               dtype.itemsize))
             for p, start in zip(planes, starts)]
    for view in views:
        view.flags.writeable = False
    return views


def _too_large(width: int, height: int, step: int) -> ImageConversionError:
    return ImageConversionError(
        f'image of {width}x{height} px, step {step} B is larger than this node accepts '
        f'({MAX_IMAGE_PIXELS} px, {MAX_IMAGE_BYTES} B of rows): send a smaller image')


def _message_planes(msg) -> list[np.ndarray]:
    """Check a message's geometry against the bounds and its encoding; view its planes."""
    encoding = msg.encoding
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if height * width > MAX_IMAGE_PIXELS:
        raise _too_large(width, height, step)
    dtype, planes = image_planes(encoding, width, height)
    if height <= 0 or width <= 0:
        raise ImageConversionError(f'image has no pixels ({width}x{height})')
    if sum(plane.rows * plane.stride for plane in planes) * step > MAX_IMAGE_BYTES:
        raise _too_large(width, height, step)
    if dtype.itemsize > 1:
        dtype = dtype.newbyteorder('>' if msg.is_bigendian else '<')
    return _plane_views(_as_bytes_view(msg.data), step, planes, dtype, encoding)


def to_array(msg) -> tuple[np.ndarray, str]:
    """Convert an ``Image`` or a ``CompressedImage`` (it has a ``format``): (array, encoding).

    Raises :class:`~vision_nodes.images.ImageConversionError` with a one-line reason.
    """
    return compressed_to_numpy(msg) if hasattr(msg, 'format') else image_to_array(msg)


def image_to_array(msg) -> tuple[np.ndarray, str]:
    """Convert a ``sensor_msgs/Image`` into ``(array, encoding)``, the way the node reads it.

    Encodings of :data:`~vision_nodes.images.ENCODINGS` give :func:`image_to_numpy`'s view
    and the message's encoding; camera encodings (YUV 4:2:2, NV12/NV21/NV24, 8-bit Bayer) a
    new (H, W, 3) array and ``'rgb8'``. Images beyond ``MAX_IMAGE_PIXELS`` pixels or
    ``MAX_IMAGE_BYTES`` bytes of rows (:mod:`vision_nodes.limits`) are refused before any
    work, as are sizes and steps the encoding's layout cannot have.
    """
    planes = _message_planes(msg)
    encoding = msg.encoding
    if encoding in ENCODINGS:
        view = planes[0]
        return (view[:, :, 0] if view.shape[2] == 1 else view), encoding
    try:
        return camera_to_rgb(encoding, planes), 'rgb8'
    except (cv2.error, MemoryError) as exc:  # OpenCV's errors span lines: one line here
        raise ImageConversionError(
            f'{encoding} image of {msg.width}x{msg.height} could not be converted: '
            f"{clip(' '.join(str(exc).split()) or type(exc).__name__)}") from None


def image_to_numpy(msg) -> np.ndarray:
    """Convert a ``sensor_msgs/Image`` into an ``(H, W)`` or ``(H, W, C)`` array.

    The result is a view on ``msg.data`` when possible (always for 8-bit encodings); it is
    read-only and may be non-contiguous when rows are padded. Big-endian multi-byte data is
    returned with a big-endian dtype (values are correct; call ``np.ascontiguousarray`` with a
    native dtype before heavy maths). Camera encodings have no such view: they are refused
    here, and :func:`image_to_array` converts them.
    """
    if msg.encoding in CAMERA_ENCODINGS:
        raise ImageConversionError(
            f'encoding {show(msg.encoding, 40)} is converted, not viewed: use image_to_array')
    return image_to_array(msg)[0]


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


def compressed_to_numpy(msg, jpeg_decoder: str | None = None) -> tuple[np.ndarray, str]:
    """Decode a ``sensor_msgs/CompressedImage``; return ``(array, encoding)``.

    Raises :class:`~vision_nodes.images.ImageConversionError` with a one-line reason for bad,
    truncated, oversized or unsupported data.
    """
    return decode_compressed(msg.data, msg.format, jpeg_decoder)


def numpy_to_compressed(image: np.ndarray, encoding: str, codec: str = 'jpeg',
                        quality: int = DEFAULT_JPEG_QUALITY, png_level: int = DEFAULT_PNG_LEVEL,
                        header=None):
    """Compress an image array into a ``sensor_msgs/CompressedImage`` (image_transport style).

    Colour encodings are encoded as BGR (``"<encoding>; <codec> compressed bgr8"``); mono
    JPEG is 8-bit (``mono16`` is reduced to its high byte, as cv_bridge does); mono PNG keeps
    its depth (``"<encoding>; png compressed "``).
    """
    from sensor_msgs.msg import CompressedImage

    info = ENCODINGS.get(encoding)
    if info is None or info.dtype.kind == 'f':
        raise ImageConversionError(f"cannot compress encoding '{clip(encoding)}'")
    if codec not in ('jpeg', 'png'):
        raise ValueError(f"codec must be 'jpeg' or 'png', not '{clip(codec)}'")
    arr = np.asarray(image)
    color = info.channels > 1
    if color:
        rgb = rgb_channels(encoding)
        bgr = arr[:, :, 2::-1] if rgb == (0, 1, 2) else arr[:, :, :3]
        pixels, target = np.ascontiguousarray(bgr), 'bgr8'
    else:
        pixels = arr.reshape(arr.shape[0], arr.shape[1])
        if codec == 'jpeg' and pixels.dtype == np.uint16:
            pixels = (pixels >> 8).astype(np.uint8)
        target = 'mono8' if codec == 'jpeg' else ''
    if codec == 'jpeg':
        ok, data = cv2.imencode('.jpg', pixels, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    else:
        ok, data = cv2.imencode('.png', pixels, [cv2.IMWRITE_PNG_COMPRESSION, int(png_level)])
    if not ok:
        raise ImageConversionError(f'OpenCV could not encode a {encoding} image as {codec}')
    msg = CompressedImage()
    if header is not None:
        msg.header = header
    msg.format = f'{encoding}; {codec} compressed {target}'
    msg.data = array.array('B', data.tobytes())
    return msg
