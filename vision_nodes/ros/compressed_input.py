"""``sensor_msgs/CompressedImage`` ↔ NumPy arrays, the way image_transport's plugin does it.

``compressed_to_numpy`` is the node's input adapter: the message's bytes and ``format`` go to
:func:`vision_nodes.image_codecs.decode_compressed` (ROS-free), which returns the decoded array and
the ``sensor_msgs/Image`` encoding describing it. ``numpy_to_compressed`` builds a message as
the ``compressed`` publisher plugin of image_transport would (colour → BGR, 16-bit mono JPEG
→ 8 bits, the same ``format`` strings), for tests, the benchmark and scripts.
"""

from __future__ import annotations

import array

import cv2
import numpy as np

from ..image_codecs import decode_compressed
from ..images import ENCODINGS, ImageConversionError, rgb_channels
from ..text import clip

#: image_transport's ``jpeg_quality`` default.
DEFAULT_JPEG_QUALITY = 95
#: image_transport's ``png_level`` default.
DEFAULT_PNG_LEVEL = 3


def compressed_topic(node, base: str = 'image') -> str:
    """Return the topic of ``base``'s compressed images: ``<resolved base>/compressed``.

    As image_transport does: the base name is expanded and remapped first (``image:=/cam/
    image_raw`` gives ``/cam/image_raw/compressed``); a remap of ``image`` does not apply to
    the name ``image/compressed`` itself.
    """
    return node.resolve_topic_name(base).rstrip('/') + '/compressed'


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
