"""Reference implementations of image steps the package fuses, for tests to compare against.

The package converts a decoded image into the network tensor in one pass
(:func:`vision_nodes.tasks.preprocess.prepare`); these build the same tensor the plain way (a
padded 8-bit canvas, then a float tensor), so a test can check the fused path against them.
"""

from __future__ import annotations

import numpy as np

from vision_nodes.manifest import Preprocessing
from vision_nodes.tasks.preprocess import LetterboxMeta, _place, _resize


def letterbox(image: np.ndarray, size: tuple[int, int], pad_value: int = 114,
              enabled: bool = True) -> tuple[np.ndarray, LetterboxMeta]:
    """Resize ``image`` (H, W[, C]) into ``size`` (height, width) on a padded canvas.

    With ``enabled`` the aspect ratio is kept and the border padded with ``pad_value``
    (centred, YOLO rounding); without it the image is stretched to ``size``.
    """
    place, meta = _place(image.shape[0], image.shape[1], size, enabled)
    channels = image.shape[2] if image.ndim == 3 else 1
    canvas = np.full((size[0], size[1], channels), pad_value, dtype=image.dtype)
    region = canvas[place.top:place.top + place.height, place.left:place.left + place.width]
    region[...] = _resize(image, place).reshape(place.height, place.width, channels)
    return canvas, meta


def to_tensor(canvas: np.ndarray, channels: tuple[int, int, int],
              prep: Preprocessing) -> np.ndarray:
    """(H, W, C) uint8 → contiguous (1, 3, H, W) float32, normalised, in model channel order."""
    out = canvas[:, :, list(channels)].astype(np.float32) * np.float32(prep.scale)
    out = (out - np.asarray(prep.mean, np.float32)) / np.asarray(prep.std, np.float32)
    return np.ascontiguousarray(out.transpose(2, 0, 1)[None])
