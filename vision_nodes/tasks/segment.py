"""The segmentation task: YOLO-seg outputs → detections with an instance mask each.

An Ultralytics ``-seg`` model has two outputs: ``output0`` (1, 4 + classes + nm, anchors),
the detector's rows followed by nm mask coefficients per anchor, and ``output1`` (1, nm, mh,
mw), the mask prototypes at a quarter of the input resolution. An NMS-free (YOLO26) model's
``output0`` is (1, rows, 6 + nm) instead: detections after its own top-k, each followed by
its nm coefficients (:mod:`.end2end`). Boxes are decoded as for ``detect``
(:func:`.detect.decode_instances`: suppressed, or read from the rows); each kept detection's
mask is its coefficients times the prototypes, upsampled (bilinear) to the network input,
thresholded at 0 and cropped to its box there, as Ultralytics' ``process_mask`` does; then
the letterbox is undone: the image's region of the network input is resized (bilinear) to
the source image and thresholded at one half, as Ultralytics' ``scale_masks`` does for its
drawn masks. Each mask is made and kept at the size of its window, the source pixels its box
can reach: a frame's masks take about its boxes' pixels, never detections x image pixels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import cv2
import numpy as np

from ..manifest import ManifestError
from ..text import clip
from .detect import DetectionParams, DetectionTask, decode_instances
from .end2end import is_end2end, row_extra
from .instances import SegmentResult
from .preprocess import LetterboxMeta

#: Output names of an Ultralytics segmentation export: predictions, then prototypes.
PREDICTIONS, PROTOTYPES = 'output0', 'output1'
#: Bilinear sampling with the source-to-target map given (OpenCV's inverse map).
_SAMPLE = cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP


@dataclass(frozen=True)
class NetworkMeta:
    """The letterbox of one frame and the network input's (height, width)."""

    letterbox: LetterboxMeta
    shape: tuple[int, int]

    def content(self) -> tuple[int, int, int, int]:
        """(left, top, width, height) of the image inside the network input (the letterbox)."""
        src_h, src_w = self.letterbox.source_shape
        gain_x, gain_y = self.letterbox.gain
        left, top = (int(p) for p in self.letterbox.pad)
        height = min(self.shape[0] - top, max(1, int(round(src_h * gain_y))))
        width = min(self.shape[1] - left, max(1, int(round(src_w * gain_x))))
        return left, top, width, height


def _sample(image: np.ndarray, scale: tuple[float, float], offset: tuple[float, float],
            size: tuple[int, int]) -> np.ndarray:
    """Bilinear samples of ``image`` at x * scale + offset (per axis) for a ``size`` (h, w) grid.

    Edges are replicated, as a resize (align_corners=False) clamps at them.
    """
    matrix = np.array([[scale[0], 0.0, offset[0]], [0.0, scale[1], offset[1]]])
    return cv2.warpAffine(image, matrix, (size[1], size[0]), flags=_SAMPLE,
                          borderMode=cv2.BORDER_REPLICATE)


def _half_pixel(ratio: float, start: float) -> tuple[float, float]:
    """Scale and offset mapping target pixel x to source x (pixel centres, as a resize does)."""
    return ratio, (start + 0.5) * ratio - 0.5


def _network_mask(coefficients: np.ndarray, prototypes: np.ndarray, box: np.ndarray,
                  meta: NetworkMeta) -> tuple[np.ndarray, int, int]:
    """Return the mask at network resolution inside ``box``: (bool region, its left, its top).

    The logits (coefficients . prototypes, (mh, mw)) upsampled (bilinear) to the network
    input, above 0, and cropped to the pixels x1 <= c < x2, y1 <= r < y2; outside the region
    the mask is empty. Only the prototype pixels the samples read are combined (the samples'
    span, one more for the bilinear neighbour): the same samples as from the whole plane.
    """
    height, width = meta.shape
    x0, x1 = (int(np.clip(np.ceil(v), 0, width)) for v in box[0::2])
    y0, y1 = (int(np.clip(np.ceil(v), 0, height)) for v in box[1::2])
    if x1 <= x0 or y1 <= y0:
        return np.zeros((0, 0), bool), x0, y0
    _, mh, mw = prototypes.shape
    sx, ox = _half_pixel(mw / width, x0)
    sy, oy = _half_pixel(mh / height, y0)
    px0, px1 = _span(ox, sx, x1 - x0, mw)
    py0, py1 = _span(oy, sy, y1 - y0, mh)
    logits = np.einsum('c,chw->hw', coefficients, prototypes[:, py0:py1, px0:px1])
    return _sample(logits, (sx, sy), (ox - px0, oy - py0), (y1 - y0, x1 - x0)) > 0, x0, y0


def _span(offset: float, scale: float, count: int, size: int) -> tuple[int, int]:
    """Prototype pixels [start, stop) that ``count`` samples at i * scale + offset read.

    Integer bounds, so the samples' positions within the crop keep their fractions; at the
    plane's edges the crop ends where the plane does and the edge is replicated as before.
    """
    first, last = offset, offset + (count - 1) * scale
    return (int(np.clip(np.floor(first), 0, size - 1)),
            int(np.clip(np.floor(last) + 2, 1, size)))


def _to_source(region: np.ndarray, x0: int, y0: int, meta: NetworkMeta
               ) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """Return a network-resolution mask region in source pixels: (crop, its window).

    The image's part of the network input (the letterbox undone) resized bilinearly to the
    source and thresholded at one half, only where the region can reach (its box and a
    network pixel around it): that window of the source image, (top, bottom, left, right),
    and the (bottom - top, right - left) bool mask inside it. The mask is empty outside.
    """
    left, top, width, height = meta.content()
    src_h, src_w = meta.letterbox.source_shape
    # The part of the region on the image (not on the letterbox's border) ...
    rx0, ry0 = max(x0, left), max(y0, top)
    rx1 = min(x0 + region.shape[1], left + width)
    ry1 = min(y0 + region.shape[0], top + height)
    if rx1 <= rx0 or ry1 <= ry0:
        return np.zeros((0, 0), bool), (0, 0, 0, 0)
    # ... with one empty network pixel around it, within the image's part: a bilinear sample
    # near its edge sees the zeros outside the box, or the replicated edge of the image.
    cx0, cy0 = max(rx0 - 1, left), max(ry0 - 1, top)
    cx1, cy1 = min(rx1 + 1, left + width), min(ry1 + 1, top + height)
    canvas = np.zeros((cy1 - cy0, cx1 - cx0), np.float32)
    canvas[ry0 - cy0:ry1 - cy0, rx0 - cx0:rx1 - cx0] = region[ry0 - y0:ry1 - y0, rx0 - x0:rx1 - x0]
    ratio_x, ratio_y = width / src_w, height / src_h
    # Source pixels whose sample falls within the canvas (one more for rounding).
    sx0 = max(0, int(np.floor((cx0 - left) / ratio_x)) - 1)
    sy0 = max(0, int(np.floor((cy0 - top) / ratio_y)) - 1)
    sx1 = min(src_w, int(np.ceil((cx1 - left) / ratio_x)) + 1)
    sy1 = min(src_h, int(np.ceil((cy1 - top) / ratio_y)) + 1)
    scale_x, offset_x = _half_pixel(ratio_x, sx0)
    scale_y, offset_y = _half_pixel(ratio_y, sy0)
    sampled = _sample(canvas, (scale_x, scale_y),
                      (offset_x + left - cx0, offset_y + top - cy0), (sy1 - sy0, sx1 - sx0))
    return sampled > 0.5, (sy0, sy1, sx0, sx1)


def instance_masks(coefficients: np.ndarray, prototypes: np.ndarray, boxes: np.ndarray,
                   meta: NetworkMeta) -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """Return (masks, the M detections' indices, windows (M, 4)) in source pixels.

    From coefficients (N, nm), prototypes (nm, mh, mw) and the detections' xyxy ``boxes`` in
    network pixels. Each mask is computed only within its box and kept at the size of its
    window: ``masks[i]`` is the bool mask inside ``windows[i]``, the (top, bottom, left,
    right) of the source pixels its box can reach (``SegmentResult``'s masks and windows);
    the masks take the pixels of the boxes, never detections x image pixels. A detection
    whose mask is empty at network resolution is left out, as Ultralytics leaves it out.
    """
    count = coefficients.shape[0]
    # Each mask's logits only within its box, with NumPy's own loops: a BLAS product over
    # the whole plane would wake BLAS's thread pool, whose threads then spin on the cores
    # the next frame's inference needs.
    coefficients = coefficients.astype(np.float32, copy=False)
    prototypes = prototypes.astype(np.float32, copy=False)
    masks, kept, windows = [], [], []
    for i in range(count):
        region, x0, y0 = _network_mask(coefficients[i], prototypes, boxes[i], meta)
        if region.any():
            mask, window = _to_source(region, x0, y0, meta)
            masks.append(mask)
            kept.append(i)
            windows.append(window)
    return (tuple(masks), np.array(kept, np.int64),
            np.array(windows, np.int64).reshape(-1, 4))


class SegmentationTask(DetectionTask):
    """Pre- and post-processing of YOLO instance segmentation, shared by every runner."""

    name: ClassVar[str] = 'segment'
    #: On a GPU (PyTorch): decode, NMS and masks where the outputs are (YOLOv8 layout);
    #: only the kept detections and their masks come back.
    decodes_device_outputs: ClassVar[bool] = True

    def __init__(self, manifest) -> None:
        super().__init__(manifest)
        #: Positions of the prediction and prototype outputs among the runner's outputs.
        self._positions = (0, 1)

    def preprocess(self, image: np.ndarray, encoding: str,
                   shape: tuple[int, int] | None = None) -> tuple[np.ndarray, NetworkMeta]:
        """Turn a decoded image into (network input of ``shape``, postprocess metadata).

        The input is the detector's: the float tensor, or the u8 image with ``u8_input``.
        """
        shape = tuple(shape or self.manifest.input_size)
        tensor, meta = super().preprocess(image, encoding, shape)
        return tensor, NetworkMeta(meta, (int(shape[0]), int(shape[1])))

    def check_model(self, output_shapes: Sequence[tuple[int, ...]] | None,
                    labels: Sequence[str], output_names: Sequence[str] | None = None) -> None:
        """Refuse, at configure, a model without a segmentation model's two outputs.

        With ``output_names`` (runtimes that name outputs) the predictions must be called
        ``output0`` and the prototypes ``output1``, as Ultralytics exports them; without
        names they are told apart by rank. Predictions of (1, rows, 6 + masks) are an
        NMS-free head's rows; otherwise the detector's checks apply to them, with the mask
        coefficients left out of the class count.
        """
        if output_shapes is None:
            return
        where = f"model '{self.manifest.name}'"
        shapes = [tuple(s) for s in output_shapes]
        if output_names is not None:
            names = list(output_names)
            missing = [n for n in (PREDICTIONS, PROTOTYPES) if n not in names]
            if missing and len(shapes) == 1 and len(shapes[0]) == 3:
                raise ManifestError(
                    f"{where}: `task: segment` needs a segmentation model's two outputs "
                    f"('{PREDICTIONS}' with mask coefficients and '{PROTOTYPES}', the mask "
                    f"prototypes); this model has one, {'x'.join(map(str, shapes[0]))}, as a "
                    'detector has: use `task: detect` for it, or -seg weights')
            if missing:
                raise ManifestError(
                    f"{where}: `task: segment` needs outputs '{PREDICTIONS}' (boxes, classes, "
                    f"mask coefficients) and '{PROTOTYPES}' (mask prototypes), as Ultralytics "
                    f"exports -seg models; this model's outputs are "
                    f"{', '.join(repr(clip(n, 40)) for n in names[:4]) or 'none'}: export "
                    'it with those names')
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
        if len(protos) == 4 and protos[0] == 1 and is_end2end(pred, protos[1]):
            self._settle_layout(True)
            return
        if len(protos) != 4 or protos[0] != 1 or len(pred) != 3 or pred[1] - 4 - protos[1] < 1 \
                or row_extra(pred, 4 + len(labels) + protos[1] if labels else None) is not None:
            raise ManifestError(
                f"{where}: outputs {'x'.join(map(str, pred))} and "
                f"{'x'.join(map(str, protos))} are not predictions (1, 4 + classes + masks, "
                'anchors) or NMS-free rows (1, rows, 6 + masks) and prototypes (1, masks, '
                'height, width) of a segmentation model')
        super().check_model([(pred[0], pred[1] - protos[1], pred[2])], labels)

    def postprocess(self, outputs: list[np.ndarray], meta: NetworkMeta,
                    params: DetectionParams) -> SegmentResult:
        """Decode raw network outputs into detections and masks in source-image pixels."""
        pred, protos = (outputs[i] for i in self._positions)
        if self.end2end is None:
            self.check_model([tuple(pred.shape), tuple(protos.shape)], [])
        classes = pred.shape[1] - 4 - protos.shape[1]
        dets, coefficients = decode_instances(pred, params, classes, bool(self.end2end),
                                              buffers=self.decode_buffers.get())
        on_device = getattr(protos, 'instance_masks', None)
        windows = None  # a device's masks are whole-image ones: their windows the image
        source = tuple(meta.letterbox.source_shape)
        if on_device is not None:  # outputs left on a device: the same steps there
            masks, kept = on_device(coefficients, dets.boxes, meta.shape, meta.content(),
                                    source)
        else:
            masks, kept, windows = instance_masks(coefficients, protos[0], dets.boxes, meta)
        meta.letterbox.to_source(dets.boxes)
        return SegmentResult(dets.boxes[kept], dets.scores[kept], dets.class_ids[kept], masks,
                             windows=windows, shape=source)
