"""Results of the instance tasks (segment, pose): detections plus one extra array each.

Both subclass :class:`~.detect.Detections`, so whatever takes detections (the Detection2DArray
builder, a tracker, the 3D lifting) takes them too; ``masks[i]`` (with ``windows[i]``) or
``keypoints[i]`` belongs to detection ``i``, and follows it when detections are reordered or
filtered with :meth:`select`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

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
    """Detections with one instance mask each, in source-image pixels.

    Each mask is held at the size of its window (its box and a pixel around it), not of the
    image: a frame's masks take about the pixels of its boxes, where whole-image masks took
    detections x image pixels (300 detections of a 12 MP frame: 3.6 GB).
    """

    #: One 2D bool array per detection: ``masks[i]`` is detection ``i``'s mask inside
    #: ``windows[i]``, whose size it has; the mask is empty outside. (N, H, W) whole-image
    #: masks (a GPU's, tests') may be given instead: each is then held as the view of its
    #: window, the whole image where no windows are given.
    masks: Sequence[np.ndarray] = field(default_factory=lambda: np.zeros((0, 0, 0), bool))
    #: (N, 4) int64 (top, bottom, left, right): mask ``i`` covers rows top:bottom and columns
    #: left:right of the image.
    windows: np.ndarray | None = None
    #: The source image's (height, width); taken from whole-image masks when they are given.
    shape: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        """Hold whole-image masks as views of their windows; check that masks fit windows."""
        masks = self.masks
        if isinstance(masks, np.ndarray):
            if masks.ndim != 3:
                raise ValueError(f'whole-image masks are (N, H, W), got shape {masks.shape}')
            count, height, width = masks.shape
            self.shape = (height, width) if self.shape is None else self.shape
            if self.windows is None:
                self.windows = np.tile(np.array([0, height, 0, width], np.int64), (count, 1))
            masks = tuple(mask[top:bottom, left:right] for mask, (top, bottom, left, right)
                          in zip(masks, np.asarray(self.windows).tolist()))
        self.masks = tuple(masks)
        self.windows = np.asarray(self.windows, np.int64).reshape(-1, 4)
        if self.shape is None:
            raise ValueError("masks given by window need the image's shape")
        self.shape = (int(self.shape[0]), int(self.shape[1]))
        self._check()

    def _check(self) -> None:
        """Raise ValueError unless each detection has one mask, of its window's size.

        Every window must lie within the image (top <= bottom <= height, left <= right <=
        width).
        """
        sizes = [mask.shape for mask in self.masks]
        windows = self.windows
        height, width = self.shape
        inside = np.all((windows[:, 0] >= 0) & (windows[:, 0] <= windows[:, 1]) &
                        (windows[:, 1] <= height) & (windows[:, 2] >= 0) &
                        (windows[:, 2] <= windows[:, 3]) & (windows[:, 3] <= width))
        if not inside or len(sizes) != len(windows) or len(sizes) != len(self) or sizes != [
                (b - t, r - l) for t, b, l, r in windows.tolist()]:
            raise ValueError(f'{len(sizes)} masks of shapes {sizes[:4]} do not fit '
                             f'{len(self)} detections and windows {windows[:4].tolist()} in a '
                             f'{height}x{width} image')

    @classmethod
    def empty(cls, shape: tuple[int, int] = (0, 0)) -> 'SegmentResult':
        """No detections, for a source image of ``shape`` (height, width)."""
        base = Detections.empty()
        return cls(base.boxes, base.scores, base.class_ids, (), np.zeros((0, 4), np.int64),
                   tuple(shape))

    def select(self, index: np.ndarray) -> 'SegmentResult':
        """Return the detections at ``index`` (an index array or boolean mask), with masks."""
        picked = np.arange(len(self))[index]
        tracks = None if self.track_ids is None else self.track_ids[picked]
        return replace(self, boxes=self.boxes[picked], scores=self.scores[picked],
                       class_ids=self.class_ids[picked], track_ids=tracks,
                       masks=tuple(self.masks[i] for i in picked.tolist()),
                       windows=self.windows[picked])

    def mask(self, i: int) -> np.ndarray:
        """Return detection ``i``'s mask over the whole image, (H, W) bool (a new array)."""
        whole = np.zeros(self.shape, bool)
        top, bottom, left, right = self.windows[i].tolist()
        whole[top:bottom, left:right] = self.masks[i]
        return whole

    def label_image(self) -> np.ndarray:
        """(H, W) uint16: 1 + the index of the detection a pixel belongs to, 0 background.

        Where masks overlap, the higher-scoring detection wins (ties: the lower index).
        Each mask is painted within its window with a masked copy, which reads it once and
        builds no index of its pixels; nothing but the label image is the image's size.
        """
        labels = np.zeros(self.shape, dtype=np.uint16)
        # Paint the lowest scores first so that higher scores overwrite them.
        order = np.lexsort((-np.arange(len(self.masks)), self.scores))
        for i in order.tolist():
            top, bottom, left, right = self.windows[i].tolist()
            np.copyto(labels[top:bottom, left:right], np.uint16(i + 1), where=self.masks[i])
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
