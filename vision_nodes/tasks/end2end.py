"""The NMS-free output layout of end-to-end heads (YOLO26, YOLOv10): rows, not anchors.

Such a head ends in its own top-k, so its first output is ``(1, rows, 6 + extra)``: each row
one detection, x1, y1, x2, y2 in network pixels, its score, its class index, then the task's
extra values (segment: the mask coefficients; pose: the keypoints), rows in descending score.
Decoding keeps the rows above the confidence threshold, at most ``max_detections`` of them,
in that order, as Ultralytics' predict does for such models: there is no NMS to run. The
YOLOv8-style layout ``(1, 4 + classes + extra, anchors)`` is :func:`.detect.decode_anchors`'s.

The two are told apart by shape: a row holds ``6 + extra`` values, while the anchors of a
YOLOv8-style output number 21 per 32 x 32 pixels of input (strides 8, 16, 32), never 6 + the
extra values of a task (6, 6 + 32 mask coefficients, 6 + 17 x 3 keypoints). A YOLOv8-style
output of a 32 x 32 input (1, 84, 21) has the shape of rows too: where the class count is
known, it decides (:func:`row_extra`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: Values of a row before the extra ones: x1, y1, x2, y2, score, class index.
ROW_VALUES = 6


def is_end2end(shape: Sequence[int], extra: int) -> bool:
    """Whether an output of ``shape`` is the NMS-free layout with ``extra`` values per row."""
    return (len(shape) == 3 and shape[0] == 1 and shape[1] >= 1
            and shape[2] == ROW_VALUES + extra)


def row_extra(shape: Sequence[int], anchor_rows: int | None = None) -> int | None:
    """Return the extra values per row of an NMS-free ``shape``, else None.

    The shape must be (1, rows, 6 + extra) with more rows than values (a top-k of up to 300
    rows; anchors outnumber values but at 32 x 32), and not ``anchor_rows`` rows: the rows a
    YOLOv8-style output of the model has (4 + classes + its task's rows) where the class count
    is known. Tasks use it before the extra count is known, and to refuse rows of no layout.
    """
    if len(shape) != 3 or shape[0] != 1 or shape[2] < ROW_VALUES or shape[1] <= shape[2] \
            or shape[1] == anchor_rows:
        return None
    return int(shape[2]) - ROW_VALUES


def decode_rows(output: np.ndarray, confidence: float, max_detections: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (boxes (N, 4) float32 xyxy in network pixels, scores, class ids, rows kept).

    ``output`` is ``(1, rows, 6 + extra)`` or ``(rows, 6 + extra)``; the extra values of
    detection ``i`` are ``output[..., rows_kept[i], 6:]``.
    """
    pred = output[0] if output.ndim == 3 else output
    rows = np.flatnonzero(pred[:, 4] > confidence)[:max_detections]
    kept = pred[rows]
    return (np.ascontiguousarray(kept[:, :4], dtype=np.float32),
            kept[:, 4].astype(np.float32), kept[:, 5].astype(np.int64), rows)
