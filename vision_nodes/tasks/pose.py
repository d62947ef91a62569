"""The pose task: YOLO-pose output → person boxes with keypoints, in source pixels.

An Ultralytics ``-pose`` model has one output, (1, 4 + classes + K * D, anchors): the
detector's rows, then per keypoint its x and y in network pixels and (D = 3) its confidence,
already decoded by the head. An NMS-free (YOLO26) model's output is (1, rows, 6 + K * D)
instead: detections after its own top-k, each followed by its keypoints (:mod:`.end2end`).
Boxes are decoded as for ``detect`` (:func:`.detect.decode_instances`: suppressed, or read
from the rows); the kept detections' keypoints are mapped back to source
pixels with the letterbox undone and clipped to the image, as Ultralytics' ``scale_coords``
does.

Manifest blocks: ``keypoints`` (the K names, in the model's order; default: the COCO-17 names
when the model has 17 keypoints, else ``kpt_0`` …) and ``skeleton`` (pairs of keypoint
indices, for drawing; default: the COCO skeleton with the COCO names, else none).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ..limits import MAX_KEYPOINTS, MAX_LABEL_CHARS
from ..manifest import ManifestError, ModelManifest, expect, field_error
from ..text import clip, show
from .detect import DetectionParams, DetectionTask, decode_instances
from .end2end import row_extra
from .instances import COCO_KEYPOINTS, COCO_SKELETON, PoseResult
from .preprocess import LetterboxMeta


def _parse_names(source: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    expect(source, 'keypoints', value, list, 'a list of keypoint names')
    if not 1 <= len(value) <= MAX_KEYPOINTS:
        raise field_error(source, 'keypoints', f'lists {len(value)} names; a pose model has '
                          f'1..{MAX_KEYPOINTS} keypoints')
    for i, name in enumerate(value):
        expect(source, f'keypoints[{i}]', name, str, 'a name')
        if not name or len(name) > MAX_LABEL_CHARS:
            raise field_error(source, f'keypoints[{i}]', f'{show(name, 40)} is not a name of '
                              f'1..{MAX_LABEL_CHARS} characters')
    if len(set(value)) != len(value):
        raise field_error(source, 'keypoints', 'names a keypoint twice: list each name once')
    return tuple(value)


def _parse_skeleton(source: str, value: Any, count: int | None
                    ) -> tuple[tuple[int, int], ...] | None:
    if value is None:
        return None
    expect(source, 'skeleton', value, list, 'a list of [a, b] keypoint index pairs')
    pairs = []
    for i, pair in enumerate(value):
        where = f'skeleton[{i}]'
        expect(source, where, pair, list, 'a pair [a, b] of keypoint indices')
        if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                     for v in pair):
            raise field_error(source, where, f'{show(pair, 40)} is not a pair [a, b] of '
                              'keypoint indices (0-based integers)')
        top = (count or MAX_KEYPOINTS) - 1
        if not all(0 <= v <= top for v in pair):
            raise field_error(source, where, f'{show(pair, 40)} names a keypoint outside '
                              f'0..{top}' + (' (the `keypoints` listed)' if count else ''))
        pairs.append((int(pair[0]), int(pair[1])))
    return tuple(pairs)


def default_names(count: int) -> tuple[str, ...]:
    """Keypoint names when the manifest lists none: COCO-17 for 17, else ``kpt_<i>``."""
    return COCO_KEYPOINTS if count == len(COCO_KEYPOINTS) else \
        tuple(f'kpt_{i}' for i in range(count))


class PoseTask(DetectionTask):
    """Pre- and post-processing of YOLO pose estimation, shared by every runner."""

    name: ClassVar[str] = 'pose'
    #: Decoded on the host, also on a GPU: copying this small output back costs less than
    #: the device decode's syncs and launches (measured: docs/benchmarks.md).
    decodes_device_outputs: ClassVar[bool] = False

    @classmethod
    def parse_manifest_blocks(cls, source: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """Parse ``keypoints`` (names) and ``skeleton`` (index pairs); both optional."""
        names = _parse_names(source, data.get('keypoints'))
        skeleton = _parse_skeleton(source, data.get('skeleton'),
                                   len(names) if names else None)
        return {'keypoints': names, 'skeleton': skeleton}

    def __init__(self, manifest: ModelManifest) -> None:
        super().__init__(manifest)
        self._listed: tuple[str, ...] | None = manifest.block('keypoints')
        #: Keypoint names and values per keypoint (x, y[, confidence]); known at configure.
        self.names: tuple[str, ...] = self._listed or ()
        self.dims = 3
        self.skeleton: tuple[tuple[int, int], ...] = manifest.block('skeleton') or ()
        self._classes: int | None = len(manifest.labels) if manifest.labels else None
        #: Position of ``output0`` among the runner's outputs.
        self._at = 0

    def _layout(self, channels: int, classes: int | None) -> tuple[int, int, int] | None:
        """(classes, keypoints, values per keypoint) of a ``channels``-row output, or None.

        The class count is the labels' when known, else one (``person``) unless the
        manifest's ``keypoints`` settle it; D = 3 is tried before D = 2.
        """
        count = len(self._listed) if self._listed else None
        for dims in (3, 2):
            if classes is None and count is not None:
                found = channels - 4 - count * dims
            else:
                found = 1 if classes is None else classes
            extra = channels - 4 - found
            if found >= 1 and extra > 0 and extra % dims == 0 and \
                    (count is None or extra == count * dims):
                return found, extra // dims, dims
        return None

    def _row_layout(self, extra: int | None) -> tuple[int, int] | None:
        """(keypoints, values per keypoint) of NMS-free rows with ``extra`` values, or None."""
        count = len(self._listed) if self._listed else None
        for dims in (3, 2):
            found = count or (extra or 0) // dims
            if extra and 1 <= found <= MAX_KEYPOINTS and extra == found * dims:
                return found, dims
        return None

    def check_model(self, output_shapes: Sequence[tuple[int, ...]] | None,
                    labels: Sequence[str], output_names: Sequence[str] | None = None) -> None:
        """Refuse, at configure, a model whose output is not a pose model's for its labels.

        The output is (1, 4 + classes + K * D, anchors) with D = 3 (x, y, confidence) or 2;
        the classes are the labels' count (one, ``person``, when unknown), K the manifest's
        ``keypoints`` count when it lists them; an NMS-free head's rows are (1, rows, 6 + K *
        D) instead. Keypoint names are settled here.
        """
        if output_shapes is None:
            return
        where = f"model '{self.manifest.name}'"
        if output_names is not None and 'output0' not in output_names:
            raise ManifestError(
                f"{where}: `task: pose` reads the output 'output0' (boxes, classes, keypoints), "
                "as Ultralytics exports -pose models; this model's outputs are "
                f"{', '.join(repr(clip(n, 40)) for n in output_names[:4]) or 'none'}")
        self._at = list(output_names).index('output0') if output_names is not None else 0
        first = tuple(output_shapes[self._at]) if output_shapes else ()
        classes = len(labels) if labels else self._classes
        # Known classes and listed keypoints say how many rows anchors have (at 32 x 32 pixels
        # fewer anchors than rows: the shape of NMS-free rows).
        known = [4 + classes + len(self._listed) * dims for dims in (3, 2)] \
            if classes and self._listed else []
        extra = row_extra(first, first[1] if first[1:2] and first[1] in known else None)
        rows = self._row_layout(extra)
        if rows is not None:
            self._settle_layout(True)
            self._settle_names(*rows)
            return
        layout = self._layout(first[1], classes) if len(first) == 3 and first[0] == 1 and \
            extra is None else None
        if layout is None:
            shown = 'x'.join(map(str, first)) or 'nothing'
            listed = f'{len(self._listed)} keypoints (`keypoints`)' if self._listed else \
                'keypoints'
            raise ManifestError(
                f'{where}: the model outputs {shown}, not a pose output (1, 4 + '
                f"{classes if classes is not None else 'classes'} + {listed} x 3, anchors), "
                f'nor NMS-free rows (1, rows, 6 + {listed} x 3): use `task: pose` with '
                'Ultralytics -pose models, and list their keypoint names in `keypoints`')
        self._classes, count, dims = layout
        super().check_model([(1, 4 + self._classes, first[2])], labels)
        self._settle_names(count, dims)

    def _settle_names(self, count: int, dims: int) -> None:
        """Keep the layout's values per keypoint; default names and skeleton for ``count``."""
        self.dims = dims
        if not self._listed:
            self.names = default_names(count)
            if self.manifest.block('skeleton') is None and self.names == COCO_KEYPOINTS:
                self.skeleton = COCO_SKELETON

    def postprocess(self, outputs: list[np.ndarray], meta: LetterboxMeta,
                    params: DetectionParams) -> PoseResult:
        """Decode the raw output into boxes and keypoints in source-image pixels."""
        pred = outputs[self._at]
        if self.end2end is None or not self.names:
            self.check_model([tuple(pred.shape)], [])
        dets, raw = decode_instances(pred, params, self._classes or 0, bool(self.end2end),
                                     buffers=self.decode_buffers.get())
        count = len(self.names)
        raw = raw[:, :count * self.dims].reshape(-1, count, self.dims).astype(np.float32)
        keypoints = np.ones((raw.shape[0], count, 3), np.float32)
        keypoints[:, :, :self.dims] = raw
        meta.to_source(dets.boxes)
        _points_to_source(keypoints, meta)
        return PoseResult(dets.boxes, dets.scores, dets.class_ids, keypoints, self.names,
                          self.skeleton)


def _points_to_source(keypoints: np.ndarray, meta: LetterboxMeta) -> None:
    """Map (N, K, 3) keypoints' x, y from network to clipped source pixels, in place."""
    height, width = meta.source_shape
    xs, ys = keypoints[:, :, 0], keypoints[:, :, 1]
    xs -= meta.pad[0]
    ys -= meta.pad[1]
    xs /= meta.gain[0]
    ys /= meta.gain[1]
    np.clip(xs, 0, width, out=xs)
    np.clip(ys, 0, height, out=ys)
