"""Preallocated arrays for decoding YOLOv8-style outputs on the host, reused frame after frame.

:func:`.detect.decode_anchors` allocates every intermediate afresh: the class maximum of every
anchor, the candidate mask, the candidates' boxes, their class-shifted copy for NMS and NMS's
IoU matrices. :class:`DecodeBuffers` holds them for one output shape (one model at one input
shape: rect inference changes the anchor count, and then they are allocated again) and
computes the same operations, in the same order and dtype, into them, so the detections are
bit for bit the fresh decode's. What it returns is always fresh: the next frame overwrites the
buffers.

A buffer serves one decode at a time, while a batch's frames are decoded side by side on the
frame pool's threads (``parallel.map_frames``): a task holds a :class:`PerThreadBuffers`,
whose :meth:`~PerThreadBuffers.get` gives each thread its own.
"""

from __future__ import annotations

import threading

import numpy as np

from .nms import nms
from .nms_scratch import NmsScratch


class DecodeBuffers:
    """Arrays for one output shape (rows, anchors) and dtype, and NMS's scratch."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self.nms = NmsScratch()
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

    def decode(self, pred: np.ndarray, classes: int, confidence: float, iou: float,
               max_detections: int, max_candidates: int, class_offset: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Return (boxes xyxy, scores, class ids, anchors) kept, or None: no candidate.

        ``pred`` is one frame's (4 + ``classes`` + extra, anchors) output; the steps and
        constants are :func:`.detect.decode_anchors`'s.
        """
        self._fit(pred, classes)
        class_scores = pred[4:4 + classes]
        np.max(class_scores, axis=0, out=self._scores)
        np.greater(self._scores, confidence, out=self._mask)
        anchors = np.flatnonzero(self._mask)
        count = anchors.shape[0]
        if not count:
            return None
        if self._class_scores.size < classes * count:
            self._class_scores = np.empty(classes * count, dtype=pred.dtype)
        candidates = self._class_scores[:classes * count].reshape(classes, count)
        # The anchors are valid indices: mode 'clip' only spares the copy 'raise' makes of out.
        np.take(class_scores, anchors, axis=1, out=candidates, mode='clip')
        class_ids = np.argmax(candidates, axis=0, out=self._class_ids[:count])
        boxes = self._xyxy(pred, anchors)
        scores = self._scores[anchors].astype(np.float32, copy=False)
        if count > max_candidates:
            top = np.argpartition(-scores, max_candidates)[:max_candidates]
            boxes, scores, class_ids, anchors = \
                boxes[top], scores[top], class_ids[top], anchors[top]
        shifted = self._shifted_boxes(boxes, class_ids, class_offset)
        keep = nms(shifted, scores, iou, max_detections, scratch=self.nms)
        return boxes[keep], scores[keep], class_ids[keep].astype(np.int64), anchors[keep]

    def _xyxy(self, pred: np.ndarray, anchors: np.ndarray) -> np.ndarray:
        """Return the candidates' centre/size boxes as float32 corners (count, 4), in buffers."""
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

    def _shifted_boxes(self, boxes: np.ndarray, class_ids: np.ndarray, class_offset: float
                       ) -> np.ndarray:
        """Return the boxes moved apart by class (class id x ``class_offset``) for batched NMS."""
        count = boxes.shape[0]
        offsets = self._offsets[:count]
        offsets[...] = class_ids
        np.multiply(offsets, class_offset, out=offsets)
        return np.add(boxes, offsets[:, None], out=self._shifted[:count])


class PerThreadBuffers(threading.local):
    """One :class:`DecodeBuffers` per thread that decodes (created on its first decode)."""

    def __init__(self) -> None:
        self.buffers = DecodeBuffers()

    def get(self) -> DecodeBuffers:
        """Return this thread's buffers."""
        return self.buffers
