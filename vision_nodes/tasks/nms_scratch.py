"""Reused matrices for :func:`.nms.nms`: its IoU and overlap matrices without a fresh array each.

An IoU matrix of a 512-box chunk is a megabyte per temporary; allocated afresh for every
operation, each such array is new memory the kernel has to map and zero, which costs more
than the arithmetic. :class:`NmsScratch` keeps a few flat arrays that only ever grow and
computes the same operations, in the same order and dtype, into views of them, so the
overlap matrices are bit for bit those of :func:`.nms.pairwise_iou`. One scratch serves one
thread at a time (see :mod:`.decode_buffers`).
"""

from __future__ import annotations

import numpy as np

#: Smallest union an IoU divides by (as :func:`.nms.pairwise_iou` bounds it).
_TINY = np.finfo(np.float32).tiny


class NmsScratch:
    """Flat arrays reused as the (rows, cols) matrices of NMS; they grow, never shrink."""

    def __init__(self) -> None:
        self._flat: dict[str, np.ndarray] = {}
        self._upper = np.zeros((0, 0), dtype=bool)
        #: Arrays allocated so far (grown or of a new dtype): tests read it.
        self.allocations = 0

    def _matrix(self, name: str, rows: int, cols: int, dtype: np.dtype) -> np.ndarray:
        """Return a contiguous (rows, cols) view of the scratch array ``name`` (grown if short)."""
        size = rows * cols
        flat = self._flat.get(name)
        if flat is None or flat.size < size or flat.dtype != dtype:
            flat = self._flat[name] = np.empty(max(size, 1), dtype=dtype)
            self.allocations += 1
        return flat[:size].reshape(rows, cols)

    def overlaps(self, boxes: np.ndarray, others: np.ndarray, threshold: float) -> np.ndarray:
        """(N, M) bool: IoU of xyxy ``boxes`` (N, 4) and ``others`` (M, 4) above ``threshold``.

        The returned matrix is scratch: valid until this scratch's next call.
        """
        rows, cols = boxes.shape[0], others.shape[0]
        dtype = np.result_type(boxes.dtype, others.dtype)
        inter, side, other = (self._matrix(name, rows, cols, dtype)
                              for name in ('inter', 'side', 'other'))
        # Coordinates as contiguous rows, so that every matrix operation's inner loop runs
        # over contiguous memory (the operations and their order are pairwise_iou's).
        mine = np.ascontiguousarray(boxes.T)
        theirs = mine if others is boxes else np.ascontiguousarray(others.T)
        np.minimum(mine[2][:, None], theirs[2], out=inter)
        np.maximum(mine[0][:, None], theirs[0], out=side)
        np.subtract(inter, side, out=inter)
        np.maximum(inter, 0, out=inter)  # what np.clip(inter, 0, None) calls
        np.minimum(mine[3][:, None], theirs[3], out=side)
        np.maximum(mine[1][:, None], theirs[1], out=other)
        np.subtract(side, other, out=side)
        np.maximum(side, 0, out=side)
        np.multiply(inter, side, out=inter)
        area_a = (mine[2] - mine[0]) * (mine[3] - mine[1])
        area_b = area_a if others is boxes else (theirs[2] - theirs[0]) * (theirs[3] - theirs[1])
        np.add(area_a[:, None], area_b, out=side)
        np.subtract(side, inter, out=side)
        np.maximum(side, _TINY, out=side)
        np.divide(inter, side, out=inter)
        return np.greater(inter, threshold, out=self._matrix('over', rows, cols, np.dtype(bool)))

    def cluster_keep(self, overlap: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """:func:`.nms._cluster_keep` on a square ``overlap`` this scratch may overwrite."""
        count = overlap.shape[0]
        if self._upper.shape[0] < count:
            self._upper = np.triu(np.ones((count, count), dtype=bool), k=1)
        suppresses = np.logical_and(overlap, self._upper[:count, :count], out=overlap)
        hit = self._matrix('hit', count, count, np.dtype(bool))
        keep = allowed.copy()
        for _ in range(count):
            np.logical_and(suppresses, keep[:, None], out=hit)
            new_keep = allowed & ~hit.any(axis=0)
            if np.array_equal(new_keep, keep):
                break
            keep = new_keep
        return keep
