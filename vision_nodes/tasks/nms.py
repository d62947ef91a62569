"""Exact greedy non-maximum suppression, vectorised.

NMS is computed as a fixed point over the IoU matrix of the candidates (Cluster-NMS, Zheng et
al. 2021): a box is kept iff no kept, higher-scoring box overlaps it by more than the
threshold. Each iteration is one matrix operation; there is no per-box Python loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .nms_scratch import NmsScratch


def pairwise_iou(boxes: np.ndarray, others: np.ndarray | None = None) -> np.ndarray:
    """(N, 4) xyxy vs (M, 4) xyxy (default: the same boxes) → (N, M) IoU matrix."""
    others = boxes if others is None else others
    area_a = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    area_b = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    iw = (np.minimum(boxes[:, None, 2], others[None, :, 2])
          - np.maximum(boxes[:, None, 0], others[None, :, 0]))
    ih = (np.minimum(boxes[:, None, 3], others[None, :, 3])
          - np.maximum(boxes[:, None, 1], others[None, :, 1]))
    inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    return inter / np.maximum(union, np.finfo(np.float32).tiny)


def _cluster_keep(overlap: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Greedy keep mask of score-sorted boxes, as the fixed point of one matrix rule.

    ``overlap[i, j]``: box i overlaps box j beyond the threshold. Box j is kept iff it is
    ``allowed`` and no kept box ranked above it overlaps it.
    """
    suppresses = np.triu(overlap, k=1)
    keep = allowed.copy()
    for _ in range(keep.shape[0]):
        new_keep = allowed & ~(suppresses & keep[:, None]).any(axis=0)
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
    return keep


def _overlaps(boxes: np.ndarray, others: np.ndarray, iou_threshold: float,
              scratch: NmsScratch | None) -> np.ndarray:
    """(N, M) bool: IoU above the threshold, in ``scratch``'s arrays when given."""
    if scratch is None:
        return pairwise_iou(boxes, others) > iou_threshold
    return scratch.overlaps(boxes, others, iou_threshold)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float,
        max_keep: int | None = None, chunk: int = 512, scratch: NmsScratch | None = None
        ) -> np.ndarray:
    """Exact greedy NMS; returns kept indices ordered by descending score.

    Whether a box survives depends only on boxes ranked above it, so candidates are processed
    in score-ordered chunks: each chunk is first checked against the boxes already kept, then
    resolved among itself. Work stops once ``max_keep`` boxes are kept (the result equals the
    full NMS cut to ``max_keep``). Memory stays O(chunk²), not O(N²). With ``scratch`` the
    matrices are computed into its reused arrays (:mod:`.nms_scratch`), with the same result.
    """
    if boxes.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
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
            allowed = ~_overlaps(block, kept_boxes, iou_threshold, scratch).any(axis=1)
        keep = _cluster_keep(pairwise_iou(block) > iou_threshold, allowed) if scratch is None \
            else scratch.cluster_keep(scratch.overlaps(block, block, iou_threshold), allowed)
        idx = np.flatnonzero(keep)
        kept.append(order[start + idx])
        kept_boxes = np.concatenate([kept_boxes, block[idx]])
        count += idx.shape[0]
        if count >= limit:
            break
    return np.concatenate(kept)[:limit]
