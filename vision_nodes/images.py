"""Image encodings (``sensor_msgs/Image`` names) and what they mean as NumPy arrays.

ROS-free: the table of encodings, their channel orders, the camera encodings converted to RGB
before any model sees them, and the error every image problem raises
(:class:`ImageConversionError`, whose message names the problem so callers can log it and skip
the frame). Messages are turned into arrays in :mod:`vision_nodes.ros.inputs.conversion`.

Camera encodings are what drivers publish when they pass the sensor's format on (names and
layouts as in ``sensor_msgs/image_encodings.hpp`` and the V4L2 formats it cites):

* packed YUV 4:2:2, two bytes a pixel: ``uyvy`` (U0 Y0 V0 Y1; ``yuv422`` is its older ROS
  name, what usb_cam and most USB webcams send) and ``yuyv`` (Y0 U0 Y1 V0; older name
  ``yuv422_yuy2``). The width must be even.
* semi-planar YUV: a plane of Y rows (``step`` bytes apart), then from ``height * step`` on a
  plane of interleaved chroma rows: ``nv12`` (U V) and ``nv21`` (V U), 4:2:0, ``height / 2``
  chroma rows ``step`` apart (width and height even); ``nv24`` (U V), 4:4:4, ``height``
  chroma rows ``2 * step`` apart.
* 8-bit Bayer mosaics ``bayer_rggb8``, ``bayer_bggr8``, ``bayer_gbrg8``, ``bayer_grbg8``
  (the pattern names the first two rows: ``rggb`` is R G R G ... over G B G B ...),
  demosaiced bilinearly. 16-bit Bayer is refused: the models take 8-bit colour.

YUV is read as ITU-R BT.601 with video range (Y 16-235), as OpenCV and V4L2 cameras do.
A frame is converted once, by OpenCV (one call; three passes for ``nv24``, which OpenCV has
no conversion for), before the models run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from .text import show


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


@dataclass(frozen=True)
class CameraEncoding:
    """A camera's own encoding, converted to RGB before any model sees it."""

    layout: str  # 'yuv422' (packed), 'yuv420sp' (nv12/nv21), 'yuv444sp' (nv24) or 'bayer'
    code: int    # OpenCV's conversion to RGB (yuv444sp: -1, see _YUV444_TO_RGB)


_BAYER_NAMES = ('bayer_rggb8', 'bayer_bggr8', 'bayer_gbrg8', 'bayer_grbg8')
#: OpenCV names a Bayer pattern by the second row's second and third pixels: ROS's
#: ``bayer_rggb8`` (R G / G B) is OpenCV's ``BayerBG``.
_BAYER_CODES = (cv2.COLOR_BayerBG2RGB, cv2.COLOR_BayerRG2RGB, cv2.COLOR_BayerGR2RGB,
                cv2.COLOR_BayerGB2RGB)

CAMERA_ENCODINGS: dict[str, CameraEncoding] = {
    'uyvy': CameraEncoding('yuv422', cv2.COLOR_YUV2RGB_UYVY),
    'yuv422': CameraEncoding('yuv422', cv2.COLOR_YUV2RGB_UYVY),
    'yuyv': CameraEncoding('yuv422', cv2.COLOR_YUV2RGB_YUY2),
    'yuv422_yuy2': CameraEncoding('yuv422', cv2.COLOR_YUV2RGB_YUY2),
    'nv12': CameraEncoding('yuv420sp', cv2.COLOR_YUV2RGB_NV12),
    'nv21': CameraEncoding('yuv420sp', cv2.COLOR_YUV2RGB_NV21),
    'nv24': CameraEncoding('yuv444sp', -1),
    **{name: CameraEncoding('bayer', code) for name, code in zip(_BAYER_NAMES, _BAYER_CODES)},
}

#: Every encoding a colour model accepts from a message: read as it is, or converted first.
COLOR_INPUTS = COLOR_ENCODINGS + tuple(CAMERA_ENCODINGS)
#: Channel order of the u8 image a model with its pre-processing embedded takes (the task
#: hands it, the runtime converts it): most cameras send bgr8.
U8_INPUT_ORDER = 'bgr'

#: BT.601 video range YUV → RGB as one affine map over (Y, U, V): OpenCV's coefficients for
#: its 4:2:0 and 4:2:2 conversions, which have no 4:4:4 counterpart.
_BT601 = np.array([[1.164, 0.0, 1.596], [1.164, -0.391, -0.813], [1.164, 2.018, 0.0]])
_YUV444_TO_RGB = np.hstack([_BT601, -_BT601 @ [[16.0], [128.0], [128.0]]]).astype(np.float32)


@dataclass(frozen=True)
class Plane:
    """One plane of an image in a message's ``data``: a (rows, cols, channels) array.

    Planes follow each other; a plane's rows are ``stride`` times the message's ``step`` apart.
    """

    rows: int
    cols: int
    channels: int
    stride: int = 1


def _unsupported(encoding: str) -> ImageConversionError:
    if encoding.startswith('bayer_') and encoding.endswith('16'):
        return ImageConversionError(
            f'16-bit Bayer {show(encoding, 40)} is not converted (the models take 8-bit '
            'colour): set the camera to its 8-bit Bayer format (bayer_*8) or to rgb8/bgr8')
    names = ', '.join(sorted([*ENCODINGS, *CAMERA_ENCODINGS]))
    return ImageConversionError(
        f'unsupported image encoding {show(encoding, 40)} (supported: {names})')


def _camera_planes(encoding: str, layout: str, width: int, height: int) -> tuple[Plane, ...]:
    if layout == 'bayer':
        return (Plane(height, width, 1),)
    if layout != 'yuv444sp' and width % 2:
        sampling = '4:2:2' if layout == 'yuv422' else '4:2:0'
        raise ImageConversionError(
            f'{encoding} image of {width}x{height} has an odd width: YUV {sampling} needs '
            'an even one')
    if layout == 'yuv422':
        return (Plane(height, width, 2),)
    if layout == 'yuv420sp':
        if height % 2:
            raise ImageConversionError(
                f'{encoding} image of {width}x{height} has an odd height: YUV 4:2:0 needs '
                'an even one')
        return Plane(height, width, 1), Plane(height // 2, width // 2, 2)
    return Plane(height, width, 1), Plane(height, width, 2, stride=2)


def image_planes(encoding: str, width: int, height: int) -> tuple[np.dtype, tuple[Plane, ...]]:
    """Where a ``width`` x ``height`` image in ``encoding`` lies in a message: dtype, planes.

    One plane for the encodings of :data:`ENCODINGS`, one or two for camera encodings.
    Raises :class:`ImageConversionError` for an unknown encoding or a size its layout cannot
    have (odd width of YUV 4:2:2, odd width or height of YUV 4:2:0).
    """
    info = ENCODINGS.get(encoding)
    if info is not None:
        return info.dtype, (Plane(height, width, info.channels),)
    camera = CAMERA_ENCODINGS.get(encoding)
    if camera is None:
        raise _unsupported(encoding)
    return _U8, _camera_planes(encoding, camera.layout, width, height)


def camera_to_rgb(encoding: str, planes: Sequence[np.ndarray]) -> np.ndarray:
    """Convert a camera encoding's planes (as :func:`image_planes` lays them out) to RGB.

    Returns a new (H, W, 3) uint8 array; the planes may be strided views on a message.
    """
    camera = CAMERA_ENCODINGS[encoding]
    if camera.layout == 'yuv420sp':
        return cv2.cvtColorTwoPlane(planes[0][:, :, 0], planes[1], camera.code)
    if camera.layout == 'yuv444sp':
        luma = cv2.max(planes[0][:, :, 0], 16)  # below 16 is black, as OpenCV's 4:2:0 has it
        return cv2.transform(cv2.merge([luma, planes[1]]), _YUV444_TO_RGB)
    image = planes[0] if camera.layout == 'yuv422' else planes[0][:, :, 0]
    return cv2.cvtColor(image, camera.code)
