"""Drawing results on an image for people: boxes, labels, masks, skeletons, classes.

Boxes may be rotated (oriented boxes), labels carry scores and track ids, and a
classification's top classes are written one per line.

ROS-free (OpenCV): the node's ``annotated`` output and the demo draw with the same function,
so what a user sees on the topic and in the demo's pictures is the same. Each class (or, when
tracked, each track) keeps one colour.
"""

from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

#: Opacity of an instance mask's colour over the image.
MASK_ALPHA = 0.45
#: Keypoints below this confidence are not drawn (nor the skeleton lines they end).
KEYPOINT_MIN_SCORE = 0.5
_FONT = cv2.FONT_HERSHEY_SIMPLEX
#: Pixels the mask tint takes at a time (its int32 indices: 12 bytes a pixel, 3 MB a band).
_TINT_BAND = 1 << 18
_CHANNELS = np.arange(3, dtype=np.int32)


def colour(key: int) -> tuple[int, int, int]:
    """Return a bright BGR colour fixed for ``key`` (a class index or a track id)."""
    rng = np.random.default_rng(int(key) & 0xFFFFFFFF)
    return tuple(int(c) for c in rng.integers(64, 256, 3))


def _label(out: np.ndarray, text: str, x: int, y: int, col: tuple[int, int, int]) -> None:
    (tw, th), _ = cv2.getTextSize(text, _FONT, 0.5, 1)
    top = max(0, y - th - 6)
    cv2.rectangle(out, (x, top), (x + tw + 4, top + th + 6), col, -1)
    cv2.putText(out, text, (x + 2, top + th + 2), _FONT, 0.5, (0, 0, 0), 1, cv2.LINE_AA)


def _tint_table(keys: Sequence[int]) -> np.ndarray:
    """(K + 1, 256, 3) uint8: a channel's value v under label k's tint, label 0 untouched.

    ``v * (1 - MASK_ALPHA) + colour * MASK_ALPHA``, truncated: each of the 256 values once
    per key, in float64 (the colour float32), rather than every masked pixel in float.
    """
    palette = np.zeros((len(keys) + 1, 3), np.float32)
    palette[1:] = [colour(k) for k in keys]
    values = np.arange(256, dtype=np.float64)[None, :, None]
    table = (values * (1 - MASK_ALPHA) + palette[:, None, :] * MASK_ALPHA).astype(np.uint8)
    table[0] = np.arange(256, dtype=np.uint8)[:, None]
    return table


def _masks(out: np.ndarray, labels: np.ndarray, keys: Sequence[int]) -> None:
    """Tint each instance's pixels (label image: 1 + detection index, 0 background).

    In uint8 through a lookup table (label, value) -> tinted value, a band of rows at a time:
    what the frame adds is the band's indices, never a float or int64 copy of the image.
    """
    if labels.shape[:2] != out.shape[:2] or not len(keys):
        return
    flat = _tint_table(keys).reshape(-1)
    rows = max(1, _TINT_BAND // max(1, out.shape[1]))
    for top in range(0, out.shape[0], rows):
        band = np.clip(labels[top:top + rows], 0, len(keys)).astype(np.int32)
        if not band.any():
            continue
        # Index of (label, value, channel) in the flat table.
        index = out[top:top + rows].astype(np.int32)
        index *= 3
        index += _CHANNELS
        band *= 256 * 3
        index += band[:, :, None]
        np.take(flat, index, out=out[top:top + rows], mode='clip')


def _skeletons(out: np.ndarray, keypoints: np.ndarray, skeleton: Sequence[tuple[int, int]],
               keys: Sequence[int]) -> None:
    """Keypoints (N, K, 3: x, y, score) as dots and their skeleton lines."""
    for points, key in zip(keypoints, keys):
        col = colour(key)
        seen = points[:, 2] >= KEYPOINT_MIN_SCORE
        for a, b in skeleton:
            if a < len(points) and b < len(points) and seen[a] and seen[b]:
                cv2.line(out, (int(points[a, 0]), int(points[a, 1])),
                         (int(points[b, 0]), int(points[b, 1])), col, 2, cv2.LINE_AA)
        for x, y, _ in points[seen]:
            cv2.circle(out, (int(x), int(y)), 3, col, -1, cv2.LINE_AA)


def draw(image_bgr: np.ndarray, boxes_xyxy: np.ndarray, scores: np.ndarray,
         class_ids: np.ndarray, names: Sequence[str] = (), track_ids: Sequence[int] | None = None,
         mask_labels: np.ndarray | None = None, keypoints: np.ndarray | None = None,
         skeleton: Sequence[tuple[int, int]] = (), polygons: np.ndarray | None = None
         ) -> np.ndarray:
    """Return a copy of ``image_bgr`` (H, W, 3 uint8) with the results drawn on it.

    Labels read ``#<track id> <class name> <score>`` (no ``#`` part when untracked);
    ``names`` maps class indices to names (an index is shown where there is none). With
    ``polygons`` ((N, 4, 2) corners: rotated boxes) each box is drawn as its polygon, its
    label at its topmost corner.
    """
    out = np.array(image_bgr[:, :, :3], dtype=np.uint8, order='C')  # one copy
    classes = [int(c) for c in np.asarray(class_ids).reshape(-1)]
    keys = classes if track_ids is None else [int(t) for t in track_ids]
    if mask_labels is not None:
        _masks(out, mask_labels, keys)
    if keypoints is not None and len(keypoints):
        _skeletons(out, np.asarray(keypoints, np.float32), skeleton, keys)
    for i, (box, score, cls) in enumerate(zip(np.asarray(boxes_xyxy).reshape(-1, 4),
                                              np.asarray(scores).reshape(-1), classes)):
        x1, y1, x2, y2 = (int(round(float(v))) for v in box)
        col = colour(keys[i])
        if polygons is None:
            cv2.rectangle(out, (x1, y1), (x2, y2), col, 2)
        else:
            corners = np.round(np.asarray(polygons[i], np.float64)).astype(np.int32)
            cv2.polylines(out, [corners], True, col, 2, cv2.LINE_AA)
            x1, y1 = (int(v) for v in corners[int(corners[:, 1].argmin())])
        name = names[cls] if 0 <= cls < len(names) else str(cls)
        tag = '' if track_ids is None else f'#{keys[i]} '
        _label(out, f'{tag}{name} {float(score):.2f}', x1, y1, col)
    return out


def draw_classes(image_bgr: np.ndarray, class_ids: Sequence[int], scores: Sequence[float],
                 names: Sequence[str] = ()) -> np.ndarray:
    """Return a copy of ``image_bgr`` with one line per class (``<name> <score>``), top left.

    For classification results, highest first as given (as Ultralytics' plots list them).
    """
    out = np.array(image_bgr[:, :, :3], dtype=np.uint8, order='C')
    (_, height), _ = cv2.getTextSize('Ag', _FONT, 0.5, 1)
    for row, (cls, score) in enumerate(zip(class_ids, scores)):
        cls = int(cls)
        name = names[cls] if 0 <= cls < len(names) else str(cls)
        _label(out, f'{name} {float(score):.2f}', 4, 8 + (row + 1) * (height + 8), colour(cls))
    return out
