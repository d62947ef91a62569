"""Pillow's antialiased resize of 8-bit images, reproduced: Ultralytics' classify pre-processing.

Ultralytics' classify transforms resize a PIL image (torchvision's ``Resize``, which on PIL
images is ``Image.resize``: a convolution whose filter widens with the downscale factor,
antialiased) and centre-crop it. OpenCV's resizes sample other points with other weights, so
this module gives Pillow's bytes exactly, three ways, the first that is installed: Numba's
compiled pass (:mod:`.resample_kernel`: only the rows and columns the crop keeps, each pass
over whole rows in SIMD lanes; a quarter of Pillow's time at 810 x 1080), Pillow's resize
(its C loops, then the crop), or NumPy in Pillow's arithmetic (below). The tests hold the
first and the last to Pillow byte for byte.

Pillow's 8-bit resample (``libImaging/Resample.c``): for each output pixel the filter's
weights over its input span, computed in double, normalised to sum 1 and rounded to 22-bit
fixed point; one pass along each axis, each rounded and clipped to 8 bits, the horizontal one
first unless the height shrinks by more than twice as many pixels as the width (Pillow 13's
rule, :func:`vertical_first`; older Pillows always go horizontal first, and where the rule
picks vertical first a value may then differ by one). A channel is resampled on its own (the
compiled and NumPy paths compute only the rows and columns the crop keeps: the same values).
"""

from __future__ import annotations

import warnings
from functools import lru_cache, partial
from typing import Callable, NamedTuple

import cv2
import numpy as np

#: Pillow's fixed-point fraction bits for 8-bit images (``PRECISION_BITS``).
_BITS = 32 - 8 - 2
#: Pillow's resize is used while the whole resized image is at most this many times the crop
#: (an image far from the crop's aspect ratio is resized in NumPy, only where it is kept).
_WHOLE_RESIZE_LIMIT = 4


def _bilinear(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


def _bicubic(x: np.ndarray) -> np.ndarray:
    x, a = np.abs(x), -0.5
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


#: interpolation -> (Pillow's filter function, its support, Pillow's filter name).
FILTERS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float, str]] = {
    'linear': (_bilinear, 1.0, 'BILINEAR'), 'cubic': (_bicubic, 2.0, 'BICUBIC')}


@lru_cache(maxsize=32)
def _coefficients(in_size: int, out_size: int, interpolation: str
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Pillow's ``precompute_coeffs`` + ``normalize_coeffs_8bpc``: (first input, int32 weights)."""
    function, base, _ = FILTERS[interpolation]
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = base * filterscale
    size = int(np.ceil(support)) * 2 + 1
    centre = (np.arange(out_size) + 0.5) * scale
    first = np.maximum((centre - support + 0.5).astype(np.int64), 0)
    count = np.minimum((centre + support + 0.5).astype(np.int64), in_size) - first
    taps = np.arange(size)
    weights = function((taps[None, :] + first[:, None] - centre[:, None] + 0.5)
                       * (1.0 / filterscale))
    weights = np.where(taps[None, :] < count[:, None], weights, 0.0)
    total = weights.sum(axis=1, keepdims=True)
    weights = np.where(total != 0.0, weights / np.where(total != 0.0, total, 1.0), weights)
    fixed = np.where(weights < 0, np.trunc(-0.5 + weights * (1 << _BITS)),
                     np.trunc(0.5 + weights * (1 << _BITS)))
    return first, fixed.astype(np.int32)


def _pass(planes: np.ndarray, first: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Resample the last axis of (rows, n) uint8 ``planes`` to ``len(first)`` values, as Pillow."""
    index = np.minimum(first[:, None] + np.arange(weights.shape[1])[None, :],
                       planes.shape[1] - 1)
    total = np.full((planes.shape[0], first.shape[0]), 1 << (_BITS - 1), np.int32)
    term = np.empty_like(total)
    for tap in range(weights.shape[1]):
        np.multiply(np.take(planes, index[:, tap], axis=1), weights[:, tap], out=term,
                    dtype=np.int32)
        total += term
    total >>= _BITS
    return np.clip(total, 0, 255).astype(np.uint8)


class _Taps(NamedTuple):
    """One axis's resample, for the outputs a window keeps: Pillow's weights, inputs used."""

    first: np.ndarray | None  # each output's first input (None: the axis keeps its size)
    weights: np.ndarray | None
    lo: int  # the inputs [lo, hi) those outputs read
    hi: int


def _taps(in_size: int, out_size: int, start: int, count: int, interpolation: str) -> _Taps:
    """Return the taps of outputs [start, start + count) of an axis resized to ``out_size``."""
    if in_size == out_size:  # Pillow skips the pass: the window of the input itself
        return _Taps(None, None, start, start + count)
    first, weights = (a[start:start + count] for a in
                      _coefficients(in_size, out_size, interpolation))
    return _Taps(first, weights, int(first.min()),
                 int(min(in_size, (first + weights.shape[1]).max())))


def _resample_last(planes: np.ndarray, taps: _Taps) -> np.ndarray:
    """Resample the last axis of (..., n) ``planes``: the inputs [``taps.lo``, ``taps.hi``)."""
    if taps.first is None:
        return planes
    flat = np.ascontiguousarray(planes).reshape(-1, taps.hi - taps.lo)
    out = _pass(flat, taps.first - taps.lo, taps.weights)
    return out.reshape(planes.shape[:-1] + (taps.first.shape[0],))


#: One pass over (h, w, C) planes holding the inputs [taps.lo, taps.hi) of its axis.
Pass = Callable[[np.ndarray, _Taps], np.ndarray]


def _numpy_down(planes: np.ndarray, taps: _Taps) -> np.ndarray:
    """Resample the rows of (h, w, C) ``planes`` in NumPy."""
    return _resample_last(planes.transpose(2, 1, 0), taps).transpose(2, 1, 0)


def _numpy_across(planes: np.ndarray, taps: _Taps) -> np.ndarray:
    """Resample the columns of (h, w, C) ``planes`` in NumPy."""
    return _resample_last(planes.transpose(2, 0, 1), taps).transpose(1, 2, 0)


def vertical_first(source: tuple[int, int], size: tuple[int, int]) -> bool:
    """Return whether Pillow (13.0) runs the vertical pass first for this resize.

    It does when the height shrinks by more than twice as many pixels as the width (older
    Pillows always run the horizontal pass first).
    """
    shrink_h, shrink_w = source[0] - size[0], source[1] - size[1]
    return shrink_h > 0 and shrink_h > shrink_w * 2


def _crop(image: np.ndarray, size: tuple[int, int], window: tuple[int, int, int, int],
          interpolation: str, down: Pass, across: Pass) -> np.ndarray:
    """Pillow's resize of (H, W, C) ``image`` to ``size`` (h, w), only inside ``window``.

    Each pass computes only what the window needs: the first pass the rows (or columns) the
    second one reads, the second the window's; each value is the whole resize's. The passes
    run in Pillow's order with ``down`` and ``across``.
    """
    top, left, height, width = window
    rows, cols = image.shape[:2]
    across_taps = _taps(cols, size[1], left, width, interpolation)
    down_taps = _taps(rows, size[0], top, height, interpolation)
    region = image[down_taps.lo:down_taps.hi, across_taps.lo:across_taps.hi]
    if vertical_first((rows, cols), size):
        out = across(down(region, down_taps), across_taps)
    else:
        out = down(across(region, across_taps), down_taps)
    return np.ascontiguousarray(out)


def _numpy_crop(image: np.ndarray, size: tuple[int, int], window: tuple[int, int, int, int],
                interpolation: str) -> np.ndarray:
    """:func:`_crop` with NumPy's passes."""
    return _crop(image, size, window, interpolation, _numpy_down, _numpy_across)


def _pillow_crop(image: np.ndarray, size: tuple[int, int], window: tuple[int, int, int, int],
                 interpolation: str) -> np.ndarray | None:
    """Pillow's own resize, then the window; None without Pillow."""
    try:
        from PIL import Image
    except ImportError:
        return None
    top, left, height, width = window
    picture = Image.fromarray(image[:, :, 0] if image.shape[2] == 1 else image)
    method = getattr(Image, FILTERS[interpolation][2])
    resized = np.asarray(picture.resize((size[1], size[0]), method))
    resized = resized[:, :, None] if resized.ndim == 2 else resized
    return resized[top:top + height, left:left + width]


RowsPass = Callable[[np.ndarray, np.ndarray, np.ndarray, int, int], np.ndarray]


@lru_cache(maxsize=1)
def compiled_pass() -> RowsPass | None:
    """Numba's compiled pass (:func:`.resample_kernel.resample_rows`), or None without Numba.

    The first call imports Numba and compiles the pass (or loads it from Numba's cache), so a
    task calls it when it is built, at configure, and no frame pays for it. Numba that is
    installed but fails (no cache folder it may write, an LLVM it cannot load) is warned
    about once and Pillow resizes instead: slower, the same bytes.
    """
    try:
        from .resample_kernel import resample_rows
        resample_rows(np.zeros((2, 1), np.uint8), np.zeros(1, np.int64),
                      np.ones((1, 1), np.int32), 0, _BITS)
    except Exception as exc:  # noqa: BLE001 - any Numba failure: Pillow's resize instead
        if not (isinstance(exc, ModuleNotFoundError) and exc.name == 'numba'):
            warnings.warn(f'vision_nodes: the compiled resize is off, Pillow resizes instead '
                          f'({type(exc).__name__}: {exc})', RuntimeWarning, stacklevel=2)
        return None
    return resample_rows


def _transposed(planes: np.ndarray) -> np.ndarray:
    """(H, W, C) uint8 -> C-contiguous (W, H, C): OpenCV's transpose (SIMD, any strides)."""
    rows, cols, channels = planes.shape
    return cv2.transpose(planes).reshape(cols, rows, channels)


def _pass_down(planes: np.ndarray, taps: _Taps, rows_pass: RowsPass) -> np.ndarray:
    """Resample the rows of (h, w, C) ``planes`` with the compiled ``rows_pass``."""
    if taps.first is None:
        return planes
    rows, cols, channels = planes.shape
    flat = np.ascontiguousarray(planes).reshape(rows, cols * channels)
    out = rows_pass(flat, taps.first, taps.weights, taps.lo, _BITS)
    return out.reshape(-1, cols, channels)


def _pass_across(planes: np.ndarray, taps: _Taps, rows_pass: RowsPass) -> np.ndarray:
    """Resample the columns of (h, w, C) ``planes``: the rows' pass on them transposed."""
    if taps.first is None:
        return planes
    return _transposed(_pass_down(_transposed(planes), taps, rows_pass))


def _compiled_crop(image: np.ndarray, size: tuple[int, int], window: tuple[int, int, int, int],
                   interpolation: str, rows_pass: RowsPass) -> np.ndarray:
    """:func:`_crop` with the compiled passes, each over whole rows."""
    return _crop(image, size, window, interpolation, partial(_pass_down, rows_pass=rows_pass),
                 partial(_pass_across, rows_pass=rows_pass))


def resized_crop(image: np.ndarray, size: tuple[int, int], window: tuple[int, int, int, int],
                 interpolation: str = 'linear') -> np.ndarray:
    """Return ``window`` (top, left, height, width) of ``image`` resized to ``size`` (h, w).

    ``image`` is (H, W, C) uint8 with C 1 or 3; the result (height, width, C) uint8 is what
    ``Image.resize((w, h), BILINEAR or BICUBIC)`` then cropping gives, byte for byte.
    """
    rows_pass = compiled_pass()
    if rows_pass is not None:
        return _compiled_crop(image, size, window, interpolation, rows_pass)
    top, left, height, width = window
    if size[0] * size[1] <= _WHOLE_RESIZE_LIMIT * height * width:
        found = _pillow_crop(image, size, window, interpolation)
        if found is not None:
            return found
    return _numpy_crop(image, size, window, interpolation)
