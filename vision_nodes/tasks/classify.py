"""The classification task: a whole image -> each class's probability, the top k published.

Pre-processing is Ultralytics' classify transforms (``classify_transforms``, what its
``predict`` runs on a ``-cls`` model): the image resized so its shorter side is the input
size (torchvision's ``Resize(size)`` on a PIL image: Pillow's antialiased bilinear resize,
:mod:`.resample`, the longer side ``int(size * long / short)``), centre-cropped to the input
size (``CenterCrop``: offsets rounded as Python rounds), then RGB, divided by 255 and
normalised with the manifest's mean and std (Ultralytics': 0 and 1). A non-square input size
is resized to exactly that size, as Ultralytics does. Where the runner converts the image
itself (``u8_input``) the crop goes to it as 8-bit BGR, as the detector's letterbox does.

The model's output (1, classes) is read as probabilities (Ultralytics' classify head ends in
a softmax; its exports too). The result keeps every class's probability and the ``top_k``
highest, highest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ..images import U8_INPUT_ORDER, ImageConversionError
from ..limits import MAX_LABELS
from ..manifest import ManifestError, ModelManifest, field_error
from ..param_spec import ParamSpec
from ..text import clip, show
from .preprocess import _convert_planes, channel_map
from .resample import compiled_pass, resized_crop


@dataclass(frozen=True)
class ClassifyParams:
    """How many classes a result lists (``classification_top_k``)."""

    top_k: int = 5


@dataclass(frozen=True)
class CropMeta:
    """What pre-processing did: the source's (height, width) and the resized size."""

    source_shape: tuple[int, int]
    resized: tuple[int, int]


@dataclass
class Classification:
    """One image's class probabilities and its ``top_k`` classes, highest first."""

    #: (classes,) float32: every class's probability, in class-index order.
    probs: np.ndarray
    #: (k,) int64 class indices and (k,) float32 their probabilities, highest first.
    class_ids: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return int(self.class_ids.shape[0])


def crop_geometry(source_hw: tuple[int, int], size: tuple[int, int]
                  ) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """Return (resized (h, w), crop window (top, left, height, width)) as torchvision's.

    A square ``size`` resizes the shorter side to it (the longer ``int(size * long /
    short)``); another size is resized to exactly. The crop is ``CenterCrop``'s.
    """
    height, width = (int(v) for v in source_hw)
    if size[0] == size[1]:
        short, long = (width, height) if width <= height else (height, width)
        new_long = int(size[0] * long / short)
        resized = (new_long, size[0]) if width <= height else (size[0], new_long)
    else:
        resized = (int(size[0]), int(size[1]))
    top = int(round((resized[0] - size[0]) / 2.0))
    left = int(round((resized[1] - size[1]) / 2.0))
    return resized, (top, left, int(size[0]), int(size[1]))


def _colour_planes(image: np.ndarray) -> np.ndarray:
    """(H, W, C) uint8 with the channels a crop needs: all but an alpha (grey: one)."""
    if image.ndim == 2:
        return image[:, :, None]
    return image[:, :, :3] if image.shape[2] == 4 else image


class ClassifyTask:
    """Pre- and post-processing of whole-image classification, shared by every runner."""

    name: ClassVar[str] = 'classify'
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec('classification_top_k', 5,
                  'How many classes each classification lists, highest probability first '
                  "(at most the model's class count).", int_range=(1, MAX_LABELS),
                  applies='live'),
    )
    #: ``preprocess`` hands the 8-bit crop to a runner that converts it itself.
    supports_u8_input: ClassVar[bool] = True

    @classmethod
    def parse_manifest_blocks(cls, source: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """No block of its own; refuse a letterboxed input (classify crops, never pads)."""
        prep = data.get('preprocessing')
        given = isinstance(prep, dict) and 'letterbox' in prep
        letterbox = prep['letterbox'] if given else True
        if letterbox is not False:
            raise field_error(source, 'preprocessing.letterbox',
                              f"{show(letterbox) if given else 'true (the default)'}: a "
                              "classify model's input is resized and centre-cropped as "
                              "Ultralytics' classify transforms do, never letterboxed: give "
                              '`letterbox: false`')
        return {}

    @classmethod
    def param_defaults(cls, manifest: ModelManifest) -> dict[str, Any]:
        """Each parameter's spec default (a manifest has no classify thresholds)."""
        return {spec.name: spec.default for spec in cls.params}

    def __init__(self, manifest: ModelManifest) -> None:
        self.manifest = manifest
        self.u8_input = False
        #: The class count (settled by :meth:`check_model`) and where ``output0`` is.
        self._classes: int | None = len(manifest.labels) if manifest.labels else None
        self._at = 0
        compiled_pass()  # Numba's resize compiled (or loaded) now, at configure, not on a frame

    def make_params(self, values: Mapping[str, Any]) -> ClassifyParams:
        """Parameters from values keyed by spec name (missing: the default)."""
        return ClassifyParams(int(values.get('classification_top_k', 5)))

    def preprocess(self, image: np.ndarray, encoding: str,
                   shape: tuple[int, int] | None = None) -> tuple[np.ndarray, CropMeta]:
        """Turn a decoded image into (network input of ``shape``, metadata).

        The NCHW float32 tensor in the model's channel order, normalised; with ``u8_input``
        the (1, H, W, 3) 8-bit crop in ``U8_INPUT_ORDER`` instead.
        """
        size = tuple(int(v) for v in (shape or self.manifest.input_size))
        prep = self.manifest.preprocessing
        channels = channel_map(encoding, U8_INPUT_ORDER if self.u8_input else prep.color_order)
        if image.dtype != np.uint8:
            raise ImageConversionError(f'encoding {show(encoding)} has {image.dtype} pixels; '
                                       'colour models take 8-bit images')
        resized, window = crop_geometry(image.shape[:2], size)
        crop = resized_crop(_colour_planes(image), resized, window, prep.interpolation)
        meta = CropMeta((int(image.shape[0]), int(image.shape[1])), resized)
        if self.u8_input:
            if channels == (0, 1, 2) and crop.shape[2] == 3:  # already in the runner's order
                return np.ascontiguousarray(crop)[None], meta
            out = np.empty((1, size[0], size[1], 3), np.uint8)
            for dst, src in enumerate(channels):
                out[0, :, :, dst] = crop[:, :, src]
            return out, meta
        tensor = np.empty((1, 3) + size, np.float32)
        _convert_planes(crop, channels, prep, tensor[0])
        return tensor, meta

    def check_model(self, output_shapes: Sequence[tuple[int, ...]] | None,
                    labels: Sequence[str], output_names: Sequence[str] | None = None) -> None:
        """Refuse, at configure, a model whose output is not (1, classes) or its labels'.

        The output ``output0`` (by name where the runtime names outputs; Ultralytics' name)
        holds one probability per class; when class names are known, one per class.
        """
        if output_shapes is None:
            return
        where = f"model '{self.manifest.name}'"
        if output_names is not None and 'output0' not in output_names:
            raise ManifestError(
                f"{where}: `task: classify` reads the output 'output0' (class probabilities), "
                "as Ultralytics exports -cls models; this model's outputs are "
                f"{', '.join(repr(clip(n, 40)) for n in output_names[:4]) or 'none'}")
        self._at = list(output_names).index('output0') if output_names is not None else 0
        first = tuple(output_shapes[self._at]) if output_shapes else ()
        if len(first) != 2 or first[0] != 1 or first[1] < 1:
            shown = 'x'.join(map(str, first)) or 'nothing'
            raise ManifestError(
                f'{where}: the model outputs {shown}, not class probabilities (1, classes): '
                'use `task: classify` with Ultralytics -cls models')
        if labels and len(labels) != first[1]:
            origin = ('the manifest lists' if self.manifest.labels
                      else "the model's own metadata lists")
            raise ManifestError(
                f'{where}: field `labels`: {origin} {len(labels)} class names but the model '
                f'scores {first[1]} classes: list exactly {first[1]} names in `labels`')
        self._classes = first[1]

    def postprocess(self, outputs: list[np.ndarray], meta: CropMeta,
                    params: ClassifyParams) -> Classification:
        """Return every class's probability and the ``top_k`` highest, highest first."""
        probs = np.asarray(outputs[self._at], np.float32).reshape(-1)
        top = np.argsort(-probs, kind='stable')[:max(1, params.top_k)]
        return Classification(probs, top.astype(np.int64), probs[top])
