"""Image → tensor preprocessing shared by every task and every runner.

:func:`prepare`, the path every frame takes, reproduces the usual YOLO letterbox (scale to
fit, centre, pad with a constant) and writes a contiguous NCHW float32 tensor in the model's
channel order, with scale/mean/std applied, in one pass per channel, without building the
padded 8-bit canvas a plain letterbox would (the tests compare it with that plain path).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..images import (CAMERA_ENCODINGS, COLOR_INPUTS, U8_INPUT_ORDER, ImageConversionError,
                      rgb_channels)
from ..manifest import Preprocessing
from ..text import show


@dataclass(frozen=True)
class LetterboxMeta:
    """What the letterbox did, so outputs can be mapped back to source pixels."""

    source_shape: tuple[int, int]  # (height, width) of the source image
    gain: tuple[float, float]      # (x, y) scale applied to the source; equal for letterbox
    pad: tuple[float, float]       # (left, top) padding in network pixels

    def to_source(self, boxes_xyxy: np.ndarray) -> np.ndarray:
        """Map (N, 4) xyxy boxes from network pixels to clipped source pixels, in place."""
        boxes_xyxy[:, 0::2] -= self.pad[0]
        boxes_xyxy[:, 1::2] -= self.pad[1]
        boxes_xyxy[:, 0::2] /= self.gain[0]
        boxes_xyxy[:, 1::2] /= self.gain[1]
        h, w = self.source_shape
        np.clip(boxes_xyxy[:, 0::2], 0, w, out=boxes_xyxy[:, 0::2])
        np.clip(boxes_xyxy[:, 1::2], 0, h, out=boxes_xyxy[:, 1::2])
        return boxes_xyxy


@dataclass(frozen=True)
class _Placement:
    """Where the resized source lands in the network input: size and top-left corner."""

    width: int
    height: int
    left: int
    top: int


def _fit(src_h: int, src_w: int, dst_h: int, dst_w: int) -> tuple[float, int, int]:
    """Scale keeping the aspect ratio to fit ``dst``: (gain, new height, new width).

    Each side is rounded (YOLO rounding) but never to 0 or past ``dst``: a 1 x 2000 image
    is one row high at any gain.
    """
    gain = min(dst_h / src_h, dst_w / src_w)
    new_h = min(dst_h, max(1, int(round(src_h * gain))))
    new_w = min(dst_w, max(1, int(round(src_w * gain))))
    return gain, new_h, new_w


def _place(src_h: int, src_w: int, size: tuple[int, int], enabled: bool
           ) -> tuple[_Placement, LetterboxMeta]:
    """Letterbox geometry (YOLO rounding) of a ``src_h`` × ``src_w`` image in ``size``."""
    dst_h, dst_w = size
    if not enabled:
        return (_Placement(dst_w, dst_h, 0, 0),
                LetterboxMeta((src_h, src_w), (dst_w / src_w, dst_h / src_h), (0.0, 0.0)))
    gain, new_h, new_w = _fit(src_h, src_w, dst_h, dst_w)
    top = int(round((dst_h - new_h) / 2 - 0.1))
    left = int(round((dst_w - new_w) / 2 - 0.1))
    return (_Placement(new_w, new_h, left, top),
            LetterboxMeta((src_h, src_w), (gain, gain), (float(left), float(top))))


#: ``Preprocessing.interpolation`` → OpenCV flag.
INTERPOLATION_FLAGS = {'linear': cv2.INTER_LINEAR, 'cubic': cv2.INTER_CUBIC}


def _resize(image: np.ndarray, place: _Placement, interpolation: str = 'linear') -> np.ndarray:
    """``image`` resized to the placement's size (the array itself when already that size)."""
    if image.shape[:2] == (place.height, place.width):
        return image
    return cv2.resize(image, (place.width, place.height),
                      interpolation=INTERPOLATION_FLAGS[interpolation])


def channel_map(encoding: str, color_order: str) -> tuple[int, int, int]:
    """Return the indices of the source channels that feed the model's three input channels.

    Refusing an encoding, the error lists every encoding a colour model accepts in a message
    (camera encodings included: they arrive here as ``rgb8``).
    """
    rgb = rgb_channels(encoding)
    if rgb is None and encoding in CAMERA_ENCODINGS:
        raise ImageConversionError(
            f'encoding {show(encoding)} is converted to rgb8 when a message is read '
            '(vision_nodes.ros.inputs.conversion.image_to_array), not by the task')
    if rgb is None:
        raise ImageConversionError(
            f'encoding {show(encoding)} cannot feed a colour model '
            f"(accepted: {', '.join(COLOR_INPUTS)})")
    return rgb if color_order == 'rgb' else rgb[::-1]


def _convert_planes(image: np.ndarray, channels: tuple[int, int, int], prep: Preprocessing,
                    out: np.ndarray) -> None:
    """Write (H, W, C) uint8 ``image`` into (3, H, W) float32 ``out``, normalised."""
    plain = prep.mean == (0.0, 0.0, 0.0) and prep.std == (1.0, 1.0, 1.0)
    # Contiguous planes: the conversion below reads them faster than strided channels.
    planes = cv2.split(image) if image.shape[2] > 1 else [image[:, :, 0]]
    for dst, src in enumerate(channels):
        plane = out[dst]
        np.multiply(planes[src], np.float32(prep.scale), out=plane, casting='unsafe')
        if not plain:
            plane -= np.float32(prep.mean[dst])
            plane /= np.float32(prep.std[dst])


def prepare(image: np.ndarray, encoding: str, size: tuple[int, int],
            prep: Preprocessing) -> tuple[np.ndarray, LetterboxMeta]:
    """Image array as decoded from a message → (network tensor, letterbox metadata).

    Equal to letterboxing onto a padded 8-bit canvas and converting that, without the
    canvas: the resized image is converted straight into its region of the tensor and the
    border is filled with the normalised pad value.
    """
    channels, place, meta, resized = _resized(image, encoding, prep.color_order, size, prep)
    out = np.empty((1, 3) + tuple(size), dtype=np.float32)
    rows = slice(place.top, place.top + place.height)
    cols = slice(place.left, place.left + place.width)
    _convert_planes(resized, channels, prep, out[0, :, rows, cols])
    if (place.width, place.height) != (size[1], size[0]):
        pad = (np.float32(prep.pad_value) * np.float32(prep.scale)
               - np.asarray(prep.mean, np.float32)) / np.asarray(prep.std, np.float32)
        for dst in range(3):
            plane = out[0, dst]
            plane[:place.top] = pad[dst]
            plane[place.top + place.height:] = pad[dst]
            plane[rows, :place.left] = pad[dst]
            plane[rows, place.left + place.width:] = pad[dst]
    return out, meta


def prepare_u8(image: np.ndarray, encoding: str, size: tuple[int, int],
               prep: Preprocessing) -> tuple[np.ndarray, LetterboxMeta]:
    """Image array → (letterboxed u8 (1, H, W, 3) image in ``U8_INPUT_ORDER``, metadata).

    For a runtime that converts the image itself (on its device, or inside its graph):
    :func:`prepare`'s geometry, resize and pad, without the float conversion. A resized image
    already in that order that fills the input is handed as it is, without a copy.
    """
    channels, place, meta, resized = _resized(image, encoding, U8_INPUT_ORDER, size, prep)
    fills = (place.width, place.height) == (size[1], size[0])
    in_order = channels == (0, 1, 2) and resized.shape[2] == 3
    if fills and in_order and resized is not image and resized.flags.c_contiguous:
        return resized[None], meta
    out = np.empty((1, size[0], size[1], 3), dtype=np.uint8)
    if not fills:
        out.fill(prep.pad_value)
    region = out[0, place.top:place.top + place.height, place.left:place.left + place.width]
    if in_order:
        region[...] = resized
    else:
        for dst, src in enumerate(channels):
            region[:, :, dst] = resized[:, :, src]
    return out, meta


def prepare_input(image: np.ndarray, encoding: str, size: tuple[int, int],
                  prep: Preprocessing, u8: bool) -> tuple[np.ndarray, LetterboxMeta]:
    """:func:`prepare_u8` for a runner that takes the u8 image (``u8``), else :func:`prepare`."""
    return (prepare_u8 if u8 else prepare)(image, encoding, size, prep)


def rect_shape(source_hw: tuple[int, int], max_hw: tuple[int, int], stride: int = 32
               ) -> tuple[int, int]:
    """Smallest (height, width), in multiples of ``stride``, that holds the letterboxed source.

    The source is scaled to fit ``max_hw`` keeping its aspect ratio (as the letterbox
    does), then each side is rounded up to the stride: 640 x 480 for a 4:3 camera and
    384 x 640 for 16:9 when ``max_hw`` is 640 x 640, instead of padding to the full square.
    """
    _, height, width = _fit(source_hw[0], source_hw[1], max_hw[0], max_hw[1])
    return (min(max_hw[0], -(-height // stride) * stride),
            min(max_hw[1], -(-width // stride) * stride))


def _resized(image: np.ndarray, encoding: str, order: str, size: tuple[int, int],
             prep: Preprocessing) -> tuple[tuple[int, int, int], _Placement, LetterboxMeta,
                                           np.ndarray]:
    """Return the channel map to ``order``, the placement, metadata, the resized image."""
    channels = channel_map(encoding, order)
    if image.dtype != np.uint8:
        raise ImageConversionError(
            f'encoding {show(encoding)} has {image.dtype} pixels; colour models take 8-bit '
            'images')
    place, meta = _place(image.shape[0], image.shape[1], size, prep.letterbox)
    resized = _resize(image, place, prep.interpolation)
    return channels, place, meta, resized[:, :, None] if resized.ndim == 2 else resized
