"""Axis-aligned boxes: the one IoU (NMS, accuracy, tests, benchmarks), and matching detections.

:func:`unmatched` is how tests and benchmarks say two runs found the same objects: reduced
precisions and rect inference move scores a little, so detections near the threshold come or
go and equal-score boxes swap order; confident detections are matched by class and IoU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Smallest union an IoU divides by (boxes of no area have IoU 0, not NaN).
TINY = np.finfo(np.float32).tiny


def pairwise_iou(boxes: np.ndarray, others: np.ndarray | None = None,
                 out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """(N, 4) xyxy vs (M, 4) xyxy (default: the same boxes) → (N, M) IoU matrix.

    ``out``: three (N, M) arrays of the boxes' result dtype to compute in (NMS reuses them
    frame after frame); the IoU is written to the first. Coordinates are taken as contiguous
    rows, so that every matrix operation's inner loop runs over contiguous memory.
    """
    others = boxes if others is None else others
    if out is None:
        dtype = np.result_type(boxes.dtype, others.dtype)
        out = tuple(np.empty((boxes.shape[0], others.shape[0]), dtype) for _ in range(3))
    inter, side, other = out
    mine = np.ascontiguousarray(boxes.T)
    theirs = mine if others is boxes else np.ascontiguousarray(others.T)
    np.minimum(mine[2][:, None], theirs[2], out=inter)
    np.maximum(mine[0][:, None], theirs[0], out=side)
    np.subtract(inter, side, out=inter)
    np.maximum(inter, 0, out=inter)
    np.minimum(mine[3][:, None], theirs[3], out=side)
    np.maximum(mine[1][:, None], theirs[1], out=other)
    np.subtract(side, other, out=side)
    np.maximum(side, 0, out=side)
    np.multiply(inter, side, out=inter)
    area_a = (mine[2] - mine[0]) * (mine[3] - mine[1])
    area_b = area_a if others is boxes else (theirs[2] - theirs[0]) * (theirs[3] - theirs[1])
    np.add(area_a[:, None], area_b, out=side)
    np.subtract(side, inter, out=side)
    np.maximum(side, TINY, out=side)
    return np.divide(inter, side, out=inter)


def unmatched(a: Any, b: Any, min_score: float, min_iou: float, label: str = '') -> list[str]:
    """List the detections of ``a`` above ``min_score`` with no same-class match in ``b``.

    ``a`` and ``b`` have ``boxes`` (N, 4) xyxy, ``scores`` and ``class_ids``; a match is a
    box of the same class at IoU ``min_iou`` or more. Each line names the detection and the
    best IoU it found, after ``label``.
    """
    missing = []
    boxes, others = np.asarray(a.boxes, np.float64), np.asarray(b.boxes, np.float64)
    for i, (score, cls) in enumerate(zip(a.scores, a.class_ids)):
        if score < min_score:
            continue
        same = np.asarray(b.class_ids) == cls
        best = float(pairwise_iou(boxes[i:i + 1], others[same]).max()) if same.any() else 0.0
        if best < min_iou:
            missing.append(f'{label}class {int(cls)} score {score:.2f} box '
                           f'{np.round(boxes[i], 1).tolist()} (best IoU {best:.2f})')
    return missing
