"""Rect inference: the network input follows the camera's aspect ratio where the runtime allows.

The exported graph must be right at shapes other than its export shape (Ultralytics' head
caches its anchor grid per shape; see ``onnx_export._trace_every_shape``), rect and square
must find the same objects, and the rect path must match Ultralytics' own ``predict`` on the
``.pt`` (which letterboxes the same way). The shape follows the first frame, changes with the
camera's resolution, and each shape is compiled once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip('torch', reason='PyTorch is not installed (the reference)')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')

import cv2  # noqa: E402

from detection_match import assert_same_detections  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402
from vision_nodes.tasks.preprocess import rect_shape  # noqa: E402

IMAGES = ('bus.jpg', 'zidane.jpg')
PARAMS = DetectionParams(0.25, 0.45, 300)
RECT_BACKENDS = ['cpu', 'onnx', 'openvino']


@pytest.fixture(scope='module')
def images(assets) -> dict[str, np.ndarray]:
    return {name: cv2.imread(str(assets / name)) for name in IMAGES}


@pytest.fixture(scope='module')
def pipelines(model_dir, engine_cache_dir):
    manifest = resolve_manifest('yolov8n')
    built = {}
    for backend in RECT_BACKENDS:
        if backend == 'openvino':
            try:
                import openvino  # noqa: F401
            except ImportError:
                continue
        built[backend] = build_pipeline(manifest, backend, model_dir=str(model_dir),
                                        cache_dir=engine_cache_dir, precision='fp32')
    yield built
    for p in built.values():
        p.close()


def _pipeline(pipelines, backend):
    if backend not in pipelines:
        pytest.skip(f'{backend} is not installed')
    return pipelines[backend]


@pytest.mark.parametrize('source,expected', [
    ((1080, 810), (640, 480)),   # bus.jpg, portrait 4:3
    ((480, 640), (480, 640)),    # a 4:3 camera
    ((720, 1280), (384, 640)),   # 16:9
    ((1080, 1920), (384, 640)),
    ((640, 640), (640, 640)),
    ((100, 2000), (32, 640)),    # a line scanner: one stride high
])
def test_rect_shape(source, expected):
    assert rect_shape(source, (640, 640)) == expected


@pytest.mark.parametrize('backend', RECT_BACKENDS)
def test_every_runtime_takes_other_shapes(pipelines, backend, images):
    """The export has dynamic height/width; the runners say so and the pipelines use it."""
    pipeline = _pipeline(pipelines, backend)
    assert pipeline.runner.dynamic_shapes and pipeline.rect
    assert pipeline.input_shape(images['bus.jpg'].shape[:2]) == (640, 480)
    assert pipeline.input_shape(images['zidane.jpg'].shape[:2]) == (384, 640)


@pytest.mark.parametrize('shape', [(640, 480), (384, 640), (320, 320)])
def test_exported_graph_is_right_at_other_shapes(pipelines, shape):
    """ONNX Runtime and OpenVINO at a non-export shape give PyTorch's raw outputs."""
    x = np.random.default_rng(0).random((1, 3) + shape, dtype=np.float32)
    want = pipelines['cpu'].runner.infer(x)[0]
    anchors = sum((shape[0] // s) * (shape[1] // s) for s in (8, 16, 32))
    assert want.shape == (1, 84, anchors)
    for backend in ('onnx', 'openvino'):
        if backend in pipelines:
            got = pipelines[backend].runner.infer(x)[0]
            np.testing.assert_allclose(got[:, :4], want[:, :4], atol=1e-2, rtol=0)
            np.testing.assert_allclose(got[:, 4:], want[:, 4:], atol=1e-4, rtol=0)


@pytest.mark.parametrize('backend', RECT_BACKENDS)
@pytest.mark.parametrize('name', IMAGES)
def test_rect_and_square_find_the_same_objects(pipelines, backend, name, images):
    """Confident detections agree (class, IoU >= 0.9) between the rect and the square input."""
    pipeline = _pipeline(pipelines, backend)
    image = images[name]
    tensor, meta = pipeline.task.preprocess(image, 'bgr8', (640, 640))
    square = pipeline.task.postprocess(pipeline.runner.infer(tensor), meta, PARAMS)
    rect = pipeline.process(image, 'bgr8', PARAMS)
    assert pipeline.input_shape(image.shape[:2]) != (640, 640)
    assert_same_detections(square, rect, at_least=2)


@pytest.mark.parametrize('name', IMAGES)
def test_rect_matches_ultralytics_predict_on_the_pt(pipelines, model_dir, name, images):
    """Ultralytics' predict on the .pt letterboxes to the same rect shape: same detections."""
    import torch

    from vision_nodes.loaders.ultralytics import import_ultralytics

    threads = torch.get_num_threads()
    try:
        yolo = import_ultralytics().YOLO(str(model_dir / 'yolov8n.pt'))
        ref = yolo.predict(images[name], imgsz=640, conf=0.25, iou=0.45, verbose=False,
                           device='cpu')[0]
    finally:
        torch.set_num_threads(threads)  # Ultralytics' CPU predict changes it process-wide
    order = np.argsort(-ref.boxes.conf.numpy(), kind='stable')
    for backend in ('cpu', 'onnx', 'openvino'):
        if backend not in pipelines:
            continue
        ours = pipelines[backend].process(images[name], 'bgr8', PARAMS)
        assert len(ours) == len(order), backend
        np.testing.assert_array_equal(ours.class_ids, ref.boxes.cls.numpy()[order])
        np.testing.assert_allclose(ours.boxes, ref.boxes.xyxy.numpy()[order], atol=1.0)
        np.testing.assert_allclose(ours.scores, ref.boxes.conf.numpy()[order], atol=2e-3)


def test_shape_follows_the_camera_and_each_is_compiled_once(pipelines, images):
    """A resolution change re-derives the shape; going back reuses the compiled model."""
    pipeline = _pipeline(pipelines, 'openvino')
    runner = pipeline.runner
    bus = images['bus.jpg']
    wide = cv2.resize(bus[:480], (1280, 720))
    pipeline.process(bus, 'bgr8', PARAMS)
    assert pipeline._prepared == (640, 480)
    first = runner._compiled[(640, 480)]
    pipeline.process(wide, 'bgr8', PARAMS)
    assert pipeline._prepared == (384, 640) and (384, 640) in runner._compiled
    again = pipeline.process(bus, 'bgr8', PARAMS)
    assert pipeline._prepared == (640, 480)
    assert runner._compiled[(640, 480)] is first  # not compiled again
    want = pipelines['cpu'].process(bus, 'bgr8', PARAMS)
    np.testing.assert_allclose(again.boxes, want.boxes, atol=0.5)


def test_rect_off_in_the_manifest_or_without_letterbox(pipelines, images):
    """`rect: false`, or a stretched (not letterboxed) input, keeps the manifest's shape."""
    pipeline = _pipeline(pipelines, 'onnx')
    manifest = pipeline.manifest
    for changed in (replace(manifest, rect=False),
                    replace(manifest, preprocessing=replace(manifest.preprocessing,
                                                            letterbox=False))):
        other = replace(pipeline, manifest=changed, _shapes={}, _prepared=None)
        assert not other.rect
        assert other.input_shape(images['bus.jpg'].shape[:2]) == (640, 640)


def test_dynamic_axes_follow_what_the_module_can_do():
    """Output dims that follow the input are dynamic; a one-shape module exports static."""
    import torch

    from vision_nodes.artifacts.onnx_export import _dynamic_axes

    class Head(torch.nn.Module):
        def forward(self, x):
            y = torch.nn.functional.avg_pool2d(x, 8)
            return y.flatten(2)  # (1, 3, H/8 * W/8): the last dim follows the input

    class OneShape(torch.nn.Module):
        def forward(self, x):
            return x.reshape(1, 3, 64 * 64).mean(-1)  # fails at any other size

    example = torch.zeros(1, 3, 64, 64)
    assert _dynamic_axes(Head(), example, ['output0']) == {
        'images': {2: 'height', 3: 'width'}, 'output0': {2: 'output0_dim2'}}
    assert _dynamic_axes(OneShape(), example, ['output0']) == {}
