"""Image → tensor preprocessing shared by every task and every runner.

``letterbox`` reproduces the usual YOLO letterbox (scale to fit, centre, pad with a constant)
and ``to_tensor`` turns the result into a contiguous NCHW float32 tensor in the model's channel
order, with scale/mean/std applied, in one pass per channel.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..image_conversion import ImageConversionError, rgb_channels
from ..manifest import Preprocessing


@dataclass(frozen=True)
class LetterboxMeta:
    """What :func:`letterbox` did, so outputs can be mapped back to source pixels."""

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


def letterbox(image: np.ndarray, size: tuple[int, int], pad_value: int = 114,
              enabled: bool = True) -> tuple[np.ndarray, LetterboxMeta]:
    """Resize ``image`` (H, W[, C]) into ``size`` (height, width).

    With ``enabled`` the aspect ratio is kept and the border padded with ``pad_value``
    (centred, YOLO rounding); without it the image is stretched to ``size``.
    """
    src_h, src_w = image.shape[:2]
    dst_h, dst_w = size
    if not enabled:
        out = cv2.resize(image, (dst_w, dst_h), interpolation=cv2.INTER_LINEAR)
        return out, LetterboxMeta((src_h, src_w), (dst_w / src_w, dst_h / src_h), (0.0, 0.0))
    gain = min(dst_h / src_h, dst_w / src_w)
    new_w, new_h = int(round(src_w * gain)), int(round(src_h * gain))
    dw, dh = (dst_w - new_w) / 2, (dst_h - new_h) / 2
    top, left = int(round(dh - 0.1)), int(round(dw - 0.1))
    channels = image.shape[2] if image.ndim == 3 else 1
    canvas = np.full((dst_h, dst_w, channels), pad_value, dtype=image.dtype)
    region = canvas[top:top + new_h, left:left + new_w]
    if (new_w, new_h) == (src_w, src_h):
        region[...] = image.reshape(src_h, src_w, channels)
    else:
        resized = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
        region[...] = resized.reshape(new_h, new_w, channels)
    return canvas, LetterboxMeta((src_h, src_w), (gain, gain), (float(left), float(top)))


def channel_map(encoding: str, color_order: str) -> tuple[int, int, int]:
    """Return the indices of the source channels that feed the model's three input channels."""
    rgb = rgb_channels(encoding)
    if rgb is None:
        raise ImageConversionError(
            f"encoding '{encoding}' cannot feed a colour model "
            "(use rgb8, bgr8, rgba8, bgra8 or mono8)")
    return rgb if color_order == 'rgb' else rgb[::-1]


def to_tensor(canvas: np.ndarray, channels: tuple[int, int, int],
              prep: Preprocessing) -> np.ndarray:
    """(H, W, C) uint8 → contiguous (1, 3, H, W) float32, normalised, in model channel order."""
    h, w = canvas.shape[:2]
    out = np.empty((1, 3, h, w), dtype=np.float32)
    plain = prep.mean == (0.0, 0.0, 0.0) and prep.std == (1.0, 1.0, 1.0)
    # Contiguous planes make the conversion below ~30 % faster than strided channel reads.
    planes = cv2.split(canvas) if canvas.shape[2] > 1 else [canvas[:, :, 0]]
    for dst, src in enumerate(channels):
        plane = out[0, dst]
        np.multiply(planes[src], np.float32(prep.scale), out=plane, casting='unsafe')
        if not plain:
            plane -= np.float32(prep.mean[dst])
            plane /= np.float32(prep.std[dst])
    return out


def prepare(image: np.ndarray, encoding: str, size: tuple[int, int],
            prep: Preprocessing) -> tuple[np.ndarray, LetterboxMeta]:
    """Image array as decoded from a message → (network tensor, letterbox metadata)."""
    channels = channel_map(encoding, prep.color_order)
    if image.dtype != np.uint8:
        raise ImageConversionError(
            f"encoding '{encoding}' has {image.dtype} pixels; colour models take 8-bit images")
    canvas, meta = letterbox(image, size, prep.pad_value, prep.letterbox)
    if canvas.ndim == 2:
        canvas = canvas[:, :, None]
    return to_tensor(canvas, channels, prep), meta
