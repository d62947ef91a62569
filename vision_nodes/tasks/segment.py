"""The segmentation task: YOLO-seg outputs → detections with an instance mask each.

An Ultralytics ``-seg`` model has two outputs: ``output0`` (1, 4 + classes + nm, anchors),
the detector's rows followed by nm mask coefficients per anchor, and ``output1`` (1, nm, mh,
mw), the mask prototypes at a quarter of the input resolution. Boxes are decoded and
suppressed as for ``detect`` (:func:`.detect.decode_anchors`); each kept detection's mask is
its coefficients times the prototypes, upsampled (bilinear) to the network input, thresholded
at 0 and cropped to its box there, as Ultralytics' ``process_mask`` does; then the letterbox
is undone: the image's region of the network input is resized (bilinear) to the source image
and thresholded at one half, as Ultralytics' ``scale_masks`` does for its drawn masks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import cv2
import numpy as np

from ..manifest import ManifestError
from .detect import DetectionParams, DetectionTask, decode_anchors
from .instances import SegmentResult
from .preprocess import LetterboxMeta, prepare

#: OpenCV resizes at most this many channels in one call.
_RESIZE_CHANNELS = 128
#: Output names of an Ultralytics segmentation export: predictions, then prototypes.
PREDICTIONS, PROTOTYPES = 'output0', 'output1'


@dataclass(frozen=True)
class NetworkMeta:
    """The letterbox of one frame and the network input's (height, width)."""

    letterbox: LetterboxMeta
    shape: tuple[int, int]

    def content(self) -> tuple[slice, slice]:
        """Rows and columns of the network input that hold the image (the letterbox's inside)."""
        src_h, src_w = self.letterbox.source_shape
        gain_x, gain_y = self.letterbox.gain
        left, top = (int(p) for p in self.letterbox.pad)
        height = min(self.shape[0] - top, max(1, int(round(src_h * gain_y))))
        width = min(self.shape[1] - left, max(1, int(round(src_w * gain_x))))
        return slice(top, top + height), slice(left, left + width)


def _resize_stack(stack: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(N, h, w) → (N, height, width) with bilinear interpolation, ``size`` (height, width)."""
    out = np.empty((stack.shape[0],) + tuple(size), dtype=stack.dtype)
    for start in range(0, stack.shape[0], _RESIZE_CHANNELS):
        chunk = np.ascontiguousarray(stack[start:start + _RESIZE_CHANNELS].transpose(1, 2, 0))
        resized = cv2.resize(chunk, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
        out[start:start + _RESIZE_CHANNELS] = resized.reshape(size + (-1,)).transpose(2, 0, 1)
    return out


def crop_to_boxes(masks: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Zero, in place, every pixel of ``masks[i]`` (N, H, W) outside xyxy ``boxes[i]``.

    A pixel (row r, column c) is inside when x1 <= c < x2 and y1 <= r < y2, in pixel indices.
    """
    _, height, width = masks.shape
    cols = np.arange(width, dtype=np.float32)[None, :]
    rows = np.arange(height, dtype=np.float32)[None, :]
    masks &= ((cols >= boxes[:, 0:1]) & (cols < boxes[:, 2:3]))[:, None, :]
    masks &= ((rows >= boxes[:, 1:2]) & (rows < boxes[:, 3:4]))[:, :, None]
    return masks


def instance_masks(coefficients: np.ndarray, prototypes: np.ndarray, boxes: np.ndarray,
                   meta: NetworkMeta) -> tuple[np.ndarray, np.ndarray]:
    """Return (masks (M, H, W) bool in source pixels, the M detections' indices).

    From coefficients (N, nm), prototypes (nm, mh, mw) and the detections' xyxy ``boxes`` in
    network pixels. A detection whose mask is empty at network resolution is left out, as
    Ultralytics leaves it out.
    """
    count = coefficients.shape[0]
    source_hw = tuple(meta.letterbox.source_shape)
    if count == 0:
        return np.zeros((0,) + source_hw, dtype=bool), np.zeros(0, np.int64)
    nm, mh, mw = prototypes.shape
    logits = (coefficients.astype(np.float32) @ prototypes.reshape(nm, mh * mw)
              ).reshape(count, mh, mw)
    network = crop_to_boxes(_resize_stack(logits, meta.shape) > 0, boxes)
    kept = np.flatnonzero(network.any(axis=(1, 2)))
    rows, cols = meta.content()
    inside = network[kept][:, rows, cols].view(np.uint8) * np.uint8(255)
    if kept.shape[0] == 0:
        return np.zeros((0,) + source_hw, dtype=bool), kept
    return _resize_stack(inside, source_hw) > 127, kept


class SegmentationTask(DetectionTask):
    """Pre- and post-processing of YOLO instance segmentation, shared by every runner."""

    name: ClassVar[str] = 'segment'

    def __init__(self, manifest) -> None:
        super().__init__(manifest)
        #: Positions of the prediction and prototype outputs among the runner's outputs.
        self._positions = (0, 1)

    def preprocess(self, image: np.ndarray, encoding: str,
                   shape: tuple[int, int] | None = None) -> tuple[np.ndarray, NetworkMeta]:
        """Turn a decoded image into (NCHW float32 tensor of ``shape``, postprocess metadata)."""
        shape = tuple(shape or self.manifest.input_size)
        tensor, meta = prepare(image, encoding, shape, self.manifest.preprocessing)
        return tensor, NetworkMeta(meta, (int(shape[0]), int(shape[1])))

    def check_model(self, output_shapes: Sequence[tuple[int, ...]] | None,
                    labels: Sequence[str], output_names: Sequence[str] | None = None) -> None:
        """Refuse, at configure, a model without a segmentation model's two outputs.

        With ``output_names`` (runtimes that name outputs) the predictions must be called
        ``output0`` and the prototypes ``output1``, as Ultralytics exports them; without
        names they are told apart by rank. Then the detector's checks apply to the
        predictions, with the mask coefficients left out of the class count.
        """
        if output_shapes is None:
            return
        where = f"model '{self.manifest.name}'"
        shapes = [tuple(s) for s in output_shapes]
        if output_names is not None:
            names = list(output_names)
            missing = [n for n in (PREDICTIONS, PROTOTYPES) if n not in names]
            if missing:
                raise ManifestError(
                    f"{where}: `task: segment` needs outputs '{PREDICTIONS}' (boxes, classes, "
                    f"mask coefficients) and '{PROTOTYPES}' (mask prototypes), as Ultralytics "
                    f"exports -seg models; this model's outputs are "
                    f"{', '.join(repr(n) for n in names) or 'none'}: export it with those names")
            self._positions = (names.index(PREDICTIONS), names.index(PROTOTYPES))
        else:
            ranks = [len(s) for s in shapes]
            if sorted(ranks) != [3, 4]:
                raise ManifestError(
                    f'{where}: `task: segment` needs two outputs, predictions (1, 4 + classes '
                    '+ mask coefficients, anchors) and prototypes (1, masks, height, width); '
                    f"this model gives {' and '.join('x'.join(map(str, s)) for s in shapes)}")
            self._positions = (ranks.index(3), ranks.index(4))
        pred, protos = (shapes[i] for i in self._positions)
        if len(protos) != 4 or protos[0] != 1 or len(pred) != 3 or pred[1] - 4 - protos[1] < 1:
            raise ManifestError(
                f"{where}: outputs {'x'.join(map(str, pred))} and "
                f"{'x'.join(map(str, protos))} are not predictions (1, 4 + classes + masks, "
                'anchors) and prototypes (1, masks, height, width) of a segmentation model')
        super().check_model([(pred[0], pred[1] - protos[1], pred[2])], labels)

    def postprocess(self, outputs: list[np.ndarray], meta: NetworkMeta,
                    params: DetectionParams) -> SegmentResult:
        """Decode raw network outputs into detections and masks in source-image pixels."""
        pred, protos = (outputs[i] for i in self._positions)
        nm = protos.shape[1]
        classes = pred.shape[1] - 4 - nm
        dets, anchors = decode_anchors(pred, params, classes)
        coefficients = pred[0][4 + classes:, anchors].T
        masks, kept = instance_masks(coefficients, protos[0], dets.boxes, meta)
        meta.letterbox.to_source(dets.boxes)
        return SegmentResult(dets.boxes[kept], dets.scores[kept], dets.class_ids[kept], masks)
