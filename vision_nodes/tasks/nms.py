"""Exact greedy non-maximum suppression, vectorised, on matrices reused call after call.

NMS is computed as a fixed point over the IoU matrix of the candidates (Cluster-NMS, Zheng et
al. 2021): a box is kept iff no kept, higher-scoring box overlaps it by more than the
threshold. Each iteration is one matrix operation; there is no per-box Python loop.

An IoU matrix of a 512-box chunk is a megabyte per temporary; allocated afresh for every
operation, each such array is new memory the kernel has to map and zero, which costs more
than the arithmetic. :class:`NmsScratch` keeps a few flat arrays that only ever grow and
computes into views of them. One scratch serves one thread at a time (see
:mod:`.decode_buffers`); :func:`nms` without one makes a fresh one.
"""

from __future__ import annotations

import numpy as np

from ..boxes import pairwise_iou

#: Offset that moves each class's boxes apart (class id x it) so that one NMS never lets
#: classes suppress each other: larger than any image side (Ultralytics' ``max_wh``).
CLASS_OFFSET = 7680.0


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
        iou = pairwise_iou(boxes, others, tuple(self._matrix(name, rows, cols, dtype)
                                                for name in ('inter', 'side', 'other')))
        return np.greater(iou, threshold, out=self._matrix('over', rows, cols, np.dtype(bool)))

    def cluster_keep(self, overlap: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """Greedy keep mask of score-sorted boxes, as the fixed point of one matrix rule.

        ``overlap[i, j]`` (square, overwritten): box i overlaps box j beyond the threshold.
        Box j is kept iff it is ``allowed`` and no kept box ranked above it overlaps it.
        """
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


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float,
        max_keep: int | None = None, chunk: int = 512, scratch: NmsScratch | None = None
        ) -> np.ndarray:
    """Exact greedy NMS; returns kept indices ordered by descending score.

    Whether a box survives depends only on boxes ranked above it, so candidates are processed
    in score-ordered chunks: each chunk is first checked against the boxes already kept, then
    resolved among itself. Work stops once ``max_keep`` boxes are kept (the result equals the
    full NMS cut to ``max_keep``). Memory stays O(chunk²), not O(N²), in ``scratch``'s arrays.
    """
    if boxes.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    scratch = scratch or NmsScratch()
    order = np.argsort(-scores, kind='stable')
    ranked = boxes[order]
    limit = order.shape[0] if max_keep is None else max_keep
    kept: list[np.ndarray] = []
    kept_boxes = np.zeros((0, 4), dtype=ranked.dtype)
    count = 0
    for start in range(0, order.shape[0], chunk):
        block = ranked[start:start + chunk]
        allowed = np.ones(block.shape[0], dtype=bool)
        if kept_boxes.shape[0]:
            allowed = ~scratch.overlaps(block, kept_boxes, iou_threshold).any(axis=1)
        keep = scratch.cluster_keep(scratch.overlaps(block, block, iou_threshold), allowed)
        idx = np.flatnonzero(keep)
        kept.append(order[start + idx])
        kept_boxes = np.concatenate([kept_boxes, block[idx]])
        count += idx.shape[0]
        if count >= limit:
            break
    return np.concatenate(kept)[:limit]
