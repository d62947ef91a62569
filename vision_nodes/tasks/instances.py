"""Results of the instance tasks (segment, pose): detections plus one extra array each.

Both subclass :class:`~.detect.Detections`, so whatever takes detections (the Detection2DArray
builder, a tracker, the 3D lifting) takes them too; row ``i`` of ``masks`` or ``keypoints``
belongs to detection ``i``, and follows it when detections are reordered or filtered with
:meth:`select`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .detect import Detections

#: The 17 COCO keypoint names, in the order of Ultralytics' COCO pose models.
COCO_KEYPOINTS = (
    'nose', 'left_eye', 'right_eye', 'left_ear', 'right_ear', 'left_shoulder',
    'right_shoulder', 'left_elbow', 'right_elbow', 'left_wrist', 'right_wrist', 'left_hip',
    'right_hip', 'left_knee', 'right_knee', 'left_ankle', 'right_ankle')
#: Limbs of the COCO skeleton as pairs of keypoint indices (0-based), for drawing.
COCO_SKELETON = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
    (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6))


@dataclass
class SegmentResult(Detections):
    """Detections with one instance mask each, in source-image pixels."""

    #: (N, H, W) bool, H x W the source image's size; ``masks[i]`` is detection ``i``'s.
    masks: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), bool))
    #: (N, 4) int (top, bottom, left, right), or None: mask ``i`` is empty outside rows
    #: top:bottom and columns left:right (its box and a pixel around it), which is all of it
    #: that :meth:`label_image` reads. None: a mask may be anywhere.
    windows: np.ndarray | None = None

    @classmethod
    def empty(cls, shape: tuple[int, int] = (0, 0)) -> 'SegmentResult':
        """No detections, for a source image of ``shape`` (height, width)."""
        base = Detections.empty()
        return cls(base.boxes, base.scores, base.class_ids,
                   np.zeros((0,) + tuple(shape), dtype=bool))

    def select(self, index: np.ndarray) -> 'SegmentResult':
        """Return the detections at ``index`` (an index array or boolean mask), with masks."""
        return SegmentResult(self.boxes[index], self.scores[index], self.class_ids[index],
                             self.masks[index],
                             None if self.windows is None else self.windows[index])

    def label_image(self) -> np.ndarray:
        """(H, W) uint16: 1 + the index of the detection a pixel belongs to, 0 background.

        Where masks overlap, the higher-scoring detection wins (ties: the lower index).
        Each mask is painted with a masked copy, which reads it once and builds no index of
        its pixels (one argmax over the stack of masks would read them all in a slow order),
        and only within its window where :attr:`windows` gives one.
        """
        count, height, width = self.masks.shape
        labels = np.zeros((height, width), dtype=np.uint16)
        windows = self.windows if self.windows is not None else \
            np.tile(np.array([0, height, 0, width]), (count, 1))
        # Paint the lowest scores first so that higher scores overwrite them.
        order = np.lexsort((-np.arange(count), self.scores))
        for i in order.tolist():
            top, bottom, left, right = windows[i].tolist()
            np.copyto(labels[top:bottom, left:right], np.uint16(i + 1),
                      where=self.masks[i, top:bottom, left:right])
        return labels


@dataclass
class PoseResult(Detections):
    """Detections with keypoints each, in source-image pixels."""

    #: (N, K, 3) float32: x, y in source pixels and the keypoint's score (0..1; 1 when the
    #: model gives no visibility). ``keypoints[i]`` is detection ``i``'s.
    keypoints: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 3), np.float32))
    #: The K keypoint names (the manifest's ``keypoints``, else COCO-17 for 17 keypoints).
    names: tuple[str, ...] = ()
    #: Pairs of keypoint indices to join when drawing (may be empty).
    skeleton: tuple[tuple[int, int], ...] = ()

    @classmethod
    def empty(cls, names: tuple[str, ...] = (), skeleton: tuple[tuple[int, int], ...] = ()
              ) -> 'PoseResult':
        """No detections (keypoint names kept)."""
        base = Detections.empty()
        return cls(base.boxes, base.scores, base.class_ids,
                   np.zeros((0, len(names), 3), np.float32), tuple(names), tuple(skeleton))

    def select(self, index: np.ndarray) -> 'PoseResult':
        """Return the detections at ``index`` (index array or boolean mask), with keypoints."""
        return PoseResult(self.boxes[index], self.scores[index], self.class_ids[index],
                          self.keypoints[index], self.names, self.skeleton)
