"""Test helper: whether two sets of detections agree (same classes, overlapping boxes).

Reduced precisions (bf16, int8) and rect inference change scores a little, so detections
near the confidence threshold may come or go and equal-score boxes may swap order; the
comparison is therefore on the confident detections, matched by class and IoU.
"""

from __future__ import annotations

import numpy as np


def iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Return the IoU of one xyxy box with each row of ``boxes``."""
    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[2], boxes[:, 2])
    y2 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / (area + areas - inter)


def unmatched(a, b, min_score: float, min_iou: float) -> list[str]:
    """List the detections of ``a`` above ``min_score`` with no same-class match in ``b``."""
    missing = []
    for box, score, cls in zip(a.boxes, a.scores, a.class_ids):
        if score < min_score:
            continue
        same = b.class_ids == cls
        best = float(iou(box, b.boxes[same]).max()) if same.any() else 0.0
        if best < min_iou:
            missing.append(f'class {int(cls)} score {score:.2f} box {np.round(box, 1)} '
                           f'(best IoU {best:.2f})')
    return missing


def assert_same_detections(a, b, min_score: float = 0.5, min_iou: float = 0.9,
                           at_least: int = 1) -> None:
    """Every confident detection of each set has a same-class match (IoU) in the other."""
    confident = int((a.scores >= min_score).sum())
    assert confident >= at_least, f'only {confident} detections above {min_score}'
    problems = unmatched(a, b, min_score, min_iou) + unmatched(b, a, min_score, min_iou)
    assert not problems, '; '.join(problems)
