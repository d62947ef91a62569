"""The depth task: a dense network output → a float32 depth map at the source resolution.

Preprocessing is the shared :func:`~.preprocess.prepare` (stretch or letterbox, per the
manifest), or :func:`~.preprocess.prepare_u8` for a runner that takes the u8 image and
converts it inside the model, as for detection. Postprocessing undoes it exactly: the
output is brought to the network input size (if the network gives another size), the
letterbox border is cut off, and the placed region is resized to the source image with the
same pixel-centre convention OpenCV used to shrink the source (``cv2.resize``, bilinear):
network pixel ``i`` sits at source coordinate
``(i + 0.5) / gain - 0.5``. Invalid pixels become NaN before any resampling, so they never
bleed into valid values as plausible numbers.

Units (the manifest's ``depth`` block, parsed here into a :class:`DepthSpec`): metric models
give metres along the optical axis; relative models give unitless values whose direction
``output`` names ('disparity': larger is nearer; 'depth': larger is farther).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import cv2
import numpy as np

from ..limits import depth_range_problem
from ..manifest import ModelManifest, check_keys, choice, expect, field_error
from ..param_spec import ParamSpec
from .preprocess import LetterboxMeta, prepare_input

DEPTH_KINDS = ('metric', 'relative')
DEPTH_OUTPUTS = ('depth', 'disparity')

#: Colour maps for the colourised image (``depth_colormap``); near is the hot end of each.
COLORMAPS = {
    'turbo': cv2.COLORMAP_TURBO,
    'inferno': cv2.COLORMAP_INFERNO,
    'magma': cv2.COLORMAP_MAGMA,
    'viridis': cv2.COLORMAP_VIRIDIS,
    'jet': cv2.COLORMAP_JET,
    'gray': None,
}
#: Per-image colour range: these percentiles of the valid pixels.
AUTO_PERCENTILES = (2.0, 98.0)
#: The per-image range is estimated on about this many pixels (a regular subsample).
_RANGE_SAMPLES = 1 << 14
_LUTS: dict[str, np.ndarray] = {}


def _rgbx_lut(colormap: str) -> np.ndarray:
    """(256,) uint32 table: each index's RGB colour (and a fourth byte) packed in one word."""
    lut = _LUTS.get(colormap)
    if lut is None:
        ramp = np.arange(256, dtype=np.uint8)[:, None]
        cmap = COLORMAPS[colormap]
        bgr = cv2.cvtColor(ramp, cv2.COLOR_GRAY2BGR) if cmap is None else \
            cv2.applyColorMap(ramp, cmap)
        rgbx = np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGBA)[:, 0])
        lut = _LUTS[colormap] = rgbx.view(np.uint32)[:, 0].copy()
    return lut


@dataclass(frozen=True)
class DepthSpec:
    """What a depth model's output means (manifest block ``depth``)."""

    #: 'metric': metres along the optical axis; 'relative': unitless, known only up to scale
    #: (and, for disparity, shift).
    kind: str
    #: 'depth': larger values are farther; 'disparity': larger values are nearer (inverse
    #: depth, as Depth Anything's relative models give it).
    output: str
    #: Metric models: the farthest depth the model reports, in metres; larger values are
    #: published as +Inf (REP 117: beyond range). None: no limit.
    max_depth: float | None = None


def _max_depth(source: str, kind: str, value: Any) -> float | None:
    """Return the block's ``max_depth``: None, or a checked positive number of metres."""
    if value is None:
        return None
    if kind != 'metric':
        raise field_error(source, 'depth.max_depth', 'applies to metric models only')
    problem = depth_range_problem(value)
    if problem:
        raise field_error(source, 'depth.max_depth', f'{problem}: give the farthest depth '
                          'the model reports, a positive number of metres (or leave it out)')
    return float(value)


def parse_depth_block(source: str, data: Any) -> DepthSpec:
    """Validate a depth manifest's ``depth`` block (required) into a :class:`DepthSpec`."""
    if data is None:
        raise field_error(source, 'depth', 'missing (required for task depth): give at '
                          'least `kind: metric` or `kind: relative`')
    expect(source, 'depth', data, dict, 'a mapping')
    check_keys(source, 'depth', data, ('kind', 'output', 'max_depth'))
    kind = choice(source, 'depth.kind', data.get('kind'), DEPTH_KINDS)
    output = data.get('output', 'depth' if kind == 'metric' else 'disparity')
    output = choice(source, 'depth.output', output, DEPTH_OUTPUTS)
    if kind == 'metric' and output != 'depth':
        raise field_error(source, 'depth.output', 'a metric model must output depth in '
                          'metres (disparity in pixels would need the stereo baseline and '
                          'focal length)')
    return DepthSpec(kind=kind, output=output,
                     max_depth=_max_depth(source, kind, data.get('max_depth')))


class DepthOutputError(ValueError):
    """A network output that is not a single-channel depth map; the message names its shape."""


@dataclass
class DepthResult:
    """A depth map for one image, in source-image pixels."""

    #: (height, width) float32 at the source image's resolution; NaN where invalid, +Inf
    #: beyond a metric model's ``max_depth``.
    depth: np.ndarray
    #: True: metres along the optical axis (REP 118). False: unitless relative values.
    metric: bool
    #: 'depth' (larger is farther) or 'disparity' (larger is nearer).
    output: str

    @property
    def shape(self) -> tuple[int, int]:
        """(height, width) of the depth map."""
        return (int(self.depth.shape[0]), int(self.depth.shape[1]))


@dataclass(frozen=True)
class DepthParams:
    """How the colourised image is drawn (live)."""

    color_min: float = 0.0
    color_max: float = 0.0
    colormap: str = 'turbo'

    @property
    def auto_range(self) -> bool:
        """Whether the colour range comes from each image (``color_max <= color_min``)."""
        return self.color_max <= self.color_min


@dataclass(frozen=True)
class DepthMeta:
    """What preprocessing did to one image: the letterbox geometry and the network input size."""

    letterbox: LetterboxMeta
    input_shape: tuple[int, int]  # (height, width) of the network input


def depth_map_2d(output: np.ndarray) -> np.ndarray:
    """Return the (H, W) map of one image from a (1, 1, H, W), (1, H, W) or (H, W) output."""
    squeezed = output
    while squeezed.ndim > 2 and squeezed.shape[0] == 1:
        squeezed = squeezed[0]
    if squeezed.ndim != 2 or min(squeezed.shape) < 1:
        raise DepthOutputError(
            f'depth output of shape {tuple(output.shape)} is not one single-channel map '
            '(expected (1, 1, H, W), (1, H, W) or (H, W))')
    return squeezed


def mark_invalid(depth: np.ndarray, metric: bool) -> np.ndarray:
    """Return ``depth`` as float32 with NaN where no value is valid (the input is not changed).

    Non-finite values are invalid; for metric depth also values <= 0 (nothing lies at or
    behind the camera centre). A relative disparity of 0 is valid (infinitely far).
    """
    depth = depth.astype(np.float32, copy=False)
    valid = (depth > 0) & (depth < np.inf) if metric else np.isfinite(depth)
    if valid.all():
        return depth
    return np.where(valid, depth, np.float32(np.nan))


def to_source(depth: np.ndarray, meta: DepthMeta) -> np.ndarray:
    """Map a network-space map (any size) to a float32 map of the source image's size.

    A map not at the network input size is first resized to it (bilinear, pixel centres
    aligned as OpenCV aligns them); then the letterbox border is cut off and the placed region
    resized to the source. NaN spreads to the source pixels it touches.
    """
    net_h, net_w = meta.input_shape
    if depth.shape != (net_h, net_w):
        depth = cv2.resize(depth, (net_w, net_h), interpolation=cv2.INTER_LINEAR)
    box = meta.letterbox
    src_h, src_w = box.source_shape
    # The placed region, with the rounding of preprocess._place.
    new_w = min(net_w, int(round(src_w * box.gain[0])))
    new_h = min(net_h, int(round(src_h * box.gain[1])))
    left, top = int(box.pad[0]), int(box.pad[1])
    region = depth[top:top + new_h, left:left + new_w]
    if region.shape == (src_h, src_w):
        # A copy: the result must not share memory with a runner's output buffer.
        return np.array(region, dtype=np.float32, order='C')
    return cv2.resize(region, (src_w, src_h), interpolation=cv2.INTER_LINEAR)


def depth_range(result: DepthResult, params: DepthParams) -> tuple[float, float]:
    """Colour range (low, high) in the map's units: the parameters', or per-image percentiles.

    The per-image range is the :data:`AUTO_PERCENTILES` of the finite pixels of a regular
    subsample; a map with no finite pixel gives (0, 1).
    """
    if not params.auto_range:
        return float(params.color_min), float(params.color_max)
    depth = result.depth
    step = max(1, int(math.sqrt(depth.size / _RANGE_SAMPLES)))
    sample = depth[::step, ::step]
    sample = sample[np.isfinite(sample)]
    if sample.size == 0:
        return 0.0, 1.0
    low, high = np.percentile(sample, AUTO_PERCENTILES)
    return float(low), float(high)


def colorize(result: DepthResult, params: DepthParams) -> np.ndarray:
    """Return an (H, W, 3) uint8 RGB picture of the depth map for people.

    Values are scaled linearly over :func:`depth_range` (clipped outside it) and coloured with
    ``params.colormap``, nearer at the hot (bright) end whatever the output's direction; NaN
    pixels are black, +Inf ones get the far end's colour.
    """
    low, high = depth_range(result, params)
    span = max(high - low, 1e-12)
    depth = result.depth
    # index = 255 * (near-ness in [0, 1]); addWeighted saturates to 0..255 and rounds.
    if result.output == 'disparity':
        alpha, beta = 255.0 / span, -255.0 * low / span
    else:
        alpha, beta = -255.0 / span, 255.0 * high / span
    index = cv2.addWeighted(depth, alpha, depth, 0.0, beta, dtype=cv2.CV_8U)
    # One 32-bit table look-up per pixel, then drop the fourth byte: one pass over the
    # image instead of three (cv2.applyColorMap, cv2.LUT work per channel).
    rgbx = np.take(_rgbx_lut(params.colormap), index)
    rgb = cv2.cvtColor(rgbx.view(np.uint8).reshape(index.shape + (4,)), cv2.COLOR_RGBA2RGB)
    invalid = np.isnan(depth)
    if invalid.any():
        rgb[invalid] = 0
    return rgb


class DepthTask:
    """Pre- and post-processing for monocular depth estimation, shared by every runner."""

    name: ClassVar[str] = 'depth'
    params: ClassVar[tuple[ParamSpec, ...]] = (
        ParamSpec('depth_color_min', 0.0,
                  "Low end of the colourised depth image's range, in the depth map's units "
                  '(metric models: metres). With depth_color_max <= depth_color_min (both 0, '
                  'the default) each image uses its own 2nd..98th percentiles.',
                  applies='live'),
        ParamSpec('depth_color_max', 0.0,
                  "High end of the colourised depth image's range (see depth_color_min).",
                  applies='live'),
        ParamSpec('depth_colormap', 'turbo',
                  'Colour map of the colourised depth image (near is the hot end).',
                  choices=tuple(COLORMAPS), applies='live'),
    )

    @classmethod
    def parse_manifest_blocks(cls, source: str, data: Mapping[str, Any]
                              ) -> dict[str, DepthSpec]:
        """Parse the ``depth`` block of a depth manifest (required)."""
        return {'depth': parse_depth_block(source, data.get('depth'))}

    @classmethod
    def param_defaults(cls, manifest: ModelManifest) -> dict[str, Any]:
        """Return the spec defaults: a depth manifest sets none of the live parameters."""
        return {spec.name: spec.default for spec in cls.params}

    #: ``preprocess`` can hand the resized u8 image (``prepare_u8``) to a runner that
    #: converts it itself (the manifest's scale, mean and std inside the model); the pipeline
    #: sets ``u8_input`` when the runner does.
    supports_u8_input: ClassVar[bool] = True

    def __init__(self, manifest: ModelManifest) -> None:
        self.u8_input = False
        spec = manifest.block('depth')
        if spec is None:
            raise ValueError(f"model '{manifest.name}': a depth model's manifest needs a "
                             '`depth` block (kind: metric | relative)')
        self.manifest = manifest
        self.spec: DepthSpec = spec

    @property
    def metric(self) -> bool:
        """Whether the model gives metres (REP 118 ``depth``) or relative values."""
        return self.spec.kind == 'metric'

    def make_params(self, values: Mapping[str, Any]) -> DepthParams:
        """Colour settings from parameter values keyed by spec name (missing: the default)."""
        low, high, cmap = (values.get(spec.name, spec.default) for spec in self.params)
        return DepthParams(float(low), float(high), str(cmap))

    def preprocess(self, image: np.ndarray, encoding: str,
                   shape: tuple[int, int] | None = None) -> tuple[np.ndarray, DepthMeta]:
        """Turn a decoded image into (NCHW float32 tensor of ``shape``, postprocess metadata).

        ``shape`` (height, width) defaults to the manifest's ``input_size``. With
        ``u8_input`` the network input is the resized (or letterboxed) u8 NHWC image instead.
        """
        shape = tuple(shape or self.manifest.input_size)
        tensor, box = prepare_input(image, encoding, shape, self.manifest.preprocessing,
                                    self.u8_input)
        return tensor, DepthMeta(box, (int(shape[0]), int(shape[1])))

    def postprocess(self, outputs: list[np.ndarray], meta: DepthMeta,
                    params: DepthParams | None = None) -> DepthResult:
        """Turn the network's output into a depth map at the source resolution.

        Invalid values become NaN first; the map is resized to the source exactly undoing
        preprocessing; metric values above ``max_depth`` become +Inf. ``params`` only
        matter to :func:`colorize`.
        """
        if len(outputs) != 1:
            raise DepthOutputError(f'a depth model has one output, this one gave {len(outputs)}')
        depth = to_source(mark_invalid(depth_map_2d(outputs[0]), self.metric), meta)
        if self.metric and self.spec.max_depth is not None:
            depth[depth > self.spec.max_depth] = np.inf
        return DepthResult(depth, self.metric, self.spec.output)

    def colorize(self, result: DepthResult, params: DepthParams) -> np.ndarray:
        """Return the (H, W, 3) uint8 RGB picture of ``result`` (see :func:`colorize`)."""
        return colorize(result, params)
