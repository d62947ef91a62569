"""Pillow's 8-bit resample pass, compiled with Numba: :mod:`.resample`'s fast path.

One pass resamples the rows of a (rows, n) uint8 array: output row ``i`` is
``clip8((2**(bits - 1) + sum_k src[first[i] + k] * weights[i, k]) >> bits)``, Pillow's
fixed-point sum and rounding (``libImaging/Resample.c``; :mod:`.resample` holds its ``bits``
and weights), each element on its own. Along the rows every term
is a whole contiguous row, so the compiled loop runs in SIMD lanes, where Pillow's C loop
walks one output pixel at a time; a pass along the columns is this pass on the transposed
image (:mod:`.resample` transposes with OpenCV). The integer arithmetic is Pillow's, so the
bytes are Pillow's (the tests hold them to Pillow's own resize).

Importing this module imports Numba; the pass compiles on its first call (about a second)
and is kept in Numba's on-disk cache (``NUMBA_CACHE_DIR`` to move it), so a later process
loads it. The compiled loop releases the GIL.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def resample_rows(src: np.ndarray, first: np.ndarray, weights: np.ndarray, offset: int,
                  bits: int) -> np.ndarray:  # pragma: no cover - compiled; tested by value
    """Resample the rows of C-contiguous (rows, n) uint8 ``src`` to ``len(first)`` rows.

    ``first[i]`` is output ``i``'s first input row counted in the whole axis, whose row
    ``offset`` is ``src``'s row 0; ``weights`` (outputs, taps) int32 are fixed-point weights
    with ``bits`` fraction bits, zero past each output's span (those taps are not read).
    """
    outputs, taps = weights.shape
    rows, width = src.shape
    out = np.empty((outputs, width), np.uint8)
    total = np.empty(width, np.int32)
    half = np.int32(1 << (bits - 1))
    for i in range(outputs):
        total[:] = half
        start = first[i] - offset
        for k in range(min(taps, rows - start)):
            weight = weights[i, k]
            if weight == 0:
                continue
            row = src[start + k]
            for j in range(width):
                total[j] += np.int32(row[j]) * weight
        for j in range(width):
            value = total[j] >> bits
            out[i, j] = 0 if value < 0 else (255 if value > 255 else value)
    return out
