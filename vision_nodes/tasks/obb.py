"""The oriented-box task: YOLO-obb outputs -> rotated boxes, scores and classes in source pixels.

An Ultralytics ``-obb`` model has one output, (1, 4 + classes + 1, anchors): each anchor's
box centre and size in network pixels (already decoded by the head), its class scores, then
its angle in radians. An NMS-free (YOLO26) model's output is (1, rows, 7) instead: cx, cy,
w, h, score, class, angle, rows in descending score after the head's own top-k
(:mod:`.end2end`). Candidates above the confidence threshold go through Ultralytics' rotated
NMS (:func:`.rotated.rotated_nms`: probabilistic IoU, Fast-NMS, classes apart); NMS-free rows
are only cut at the threshold and ``max_detections``. Back in source pixels the letterbox is
undone as Ultralytics' ``scale_boxes(xywh=True)`` undoes it: the centre moved and scaled, the
size scaled, the angle kept, nothing clipped.

Each result is a :class:`~.detect.Detections` (``boxes``: the axis-aligned box around each
rotated one, clipped to the image, which the tracker and 3D boxes use) with the rotated boxes
in ``xywhr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Sequence

import numpy as np

from ..manifest import ManifestError
from ..text import clip
from .decode_buffers import DecodeBuffers
from .detect import MAX_NMS_CANDIDATES, DetectionParams, DetectionTask, Detections
from .end2end import decode_rows, row_extra
from .preprocess import LetterboxMeta
from .rotated import corners, hull, rotated_nms

#: An output row's values before the angle: cx, cy, w, h, score, class.
_ROW_ANGLE = 6


@dataclass
class OrientedBoxes(Detections):
    """Rotated boxes in source pixels, with their axis-aligned hulls as ``boxes``."""

    #: (N, 5) float32 cx, cy, w, h, angle (radians; Ultralytics' ``xywhr``).
    xywhr: np.ndarray = field(default_factory=lambda: np.zeros((0, 5), np.float32))

    def select(self, index: np.ndarray) -> 'OrientedBoxes':
        """Return the detections at ``index`` (index array or boolean mask), rotated boxes too."""
        tracks = None if self.track_ids is None else self.track_ids[index]
        return OrientedBoxes(self.boxes[index], self.scores[index], self.class_ids[index],
                             self.xywhr[index], track_ids=tracks)

    @property
    def polygons(self) -> np.ndarray:
        """(N, 4, 2) corners of each rotated box (Ultralytics' ``xyxyxyxy`` order)."""
        return corners(self.xywhr)

    @classmethod
    def empty(cls) -> 'OrientedBoxes':
        """No detections."""
        base = Detections.empty()
        return cls(base.boxes, base.scores, base.class_ids, np.zeros((0, 5), np.float32))


def decode_oriented(pred: np.ndarray, params: DetectionParams, classes: int,
                    buffers: DecodeBuffers | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(4 + classes + 1, anchors) -> kept (xywhr (N, 5), scores, class ids), network pixels.

    The candidates are detection's (:meth:`.DecodeBuffers.candidates`, the same best class per
    anchor above ``params.confidence``); their boxes keep the angle row, for the rotated NMS.
    """
    ops = buffers or DecodeBuffers()
    ((anchors, scores, class_ids),) = ops.candidates([pred], classes, params.confidence)
    xywhr = np.empty((anchors.shape[0], 5), np.float32)
    xywhr[:, :4] = pred[:4, anchors].T
    xywhr[:, 4] = pred[4 + classes, anchors]
    if scores.shape[0] > MAX_NMS_CANDIDATES:
        top = ops.top(scores, MAX_NMS_CANDIDATES)
        xywhr, scores, class_ids = xywhr[top], scores[top], class_ids[top]
    keep = rotated_nms(xywhr, scores, class_ids, params.iou, params.max_detections)
    return xywhr[keep], scores[keep], class_ids[keep].astype(np.int64)


def to_source(xywhr: np.ndarray, meta: LetterboxMeta) -> np.ndarray:
    """Map (N, 5) rotated boxes from network to source pixels, in place (none clipped)."""
    xywhr[:, 0] -= meta.pad[0]
    xywhr[:, 1] -= meta.pad[1]
    xywhr[:, 0] /= meta.gain[0]
    xywhr[:, 1] /= meta.gain[1]
    xywhr[:, 2] /= meta.gain[0]
    xywhr[:, 3] /= meta.gain[1]
    return xywhr


class OrientedBoxTask(DetectionTask):
    """Pre- and post-processing of YOLO oriented-box detection, shared by every runner."""

    name: ClassVar[str] = 'obb'
    #: Decoded on the host on every runner (rotated NMS has no device version here).
    decodes_device_outputs: ClassVar[bool] = False

    def __init__(self, manifest) -> None:
        super().__init__(manifest)
        #: The class count (the labels', else the output's) and where ``output0`` is.
        self._classes: int | None = len(manifest.labels) if manifest.labels else None
        self._at = 0

    def check_model(self, output_shapes: Sequence[tuple[int, ...]] | None,
                    labels: Sequence[str], output_names: Sequence[str] | None = None) -> None:
        """Refuse, at configure, a model whose output is not an oriented-box model's.

        The output ``output0`` (by name where the runtime names outputs) is (1, 4 + classes
        + 1, anchors), the classes the labels' count when known, or NMS-free rows (1, rows,
        7). Raises ManifestError in one line.
        """
        if output_shapes is None:
            return
        where = f"model '{self.manifest.name}'"
        if output_names is not None and 'output0' not in output_names:
            raise ManifestError(
                f"{where}: `task: obb` reads the output 'output0' (boxes, classes, angles), as "
                "Ultralytics exports -obb models; this model's outputs are "
                f"{', '.join(repr(clip(n, 40)) for n in output_names[:4]) or 'none'}")
        self._at = list(output_names).index('output0') if output_names is not None else 0
        first = tuple(output_shapes[self._at]) if output_shapes else ()
        anchor_rows = 5 + len(labels) if labels else None
        if row_extra(first, anchor_rows) == 1:
            self._settle_layout(True)
            return
        if len(first) != 3 or first[0] != 1 or first[1] < 6 or \
                row_extra(first, anchor_rows) is not None:
            shown = 'x'.join(map(str, first)) or 'nothing'
            raise ManifestError(
                f'{where}: the model outputs {shown}, not an oriented-box output (1, 4 + '
                'classes + 1, anchors) nor NMS-free rows (1, rows, 7): use `task: obb` with '
                'Ultralytics -obb models')
        super().check_model([(1, first[1] - 1, first[2])], labels)
        self._classes = first[1] - 5

    def postprocess(self, outputs: list[np.ndarray], meta: LetterboxMeta,
                    params: DetectionParams) -> OrientedBoxes:
        """Decode the raw output into rotated boxes in source-image pixels."""
        pred = outputs[self._at]
        if self.end2end is None:
            self.check_model([tuple(pred.shape)], [])
        if self.end2end:
            xywh, scores, class_ids, rows = decode_rows(pred, params.confidence,
                                                        params.max_detections)
            angles = (pred[0] if pred.ndim == 3 else pred)[rows, _ROW_ANGLE]
            xywhr = np.concatenate([xywh, angles[:, None].astype(np.float32)], axis=1)
        else:
            xywhr, scores, class_ids = decode_oriented(pred[0], params, self._classes or 0,
                                                       self.decode_buffers.get())
        to_source(xywhr, meta)
        return OrientedBoxes(hull(xywhr, meta.source_shape), scores, class_ids, xywhr)
