"""The detection task: YOLO-style raw output → boxes, scores and class ids in source pixels.

Decoding is vectorised NumPy. Non-maximum suppression is *exact* greedy NMS computed as a
fixed point over the IoU matrix of the candidates (Cluster-NMS, Zheng et al. 2021): a box is
kept iff no kept, higher-scoring box of the same class overlaps it by more than ``iou``.
Each iteration is one matrix operation; there is no per-box Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..manifest import ModelManifest
from .preprocess import LetterboxMeta, prepare

#: Offset that separates classes for batched NMS (larger than any image side).
_CLASS_OFFSET = 7680.0
#: At most this many candidates (highest scores first) enter NMS.
MAX_NMS_CANDIDATES = 3000


@dataclass
class Detections:
    """Decoded detections for one image, in source-image pixels."""

    boxes: np.ndarray      # (N, 4) float32 xyxy
    scores: np.ndarray     # (N,) float32
    class_ids: np.ndarray  # (N,) int64

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    @classmethod
    def empty(cls) -> 'Detections':
        """No detections."""
        return cls(np.zeros((0, 4), np.float32), np.zeros(0, np.float32),
                   np.zeros(0, np.int64))


@dataclass(frozen=True)
class DetectionParams:
    """Post-processing thresholds (runtime-tunable)."""

    confidence: float = 0.25
    iou: float = 0.45
    max_detections: int = 300


def xywh_to_xyxy(xywh: np.ndarray) -> np.ndarray:
    """(N, 4) centre/size boxes → corner boxes."""
    out = np.empty_like(xywh)
    half = xywh[:, 2:4] / 2
    out[:, 0:2] = xywh[:, 0:2] - half
    out[:, 2:4] = xywh[:, 0:2] + half
    return out


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


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float,
        max_keep: int | None = None, chunk: int = 512) -> np.ndarray:
    """Exact greedy NMS; returns kept indices ordered by descending score.

    Whether a box survives depends only on boxes ranked above it, so candidates are processed
    in score-ordered chunks: each chunk is first checked against the boxes already kept, then
    resolved among itself. Work stops once ``max_keep`` boxes are kept (the result equals the
    full NMS cut to ``max_keep``). Memory stays O(chunk²), not O(N²).
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
            allowed = ~(pairwise_iou(block, kept_boxes) > iou_threshold).any(axis=1)
        keep = _cluster_keep(pairwise_iou(block) > iou_threshold, allowed)
        idx = np.flatnonzero(keep)
        kept.append(order[start + idx])
        kept_boxes = np.concatenate([kept_boxes, block[idx]])
        count += idx.shape[0]
        if count >= limit:
            break
    return np.concatenate(kept)[:limit]


def decode(output: np.ndarray, params: DetectionParams, num_classes: int | None = None
           ) -> Detections:
    """Decode one YOLOv8-style output ``(1, 4 + nc, A)`` into boxes in network pixels."""
    pred = output[0] if output.ndim == 3 else output
    if pred.shape[0] < 5:
        raise ValueError(f'detection output of shape {output.shape} has no class scores')
    nc = pred.shape[0] - 4 if num_classes is None else num_classes
    class_scores = pred[4:4 + nc]
    # max over classes is a fast row-wise reduction; argmax only for the few candidates.
    scores = class_scores.max(axis=0)
    mask = scores > params.confidence
    if not mask.any():
        return Detections.empty()
    class_ids = class_scores[:, mask].argmax(axis=0).astype(np.int64)
    boxes = xywh_to_xyxy(np.ascontiguousarray(pred[:4, mask].T, dtype=np.float32))
    scores = scores[mask].astype(np.float32)
    if scores.shape[0] > MAX_NMS_CANDIDATES:
        top = np.argpartition(-scores, MAX_NMS_CANDIDATES)[:MAX_NMS_CANDIDATES]
        boxes, scores, class_ids = boxes[top], scores[top], class_ids[top]
    offset = class_ids[:, None].astype(np.float32) * _CLASS_OFFSET
    keep = nms(boxes + offset, scores, params.iou, params.max_detections)
    return Detections(boxes[keep], scores[keep], class_ids[keep])


class DetectionTask:
    """Pre- and post-processing for 2-D object detection, shared by every runner."""

    name = 'detect'

    def __init__(self, manifest: ModelManifest) -> None:
        self.manifest = manifest

    def preprocess(self, image: np.ndarray, encoding: str
                   ) -> tuple[np.ndarray, LetterboxMeta]:
        """Turn a decoded image array into (NCHW float32 tensor, metadata for postprocess)."""
        return prepare(image, encoding, self.manifest.input_size, self.manifest.preprocessing)

    def postprocess(self, outputs: list[np.ndarray], meta: LetterboxMeta,
                    params: DetectionParams) -> Detections:
        """Decode raw network outputs into detections in source-image pixels."""
        dets = decode(outputs[0], params)
        meta.to_source(dets.boxes)
        return dets
