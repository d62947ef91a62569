"""The detection task: YOLO-style raw output → boxes, scores and class ids in source pixels.

Two output layouts: YOLOv8-style anchors before NMS, decoded here (vectorised NumPy; classes
are separated for NMS by offsetting their boxes, and NMS itself, exact greedy, see
:mod:`.nms`, is batched over all classes at once), and the rows of an NMS-free end-to-end
head (YOLO26), decoded by :mod:`.end2end` without NMS. Which one a model gives is settled
from its output's shape at configure (:meth:`DetectionTask.check_model`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ..manifest import THRESHOLD_RANGES, ManifestError, ModelManifest, Thresholds
from ..param_spec import ParamSpec
from ..tracking import TRACKERS, check_tracker, check_tracker_config
from .base import default_values
from .decode_buffers import DecodeBuffers, PerThreadBuffers
from .end2end import ROW_VALUES, decode_rows, is_end2end, row_extra
from .nms import CLASS_OFFSET
from .preprocess import LetterboxMeta, prepare_input

#: The thresholds' defaults, the manifest's (``thresholds``: :class:`~..manifest.Thresholds`).
DEFAULTS = Thresholds()
#: At most this many candidates (highest scores first) enter NMS.
MAX_NMS_CANDIDATES = 3000


@dataclass
class Detections:
    """Decoded detections for one image, in source-image pixels."""

    boxes: np.ndarray      # (N, 4) float32 xyxy
    scores: np.ndarray     # (N,) float32
    class_ids: np.ndarray  # (N,) int64
    #: Track ids (N,) int64 when a tracker follows the detections; None: untracked, the
    #: published id of a detection is then its index. Keyword-only, so the results of the
    #: instance tasks add their positional fields after ``class_ids``.
    track_ids: np.ndarray | None = field(default=None, kw_only=True)

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def select(self, index: np.ndarray) -> 'Detections':
        """Return the detections at ``index`` (an index array or boolean mask)."""
        tracks = None if self.track_ids is None else self.track_ids[index]
        return replace(self, boxes=self.boxes[index], scores=self.scores[index],
                       class_ids=self.class_ids[index], track_ids=tracks)

    def take(self, index: np.ndarray, track_ids: np.ndarray | None = None) -> 'Detections':
        """Return the detections at ``index`` (in that order), with these track ids.

        Through :meth:`select`, so a subclass's per-detection rows (masks, keypoints)
        follow.
        """
        return replace(self.select(index), track_ids=track_ids)

    def ids(self) -> list[str]:
        """Return the published ``id`` of each detection: its track id, else its index."""
        values = range(len(self)) if self.track_ids is None else self.track_ids.tolist()
        return [str(int(v)) for v in values]

    @classmethod
    def empty(cls) -> 'Detections':
        """No detections."""
        return cls(np.zeros((0, 4), np.float32), np.zeros(0, np.float32),
                   np.zeros(0, np.int64))


@dataclass(frozen=True)
class DetectionParams:
    """Post-processing thresholds (runtime-tunable), and the tracker the detections go through.

    Tracking is done by the model's ROS outputs with the ROS-free :mod:`..tracking`; its
    parameters are the task's (:data:`TRACKER_PARAMS`). The outputs' own switches (3D, the
    annotated image) are declared by the outputs (``ros/outputs/detection_switches.py``).
    """

    confidence: float = DEFAULTS.confidence
    iou: float = DEFAULTS.iou
    max_detections: int = DEFAULTS.max_detections
    tracker: str = 'none'
    tracker_config: str = ''


def decode_yolo(preds: Any, classes: int, params: DetectionParams, ops: Any) -> list[tuple]:
    """Decode each frame's ``(4 + classes + extra, anchors)`` YOLOv8-style output.

    Best class per anchor, the anchors above ``params.confidence`` (every frame's at once),
    the best :data:`MAX_NMS_CANDIDATES` of them, their boxes as corners, moved apart by class
    for one greedy NMS, cut to ``params.max_detections``. ``ops`` does each step where the
    output is: the host's reused arrays (:class:`.decode_buffers.DecodeBuffers`) or the device
    keeping it (``runners/torch_device.py``). Returns each frame's kept (boxes, scores, class
    ids, anchors), highest score first.
    """
    kept = []
    found = ops.candidates(preds, classes, params.confidence)
    for pred, (anchors, scores, class_ids) in zip(preds, found):
        boxes = ops.corners(pred, anchors)
        if scores.shape[0] > MAX_NMS_CANDIDATES:
            top = ops.top(scores, MAX_NMS_CANDIDATES)
            boxes, scores, class_ids, anchors = \
                boxes[top], scores[top], class_ids[top], anchors[top]
        keep = ops.nms(ops.shifted(boxes, class_ids, CLASS_OFFSET), scores, params.iou,
                       params.max_detections)
        kept.append((boxes[keep], scores[keep], class_ids[keep], anchors[keep]))
    return kept


def decode_frames(output: Any, params: DetectionParams, classes: int | None = None,
                  buffers: DecodeBuffers | None = None, extras: bool = False
                  ) -> list[tuple[Detections, Any]]:
    """Each frame's detections (network pixels) and the anchor each came from, or its extras.

    ``extras``: the values after the ``4 + classes`` rows (mask coefficients, keypoints; (N,
    extra), on the device where the output is). Decoded by the output's ``decode_ops`` where
    it stays on a device (every frame's boxes back in one copy), else in ``buffers``.
    """
    ops = getattr(output, 'decode_ops', None) or buffers or DecodeBuffers()
    preds = ops.frames(output)
    if preds[0].shape[0] < 5:
        raise ValueError(f'detection output of shape {output.shape} has no class scores')
    count = preds[0].shape[0] - 4 if classes is None else classes
    found = decode_yolo(preds, count, params, ops)
    return [(Detections(*arrays), ops.extras(pred, count, kept[3]) if extras else kept[3])
            for arrays, kept, pred in zip(ops.to_host([f[:3] for f in found]), found, preds)]


def decode(output: Any, params: DetectionParams, num_classes: int | None = None,
           buffers: DecodeBuffers | None = None) -> Detections:
    """Decode one frame's YOLOv8-style output ``(1, 4 + nc, A)`` (:func:`decode_frames`)."""
    return decode_frames(output, params, num_classes, buffers)[0][0]


def decode_instances(output: Any, params: DetectionParams, classes: int, end2end: bool,
                     buffers: DecodeBuffers | None = None) -> tuple[Detections, Any]:
    """Return the detections of either layout and each one's extra values (N, extra).

    The extra values (mask coefficients, keypoints) follow the ``4 + classes`` rows of a
    YOLOv8-style output (:func:`decode_frames`), or the 6 leading values of an end-to-end row.
    """
    if end2end:
        boxes, scores, class_ids, rows = decode_rows(output, params.confidence,
                                                     params.max_detections)
        return Detections(boxes, scores, class_ids), output[0][rows, ROW_VALUES:]
    return decode_frames(output, params, classes, buffers, extras=True)[0]


#: The tracker parameters (done by a detection model's ROS outputs, on every task that
#: detects); :class:`DetectionParams` has a field of the same name for each.
TRACKER_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec('tracker', 'none',
              "Track the detections across frames: Detection2D.id becomes a stable track id "
              "(bytetrack: the package's ByteTrack, Ultralytics' ids without torch; botsort: "
              "Ultralytics' BoT-SORT, the torch path); detections a tracker has not confirmed "
              'are left out of tracked frames. none: ids are the indices. Restarts when the '
              "image's frame_id changes or its stamp jumps back.",
              choices=TRACKERS, applies='live', check=check_tracker),
    ParamSpec('tracker_config', '',
              "A tracker YAML (as Ultralytics' cfg/trackers/bytetrack.yaml) whose settings "
              "replace the tracker's defaults (empty: the defaults); checked when set: a "
              'regular file of known keys and value types for the tracker.',
              applies='live', check=check_tracker_config),
)


class DetectionTask:
    """Pre- and post-processing for 2-D object detection, shared by every runner."""

    name: ClassVar[str] = 'detect'
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec('confidence_threshold', DEFAULTS.confidence,
                  'Minimum class score for a detection to be published.',
                  float_range=THRESHOLD_RANGES['confidence'], applies='live'),
        ParamSpec('iou_threshold', DEFAULTS.iou,
                  'IoU above which non-maximum suppression drops the lower-scoring box of a '
                  'class (NMS-free models, such as YOLO26, run none).',
                  float_range=THRESHOLD_RANGES['iou'], applies='live'),
        ParamSpec('max_detections', DEFAULTS.max_detections,
                  'Most detections published per image.',
                  int_range=THRESHOLD_RANGES['max_detections'], applies='live'),
    ) + TRACKER_PARAMS

    @classmethod
    def parse_manifest_blocks(cls, source: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """No block of its own: ``thresholds`` is parsed with the generic manifest."""
        return {}

    @classmethod
    def param_defaults(cls, manifest: ModelManifest) -> dict[str, Any]:
        """Return the manifest's ``thresholds`` as the threshold parameters' defaults."""
        given = manifest.thresholds
        return {**default_values(cls), 'confidence_threshold': float(given.confidence),
                'iou_threshold': float(given.iou), 'max_detections': int(given.max_detections)}

    #: ``preprocess`` can hand the letterboxed u8 image (``prepare_u8``) to a runner that
    #: converts it itself; the pipeline sets ``u8_input`` when the runner does.
    supports_u8_input: ClassVar[bool] = True
    #: ``decode`` takes outputs that stay on the device (see ``decode``).
    decodes_device_outputs: ClassVar[bool] = True

    def __init__(self, manifest: ModelManifest) -> None:
        self.manifest = manifest
        self.u8_input = False
        #: Whether the model's output is the NMS-free layout (:mod:`.end2end`); settled by
        #: :meth:`check_model` (None: not yet, then by the first output decoded).
        self.end2end: bool | None = None
        #: Each decoding thread's reused arrays (:mod:`.decode_buffers`).
        self.decode_buffers = PerThreadBuffers()

    def _settle_layout(self, end2end: bool) -> None:
        """Remember the output layout; NMS-free rows are decoded on the host (no NMS there)."""
        self.end2end = end2end
        if end2end:
            self.decodes_device_outputs = False  # type: ignore[misc]

    def make_params(self, values: Mapping[str, Any]) -> DetectionParams:
        """Thresholds from parameter values keyed by spec name (missing: the default)."""
        value = {spec.name: values.get(spec.name, spec.default) for spec in self.params}
        return DetectionParams(
            float(value['confidence_threshold']), float(value['iou_threshold']),
            int(value['max_detections']),
            **{spec.name: value[spec.name] for spec in TRACKER_PARAMS})

    def preprocess(self, image: np.ndarray, encoding: str,
                   shape: tuple[int, int] | None = None) -> tuple[np.ndarray, LetterboxMeta]:
        """Turn a decoded image into (NCHW float32 tensor of ``shape``, postprocess metadata).

        ``shape`` (height, width) defaults to the manifest's ``input_size``. With
        ``u8_input`` the network input is the letterboxed u8 NHWC image instead.
        """
        return prepare_input(image, encoding, shape or self.manifest.input_size,
                             self.manifest.preprocessing, self.u8_input)

    def check_model(self, output_shapes: Sequence[tuple[int, ...]] | None,
                    labels: Sequence[str], output_names: Sequence[str] | None = None) -> None:
        """Refuse, at configure, a model whose outputs are not a detector's or its labels'.

        ``output_shapes`` are the shapes of the warm-up run's outputs (None: not known), and
        ``output_names`` their names where the runtime names them (a detector reads its
        first output, whatever its name). A detector's first output is (1, 4 + classes,
        anchors) (YOLOv8-style, before NMS), when class names are known one per class, or
        (1, rows, 6) (an NMS-free end-to-end head: YOLO26). Raises ManifestError in one line.
        """
        if output_shapes is None:
            return
        where = f"model '{self.manifest.name}'"
        first = tuple(output_shapes[0]) if output_shapes else ()
        if is_end2end(first, 0):
            self._settle_layout(True)
            return
        if len(first) != 3 or first[0] != 1 or first[1] < 5 or first[2] < 1 or \
                row_extra(first, 4 + len(labels) if labels else None) is not None:
            shown = 'x'.join(map(str, first)) or 'nothing'
            raise ManifestError(
                f'{where}: the model outputs {shown}, not a detector output: (1, 4 + classes, '
                'anchors) as YOLOv8-style models give before NMS, or (1, rows, 6) as NMS-free '
                'YOLO26 heads give: use `task: detect` only for such models (exported without '
                'NMS plugins)')
        self._settle_layout(False)
        classes = first[1] - 4
        if labels and len(labels) != classes:
            origin = ('the manifest lists' if self.manifest.labels
                      else "the model's own metadata lists")
            raise ManifestError(
                f'{where}: field `labels`: {origin} {len(labels)} class names but the model '
                f'scores {classes} classes: list exactly {classes} names in `labels`'
                + (', or use `labels: from_weights`' if self.manifest.labels else ''))

    def postprocess(self, outputs: list[np.ndarray], meta: LetterboxMeta,
                    params: DetectionParams) -> Detections:
        """Decode raw network outputs into detections in source-image pixels."""
        if self.end2end is None:
            self.check_model([tuple(outputs[0].shape)], [])
        if self.end2end:
            dets = decode_instances(outputs[0], params, 0, True)[0]
        else:
            dets = decode(outputs[0], params, buffers=self.decode_buffers.get())
        meta.to_source(dets.boxes)
        return dets

    def postprocess_batch(self, outputs: list[Any], metas: Sequence[LetterboxMeta],
                          params: DetectionParams) -> list[Detections] | None:
        """Every frame's :meth:`postprocess` from a batch's outputs at once; None: not here.

        Only for outputs that stay on a device and decode a batch there
        (``runners/torch_device.py``: each frame as alone, one copy back),
        and only for this task's own ``postprocess`` (segment and pose read more than boxes)
        on the YOLOv8 layout (NMS-free rows are decoded on the host).
        """
        if getattr(outputs[0], 'decode_ops', None) is None or self.end2end is not False \
                or type(self).postprocess is not DetectionTask.postprocess:
            return None
        results = [dets for dets, _ in decode_frames(outputs[0], params)]
        for meta, dets in zip(metas, results):
            meta.to_source(dets.boxes)
        return results
