"""The steps of the YOLOv8-style decode on the host, in arrays reused frame after frame.

:func:`.detect.decode_yolo` says what the decode is; :class:`DecodeBuffers` does each step on
the host (a device does them in ``runners/torch_device.py``) into arrays kept for one output
shape (rect inference changes the anchor count, and then they are allocated again): the
class maximum of every anchor, the candidate mask, the candidates' boxes, their
class-shifted copy for NMS and NMS's matrices. What the decode returns is always fresh.

A buffer serves one decode at a time, while a batch's frames are decoded side by side on the
frame pool's threads (``parallel.map_frames``): a task holds a :class:`PerThreadBuffers`,
whose :meth:`~PerThreadBuffers.get` gives each thread its own.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .nms import NmsScratch, nms


class DecodeBuffers:
    """Arrays for one output shape (rows, anchors) and dtype, and NMS's scratch."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self.nms_scratch = NmsScratch()
        #: Times the per-shape arrays were allocated (tests read it).
        self.allocations = 0

    def _fit(self, pred: np.ndarray, classes: int) -> None:
        """Allocate the arrays when the output's shape, dtype or class count changed."""
        key = (pred.shape, pred.dtype, classes)
        if key == self._key:
            return
        anchors = pred.shape[1]
        self._scores = np.empty(anchors, dtype=pred.dtype)
        self._mask = np.empty(anchors, dtype=bool)
        self._class_ids = np.empty(anchors, dtype=np.intp)
        self._class_scores = np.empty(0, dtype=pred.dtype)  # grown to the candidates'
        self._xywh = np.empty((4, anchors), dtype=np.float32)
        self._boxes = np.empty((anchors, 4), dtype=np.float32)
        self._shifted = np.empty((anchors, 4), dtype=np.float32)
        self._offsets = np.empty(anchors, dtype=np.float32)
        self._key = key
        self.allocations += 1

    @staticmethod
    def frames(output: np.ndarray) -> list[np.ndarray]:
        """Return the frame a host output holds, ``(1, rows, anchors)`` or ``(rows, anchors)``."""
        return [output[0] if output.ndim == 3 else output]

    def candidates(self, preds: list[np.ndarray], classes: int, confidence: float
                   ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Return the host frame's (anchors, float32 scores, class ids) whose class beats it."""
        (pred,) = preds
        self._fit(pred, classes)
        class_scores = pred[4:4 + classes]
        np.max(class_scores, axis=0, out=self._scores)
        np.greater(self._scores, confidence, out=self._mask)
        anchors = np.flatnonzero(self._mask)
        count = anchors.shape[0]
        if self._class_scores.size < classes * count:
            self._class_scores = np.empty(classes * count, dtype=pred.dtype)
        candidates = self._class_scores[:classes * count].reshape(classes, count)
        # The anchors are valid indices: mode 'clip' only spares the copy 'raise' makes of out.
        np.take(class_scores, anchors, axis=1, out=candidates, mode='clip')
        class_ids = np.argmax(candidates, axis=0, out=self._class_ids[:count])
        return [(anchors, self._scores[anchors].astype(np.float32, copy=False), class_ids)]

    def corners(self, pred: np.ndarray, anchors: np.ndarray) -> np.ndarray:
        """Return the candidates' boxes, centre and size, as float32 x1, y1, x2, y2: (count, 4)."""
        count = anchors.shape[0]
        xywh = self._xywh[:, :count]
        if pred.dtype == np.float32:
            np.take(pred[:4], anchors, axis=1, out=xywh, mode='clip')
        else:
            xywh[...] = pred[:4].take(anchors, axis=1)
        boxes = self._boxes[:count]
        half = self._offsets[:count]
        for axis in (0, 1):  # x, then y: corner = centre -/+ size / 2
            np.divide(xywh[2 + axis], 2, out=half)
            np.subtract(xywh[axis], half, out=boxes[:, axis])
            np.add(xywh[axis], half, out=boxes[:, 2 + axis])
        return boxes

    @staticmethod
    def top(scores: np.ndarray, count: int) -> np.ndarray:
        """Return the indices of the ``count`` highest scores (in no order)."""
        return np.argpartition(-scores, count)[:count]

    def shifted(self, boxes: np.ndarray, class_ids: np.ndarray, offset: float) -> np.ndarray:
        """Return the boxes moved apart by class (class id x ``offset``) for batched NMS."""
        count = boxes.shape[0]
        offsets = self._offsets[:count]
        offsets[...] = class_ids
        np.multiply(offsets, offset, out=offsets)
        return np.add(boxes, offsets[:, None], out=self._shifted[:count])

    def nms(self, boxes: np.ndarray, scores: np.ndarray, iou: float, keep: int) -> np.ndarray:
        """Return the indices greedy NMS keeps, highest score first, at most ``keep``."""
        return nms(boxes, scores, iou, keep, scratch=self.nms_scratch)

    @staticmethod
    def to_host(found: list[tuple]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each frame's kept (boxes, scores, class ids as int64): host arrays already."""
        return [(boxes, scores, class_ids.astype(np.int64)) for boxes, scores, class_ids in found]

    @staticmethod
    def extras(pred: np.ndarray, classes: int, anchors: np.ndarray) -> Any:
        """Return the rows after the class scores (mask coefficients, keypoints) at ``anchors``."""
        return pred[4 + classes:, anchors].T


class PerThreadBuffers(threading.local):
    """One :class:`DecodeBuffers` per thread that decodes (created on its first decode)."""

    def __init__(self) -> None:
        self.buffers = DecodeBuffers()

    def get(self) -> DecodeBuffers:
        """Return this thread's buffers."""
        return self.buffers
