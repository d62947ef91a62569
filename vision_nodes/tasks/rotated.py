"""Rotated boxes (centre, size, angle): corners, hulls, probabilistic IoU and Ultralytics' NMS.

A rotated box is ``(cx, cy, w, h, r)``, ``r`` in radians: the side of length ``w`` points
along ``(cos r, sin r)`` in image coordinates (x right, y down), as Ultralytics' ``xywhr``.
Its corners (:func:`corners`) are Ultralytics' ``xywhr2xyxyxyxy``; OpenCV's
``cv2.boxPoints(((cx, cy), (w, h), degrees(r)))`` gives the same four points in reverse order.

Suppression follows Ultralytics' rotated NMS (``ultralytics/utils/nms.py``, ``rotated=True``):
boxes shifted apart by class, their overlap the probabilistic IoU of Gaussian boxes
(``metrics.batch_probiou``, Llerena et al. 2021), and Fast-NMS over it: a box is dropped when
any higher-scoring box of its class, kept or not, overlaps it above the threshold. That is
not greedy NMS (which only asks kept boxes), so a chain of overlapping boxes can lose more
than one member; the float32 arithmetic is Ultralytics' too, step for step.
"""

from __future__ import annotations

import numpy as np

from .nms import CLASS_OFFSET
#: Ultralytics' ``eps`` in ``batch_probiou``.
_EPS = 1e-7
#: Rows of the overlap matrix computed at a time (memory: this many x candidates).
_CHUNK = 256


def corners(xywhr: np.ndarray) -> np.ndarray:
    """(N, 5) rotated boxes -> (N, 4, 2) corners, in Ultralytics' ``xyxyxyxy`` order."""
    boxes = np.asarray(xywhr, np.float64).reshape(-1, 5)
    centre = boxes[:, None, 0:2]
    cos, sin = np.cos(boxes[:, 4]), np.sin(boxes[:, 4])
    along = np.stack([boxes[:, 2] / 2 * cos, boxes[:, 2] / 2 * sin], -1)[:, None]
    across = np.stack([-boxes[:, 3] / 2 * sin, boxes[:, 3] / 2 * cos], -1)[:, None]
    signs = np.array([[1, 1], [1, -1], [-1, -1], [-1, 1]], np.float64)[None, :, :, None]
    return centre + signs[:, :, 0] * along + signs[:, :, 1] * across


def hull(xywhr: np.ndarray, shape: tuple[int, int] | None = None) -> np.ndarray:
    """(N, 5) rotated boxes -> (N, 4) float32 xyxy: the axis-aligned box around each.

    Clipped to an image of ``shape`` (height, width) when given, as detection boxes are.
    """
    points = corners(xywhr)
    out = np.concatenate([points.min(axis=1), points.max(axis=1)], axis=1).astype(np.float32)
    if shape is not None:
        np.clip(out[:, 0::2], 0, shape[1], out=out[:, 0::2])
        np.clip(out[:, 1::2], 0, shape[0], out=out[:, 1::2])
    return out


def _covariance(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (a, b, c) of each box's Gaussian [[a, c], [c, b]], as Ultralytics computes them.

    Ultralytics' ``_get_covariance_matrix``: a uniform w x h box's variances, rotated.
    """
    a, b = boxes[:, 2] ** 2 / np.float32(12), boxes[:, 3] ** 2 / np.float32(12)
    cos, sin = np.cos(boxes[:, 4]), np.sin(boxes[:, 4])
    cos2, sin2 = cos ** 2, sin ** 2
    return a * cos2 + b * sin2, a * sin2 + b * cos2, (a - b) * cos * sin


def probiou(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """(N, 5) and (M, 5) rotated boxes -> (N, M) probabilistic IoU, float32.

    Ultralytics' ``batch_probiou`` in the same float32 operations: 1 minus the Hellinger
    distance of the boxes' Gaussians (uniform over each box), not the area overlap; 1 for
    identical boxes, about 0 for boxes far apart.
    """
    first = np.asarray(first, np.float32).reshape(-1, 5)
    second = np.asarray(second, np.float32).reshape(-1, 5)
    x1, y1 = first[:, 0:1], first[:, 1:2]
    x2, y2 = second[None, :, 0], second[None, :, 1]
    a1, b1, c1 = (v[:, None] for v in _covariance(first))
    a2, b2, c2 = (v[None, :] for v in _covariance(second))
    sum_a, sum_b, sum_c = a1 + a2, b1 + b2, c1 + c2
    spread = sum_a * sum_b - sum_c ** 2
    t1 = ((sum_a * (y1 - y2) ** 2 + sum_b * (x1 - x2) ** 2) / (spread + _EPS)) * np.float32(0.25)
    t2 = ((sum_c * (x2 - x1) * (y1 - y2)) / (spread + _EPS)) * np.float32(0.5)
    own = np.sqrt(np.clip(a1 * b1 - c1 ** 2, 0, None) * np.clip(a2 * b2 - c2 ** 2, 0, None))
    t3 = np.log(spread / (np.float32(4) * own + _EPS) + _EPS) * np.float32(0.5)
    distance = np.clip(t1 + t2 + t3, _EPS, np.float32(100.0))
    return np.float32(1) - np.sqrt(np.float32(1) - np.exp(-distance) + _EPS)


def _fast_keep(ranked: np.ndarray, threshold: float) -> np.ndarray:
    """Keep mask of score-ordered boxes: none above it overlaps a kept one beyond ``threshold``.

    Fast-NMS: box j is dropped when any box i < j overlaps it, whether i is kept or not.
    """
    count = ranked.shape[0]
    dropped = np.zeros(count, bool)
    columns = np.arange(count)
    for start in range(0, count, _CHUNK):
        rows = np.arange(start, min(count, start + _CHUNK))
        above = probiou(ranked[rows], ranked) > threshold
        above &= columns[None, :] > rows[:, None]
        dropped |= above.any(axis=0)
    return ~dropped


def rotated_nms(xywhr: np.ndarray, scores: np.ndarray, class_ids: np.ndarray,
                iou_threshold: float, max_keep: int | None = None) -> np.ndarray:
    """Ultralytics' rotated NMS: kept indices, by descending score, at most ``max_keep``.

    Classes never suppress each other: each class's boxes are shifted by class x 7680 px, as
    Ultralytics shifts them (so its float32 rounding is reproduced), and only boxes of one
    class are compared (boxes 7680 px apart have a probabilistic IoU of about -5e-8).
    """
    boxes = np.asarray(xywhr, np.float32).reshape(-1, 5)
    if boxes.shape[0] == 0:
        return np.zeros(0, np.int64)
    order = np.argsort(-np.asarray(scores), kind='stable')
    shifted = boxes.copy()
    shifted[:, 0:2] += (np.asarray(class_ids).astype(np.float32)
                        * np.float32(CLASS_OFFSET))[:, None]
    kept = np.zeros(boxes.shape[0], bool)
    ranked_classes = np.asarray(class_ids)[order]
    for cls in np.unique(ranked_classes):
        members = order[ranked_classes == cls]  # still by descending score
        kept[members[_fast_keep(shifted[members], iou_threshold)]] = True
    result = order[kept[order]]
    return result if max_keep is None else result[:max_keep]


def rotated_iou(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """(N, 5) and (M, 5) rotated boxes -> (N, M) float64 IoU of their areas.

    The intersection polygon is OpenCV's (``cv2.rotatedRectangleIntersection``); a box of no
    area overlaps nothing.
    """
    import cv2

    first = np.asarray(first, np.float64).reshape(-1, 5)
    second = np.asarray(second, np.float64).reshape(-1, 5)
    out = np.zeros((first.shape[0], second.shape[0]))
    areas_a, areas_b = first[:, 2] * first[:, 3], second[:, 2] * second[:, 3]
    rects_a, rects_b = (
        [((float(x), float(y)), (float(w), float(h)), float(np.degrees(r)))
         for x, y, w, h, r in boxes.tolist()] for boxes in (first, second))
    for i, rect_a in enumerate(rects_a):
        for j, rect_b in enumerate(rects_b):
            if areas_a[i] <= 0 or areas_b[j] <= 0:
                continue
            found, points = cv2.rotatedRectangleIntersection(rect_a, rect_b)
            if found == cv2.INTERSECT_NONE or points is None or len(points) < 3:
                continue
            inter = float(cv2.contourArea(cv2.convexHull(points.astype(np.float32))))
            out[i, j] = inter / max(areas_a[i] + areas_b[j] - inter, 1e-12)
    return out
