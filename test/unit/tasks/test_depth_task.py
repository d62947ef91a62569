"""The depth task without a network: manifests, pre/post-processing, units, NaN, colours.

Postprocessing is checked against closed forms: a network output that is a linear function of
the network pixel coordinates must come back as the same function of the source coordinates
mapped through the preprocessing resize (OpenCV's pixel-centre convention), which bilinear
resampling reproduces exactly away from the borders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import yaml

from model_manifests import model_manifest
from vision_nodes.manifest import ManifestError
from vision_nodes.tasks import create_task, default_values, load_manifest, task_class
from vision_nodes.tasks.depth import (
    AUTO_PERCENTILES,
    COLORMAPS,
    DepthMeta,
    DepthOutputError,
    DepthParams,
    DepthResult,
    DepthSpec,
    DepthTask,
    colorize,
    depth_range,
)

ROOT = Path(__file__).resolve().parents[3]
MODELS = ROOT / 'config' / 'models'
#: The depth manifest the tests change (parsed as test.yaml).
DEPTH = {'name': 'd', 'task': 'depth', 'weights': 'w.pt', 'architecture': 'ultralytics',
         'input_size': [64, 96], 'backends': ['cpu', 'onnx'],
         'preprocessing': {'letterbox': False}, 'depth': {'kind': 'metric'}}


def _task(**changes: Any) -> DepthTask:
    return DepthTask(model_manifest(DEPTH, **changes))


def _run(task: DepthTask, source_hw: tuple[int, int], output: np.ndarray,
         shape: tuple[int, int] | None = None) -> DepthResult:
    image = np.zeros(source_hw + (3,), np.uint8)
    _, meta = task.preprocess(image, 'rgb8', shape)
    return task.postprocess([output], meta, task.make_params({}))


def _ramp(shape: tuple[int, int], a: float, b: float, c: float) -> np.ndarray:
    """a * x + b * y + c over a (height, width) grid of pixel indices, as (1, 1, H, W)."""
    y, x = np.mgrid[0:shape[0], 0:shape[1]].astype(np.float64)
    return (a * x + b * y + c).astype(np.float32)[None, None]


def _net_coordinate(src: np.ndarray, src_size: int, placed: int, offset: int,
                    net_size: int) -> np.ndarray:
    """Network coordinate of source pixel centres ``src`` (OpenCV's resize convention)."""
    pos = offset + (src + 0.5) * (placed / src_size) - 0.5
    return np.clip(pos, offset, offset + placed - 1).clip(0, net_size - 1)


# -- manifests -------------------------------------------------------------------------------

def test_shipped_depth_manifests():
    small = load_manifest(MODELS / 'depth_anything_v2_small.yaml')
    assert (small.task, small.architecture, small.stride) == ('depth', 'transformers', 14)
    assert small.input_size == (518, 518) and small.weights == 'depth_anything_v2_small'
    assert small.preprocessing.letterbox is False
    assert small.preprocessing.interpolation == 'cubic'
    assert small.preprocessing.mean == (0.485, 0.456, 0.406)
    assert small.preprocessing.std == (0.229, 0.224, 0.225)
    assert small.block('depth') == DepthSpec('relative', 'disparity', None)
    metric = load_manifest(MODELS / 'depth_anything_v2_metric_indoor_small.yaml')
    assert metric.block('depth') == DepthSpec('metric', 'depth', 20.0)
    yolo = load_manifest(MODELS / 'yolo26n_depth.yaml')
    assert (yolo.architecture, yolo.stride, yolo.weights) == (
        'ultralytics', 32, 'yolo26n-depth.pt')
    assert yolo.preprocessing.letterbox is False
    assert (yolo.block('depth').kind, yolo.block('depth').output) == ('metric', 'depth')
    for manifest in (small, metric, yolo):
        assert {'cpu', 'onnx', 'openvino', 'tensorrt'} <= set(manifest.backends)
        assert isinstance(create_task(manifest), DepthTask)


def test_detect_manifests_have_no_depth_block():
    manifest = load_manifest(MODELS / 'yolov8n.yaml')
    assert manifest.block('depth') is None and manifest.stride == 32


@pytest.mark.parametrize('changes, field, text', [
    ({'depth': None}, '`depth`', 'required for task depth'),
    ({'task': 'detect', 'depth': {'kind': 'metric'}}, '`depth`', 'only depth models'),
    ({'depth': {'kind': 'absolute'}}, '`depth.kind`', 'metric, relative'),
    ({'depth': {}}, '`depth.kind`', 'metric, relative'),
    ({'depth': {'kind': 'metric', 'output': 'disparity'}}, '`depth.output`', 'baseline'),
    ({'depth': {'kind': 'relative', 'output': 'inverse'}}, '`depth.output`', 'depth, disparity'),
    ({'depth': {'kind': 'relative', 'max_depth': 10}}, '`depth.max_depth`', 'metric models'),
    ({'depth': {'kind': 'metric', 'max_depth': -1}}, '`depth.max_depth`', 'positive'),
    ({'depth': {'kind': 'metric', 'max_depth': 0}}, '`depth.max_depth`', 'not positive'),
    ({'depth': {'kind': 'metric', 'max_depth': float('nan')}}, '`depth.max_depth`', 'finite'),
    ({'depth': {'kind': 'metric', 'max_depth': 1e7}}, '`depth.max_depth`', 'larger than'),
    ({'depth': {'kind': 'metric', 'max_depth': True}}, '`depth.max_depth`', 'not a number'),
    ({'depth': {'kind': 'metric', 'max_depth': 'far'}}, '`depth.max_depth`', 'metres'),
    ({'depth': {'kind': 'metric', 'scale': 2}}, '`depth.scale`', 'unknown key'),
    ({'depth': 'metric'}, '`depth`', 'a mapping'),
    ({'architecture': 'transformers', 'input_size': [512, 512]}, '`input_size[0]`',
     'multiple of 14'),
    ({'input_size': [518, 518]}, '`input_size[0]`', 'multiple of 32'),
    ({'stride': 0}, '`stride`', 'outside'),
    ({'stride': 1.5}, '`stride`', 'integer'),
    ({'preprocessing': {'interpolation': 'nearest'}}, '`preprocessing.interpolation`',
     'linear, cubic'),
])
def test_bad_depth_manifests_name_the_field(changes, field, text):
    with pytest.raises(ManifestError) as info:
        model_manifest(DEPTH, **changes)
    assert field in str(info.value) and text in str(info.value)
    assert str(info.value).startswith('test.yaml:')


def test_stride_field_allows_other_input_multiples(tmp_path):
    """An exported Depth Anything .onnx declares its patch size as the stride."""
    data = {'name': 'da', 'task': 'depth', 'weights': 'da.onnx', 'input_size': [518, 686],
            'stride': 14, 'backends': ['onnx'], 'depth': {'kind': 'relative'}}
    path = tmp_path / 'da.yaml'
    path.write_text(yaml.safe_dump(data))
    manifest = load_manifest(path)
    assert (manifest.architecture, manifest.stride, manifest.input_size) == (
        'onnx', 14, (518, 686))
    assert manifest.block('depth').output == 'disparity'  # a relative model's default


def test_registry_serves_depth():
    assert task_class('depth') is DepthTask
    assert DepthTask.name == 'depth'
    values = default_values(DepthTask)
    assert values == {'depth_color_min': 0.0, 'depth_color_max': 0.0,
                      'depth_colormap': 'turbo'}
    # publish_camera_info is a ROS output switch: the depth outputs declare it, not the task.
    assert {spec.applies for spec in DepthTask.params} == {'live'}


def test_task_needs_a_depth_block():
    manifest = model_manifest(task='detect')
    with pytest.raises(ValueError, match='needs a `depth` block'):
        DepthTask(manifest)


# -- preprocessing ---------------------------------------------------------------------------

def test_preprocess_imagenet_normalisation_and_channel_order():
    task = DepthTask(load_manifest(MODELS / 'depth_anything_v2_small.yaml'))
    bgr = np.zeros((100, 150, 3), np.uint8)
    bgr[:] = (10, 128, 250)  # B, G, R
    tensor, meta = task.preprocess(bgr, 'bgr8')
    assert tensor.shape == (1, 3, 518, 518) and tensor.dtype == np.float32
    assert meta.input_shape == (518, 518)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    expected = (np.array([250, 128, 10]) / 255.0 - mean) / std  # R, G, B planes
    np.testing.assert_allclose(tensor[0].reshape(3, -1).mean(axis=1), expected, rtol=1e-5)
    np.testing.assert_allclose(tensor[0].reshape(3, -1).std(axis=1), 0, atol=1e-5)


def test_preprocess_resamples_as_the_manifest_says(bus_bgr):
    """cubic: the same pixels as cv2.INTER_CUBIC; linear: as cv2.INTER_LINEAR."""
    for interpolation, flag in (('cubic', cv2.INTER_CUBIC), ('linear', cv2.INTER_LINEAR)):
        task = _task(input_size=[98, 84], stride=14, preprocessing={
            'letterbox': False, 'interpolation': interpolation, 'scale': 1.0})
        tensor, _ = task.preprocess(bus_bgr, 'bgr8')
        reference = cv2.resize(bus_bgr, (84, 98), interpolation=flag)[:, :, ::-1]
        np.testing.assert_array_equal(tensor[0].transpose(1, 2, 0), reference)


# -- postprocessing: geometry ----------------------------------------------------------------

@pytest.mark.parametrize('source_hw', [(480, 640), (1080, 810), (33, 47), (64, 96)])
def test_stretched_output_maps_back_exactly(source_hw):
    """A ramp over network pixels comes back as the ramp at each source pixel's centre."""
    task = _task()  # input 64 x 96, stretched
    result = _run(task, source_hw, _ramp((64, 96), 1.0, 100.0, 5.0))
    assert result.depth.shape == source_hw and result.depth.dtype == np.float32
    assert result.depth.flags['C_CONTIGUOUS'] and result.metric and result.output == 'depth'
    h, w = source_hw
    xs = _net_coordinate(np.arange(w), w, 96, 0, 96)
    ys = _net_coordinate(np.arange(h), h, 64, 0, 64)
    expected = xs[None, :] + 100.0 * ys[:, None] + 5.0
    np.testing.assert_allclose(result.depth, expected, rtol=0, atol=2e-3)


@pytest.mark.parametrize('source_hw', [(480, 640), (1080, 810), (200, 90)])
def test_letterboxed_output_cuts_the_border_and_maps_back_exactly(source_hw):
    """Letterboxed models: only the placed region comes back, border values never do."""
    task = _task(input_size=[128, 128], preprocessing={'letterbox': True})
    image = np.zeros(source_hw + (3,), np.uint8)
    tensor, meta = task.preprocess(image, 'rgb8')
    box = meta.letterbox
    h, w = source_hw
    new_w, new_h = int(round(w * box.gain[0])), int(round(h * box.gain[1]))
    left, top = int(box.pad[0]), int(box.pad[1])
    assert (left, top) != (0, 0)
    output = _ramp((128, 128), 1.0, 1000.0, 0.0)
    # Border pixels hold a value the placed region cannot produce: none may come back.
    border = np.ones((128, 128), bool)
    border[top:top + new_h, left:left + new_w] = False
    output[0, 0][border] = 1e9
    result = task.postprocess([output], meta, None)
    assert result.depth.shape == source_hw
    xs = _net_coordinate(np.arange(w), w, new_w, left, 128)
    ys = _net_coordinate(np.arange(h), h, new_h, top, 128)
    np.testing.assert_allclose(result.depth, xs[None, :] + 1000.0 * ys[:, None], atol=2e-2)


def test_preprocess_then_postprocess_is_the_identity_on_a_smooth_image():
    """Feed the preprocessed image back as 'depth': the source comes back (resampling only)."""
    task = _task(input_size=[96, 128], preprocessing={'letterbox': True, 'scale': 1.0},
                 depth={'kind': 'relative', 'output': 'depth'})
    y, x = np.mgrid[0:300, 0:500].astype(np.float32)
    plane = (0.3 * x + 0.2 * y).astype(np.uint8)  # smooth: bilinear errors stay below 1 level
    image = np.repeat(plane[:, :, None], 3, axis=2)
    tensor, meta = task.preprocess(image, 'rgb8')
    result = task.postprocess([tensor[:, :1]], meta, None)
    assert result.depth.shape == (300, 500)
    assert np.abs(result.depth - plane)[3:-3, 3:-3].max() <= 1.0


def test_low_resolution_output_is_brought_to_the_input_size_first():
    task = _task(input_size=[64, 96])
    constant = np.full((1, 1, 16, 24), 2.5, np.float32)
    result = _run(task, (120, 160), constant)
    assert result.depth.shape == (120, 160)
    np.testing.assert_allclose(result.depth, 2.5)
    ramp = _run(task, (64, 96), _ramp((16, 24), 1.0, 0.0, 1.0)).depth
    assert np.all(np.diff(ramp, axis=1) >= 0) and ramp[:, 0].max() < ramp[:, -1].min()


@pytest.mark.parametrize('shape', [(1, 1, 64, 96), (1, 64, 96), (64, 96)])
def test_accepted_output_layouts(shape):
    result = _run(_task(), (64, 96), np.full(shape, 3.0, np.float32))
    np.testing.assert_array_equal(result.depth, np.full((64, 96), 3.0, np.float32))


@pytest.mark.parametrize('outputs, text', [
    ([np.zeros((1, 2, 64, 96), np.float32)], 'single-channel'),
    ([np.zeros((2, 1, 64, 96), np.float32)], 'single-channel'),
    ([np.zeros((64,), np.float32)], 'single-channel'),
    ([np.zeros((1, 1, 64, 96), np.float32)] * 2, 'one output'),
])
def test_bad_output_layouts_are_refused(outputs, text):
    task = _task()
    _, meta = task.preprocess(np.zeros((64, 96, 3), np.uint8), 'rgb8')
    with pytest.raises(DepthOutputError, match=text):
        task.postprocess(outputs, meta, None)


def test_result_owns_its_memory_and_the_output_is_untouched():
    """No resize needed: the result is still a copy (runner buffers may be reused)."""
    task = _task(depth={'kind': 'metric', 'max_depth': 2.0})
    output = _ramp((64, 96), 0.05, 0.0, -1.0)
    before = output.copy()
    result = _run(task, (64, 96), output)
    assert not np.shares_memory(result.depth, output)
    np.testing.assert_array_equal(output, before)
    assert np.isnan(result.depth).any() and np.isinf(result.depth).any()


# -- postprocessing: units and invalid values ------------------------------------------------

def test_metric_invalid_values_become_nan_and_stay_local():
    """NaN, +-Inf, 0 and negative metres are invalid; each spoils only its neighbourhood."""
    output = np.full((1, 1, 64, 96), 4.0, np.float32)
    bad = [(5, 5, np.nan), (20, 30, np.inf), (40, 60, -np.inf), (10, 80, 0.0), (50, 10, -2.0)]
    for y, x, value in bad:
        output[0, 0, y, x] = value
    result = _run(_task(), (128, 192), output)  # 2x upscale
    depth = result.depth
    assert result.metric
    for y, x, _ in bad:
        block = depth[2 * y - 1:2 * y + 3, 2 * x - 1:2 * x + 3]
        assert np.isnan(block[1:3, 1:3]).all()
    assert np.isnan(depth).sum() <= 16 * len(bad)
    finite = depth[np.isfinite(depth)]
    np.testing.assert_allclose(finite, 4.0)
    assert not np.isinf(depth).any()


def test_relative_zero_is_valid_and_non_finite_is_nan():
    """Relative disparity 0 means 'very far', not invalid; NaN/Inf from the network are."""
    task = _task(depth={'kind': 'relative'})
    output = np.full((1, 1, 64, 96), 0.0, np.float32)
    output[0, 0, 10, 10] = np.inf
    output[0, 0, 30, 30] = np.nan
    result = _run(task, (64, 96), output)
    assert not result.metric and result.output == 'disparity'
    assert np.isnan(result.depth[10, 10]) and np.isnan(result.depth[30, 30])
    assert np.isnan(result.depth).sum() == 2
    assert (result.depth[np.isfinite(result.depth)] == 0).all()


def test_metric_beyond_max_depth_is_plus_inf():
    task = _task(depth={'kind': 'metric', 'max_depth': 10.0})
    output = _ramp((64, 96), 0.25, 0.0, 0.0)  # 0 .. 23.75 m across
    result = _run(task, (64, 96), output)
    depth = result.depth
    assert np.isnan(depth[:, 0]).all()  # 0 m: invalid
    assert (depth[:, 1:41] <= 10.0).all()
    assert np.isposinf(depth[:, 41:]).all()


def test_postprocess_depends_only_on_the_output_and_geometry():
    """Same output, same meta: identical results (nothing else, no header, is read)."""
    task = _task()
    output = _ramp((64, 96), 0.01, 0.02, 1.0)
    first = _run(task, (240, 320), output)
    second = _run(task, (240, 320), output.copy())
    np.testing.assert_array_equal(first.depth, second.depth)


# -- colourisation ---------------------------------------------------------------------------

def _result(depth: np.ndarray, output: str = 'depth') -> DepthResult:
    return DepthResult(depth.astype(np.float32), output == 'depth', output)


def _lut(colormap: str) -> np.ndarray:
    ramp = np.arange(256, dtype=np.uint8)[:, None]
    cmap = COLORMAPS[colormap]
    bgr = cv2.cvtColor(ramp, cv2.COLOR_GRAY2BGR) if cmap is None else \
        cv2.applyColorMap(ramp, cmap)
    return bgr[:, 0, ::-1]


@pytest.mark.parametrize('colormap', sorted(COLORMAPS))
def test_colorize_near_is_the_hot_end_for_both_directions(colormap):
    params = DepthParams(1.0, 5.0, colormap)
    depth = np.array([[1.0, 3.0, 5.0, 0.5, 9.0, np.nan]], np.float32)
    rgb = colorize(_result(depth, 'depth'), params)
    assert rgb.shape == (1, 6, 3) and rgb.dtype == np.uint8 and rgb.flags['C_CONTIGUOUS']
    lut = _lut(colormap)
    # metres: 1 m (near) -> index 255, 5 m -> 0, 3 m -> 128 (rounded), clipped outside.
    for column, index in ((0, 255), (1, 128), (2, 0), (3, 255), (4, 0)):
        np.testing.assert_array_equal(rgb[0, column], lut[index])
    assert (rgb[0, 5] == 0).all()  # NaN: black
    disparity = colorize(_result(depth, 'disparity'), params)
    for column, index in ((0, 0), (2, 255), (1, 128)):
        np.testing.assert_array_equal(disparity[0, column], lut[index])


def test_colorize_auto_range_uses_percentiles_and_survives_empty_maps():
    rng = np.random.default_rng(0)
    depth = rng.uniform(1.0, 9.0, (480, 640)).astype(np.float32)
    depth[:10] = np.nan
    low, high = depth_range(_result(depth), DepthParams())
    expected = np.percentile(depth[np.isfinite(depth)], AUTO_PERCENTILES)
    np.testing.assert_allclose((low, high), expected, atol=0.1)
    assert depth_range(_result(depth), DepthParams(2.0, 3.0)) == (2.0, 3.0)
    empty = np.full((4, 5), np.nan, np.float32)
    assert depth_range(_result(empty), DepthParams()) == (0.0, 1.0)
    assert (colorize(_result(empty), DepthParams()) == 0).all()
    flat = np.full((4, 5), 2.0, np.float32)
    assert colorize(_result(flat), DepthParams()).shape == (4, 5, 3)


def test_colour_parameters_and_their_validation():
    task = _task()
    params = task.make_params({'depth_color_min': 0.5, 'depth_color_max': 4.0,
                               'depth_colormap': 'gray'})
    assert params == DepthParams(0.5, 4.0, 'gray') and not params.auto_range
    assert task.make_params({}).auto_range
    specs = {spec.name: spec for spec in DepthTask.params}
    assert specs['depth_colormap'].validate('rainbow') is not None
    assert specs['depth_color_max'].validate(float('nan')) is not None
    assert specs['depth_color_max'].validate(3) is not None  # an integer, not a number
    result = _result(np.linspace(0.5, 4.0, 12, dtype=np.float32).reshape(3, 4))
    gray = task.colorize(result, params)
    assert (gray[..., 0] == gray[..., 1]).all() and (gray[..., 1] == gray[..., 2]).all()
    assert np.all(np.diff(gray[..., 0].ravel().astype(int)) <= 0)  # farther is darker


def test_meta_is_what_preprocess_returns():
    task = _task()
    _, meta = task.preprocess(np.zeros((10, 20, 3), np.uint8), 'rgb8', (32, 64))
    assert isinstance(meta, DepthMeta) and meta.input_shape == (32, 64)
    assert meta.letterbox.source_shape == (10, 20)
