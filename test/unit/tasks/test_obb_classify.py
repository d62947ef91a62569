"""Oriented boxes and classification against Ultralytics' own ``predict`` on the same ``.pt``.

The test models (../shared/models/README.md: yolov8n's boxes with a seeded angle branch,
yolov8n's backbone with a seeded classifier) are checked for parity, never accuracy: on
PyTorch (cpu), ONNX Runtime and OpenVINO at fp32 every rotated box, class and score is
Ultralytics' (corners within 0.01 px), and the classes and probabilities are its (top 5 in
order, probabilities within 1e-4); the pieces are checked against Ultralytics' own functions
(probabilistic IoU, Fast-NMS, the classify transforms, Pillow's resize) byte for byte where
the arithmetic allows it. Reduced precisions are held to the agreement measures of
:mod:`vision_nodes.accuracy`, TensorRT (the fake, running the ONNX) to ONNX Runtime.
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip('torch', reason='PyTorch is not installed (the reference)')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')

import cv2  # noqa: E402

from model_manifests import model_manifest  # noqa: E402
from ultralytics_reference import predict  # noqa: E402
from vision_nodes.accuracy import agreement  # noqa: E402
from vision_nodes.manifest import ManifestError  # noqa: E402
from vision_nodes.tasks import parse_manifest, resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.tasks.classify import Classification, ClassifyParams, ClassifyTask  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams  # noqa: E402
from vision_nodes.tasks.obb import OrientedBoxes, OrientedBoxTask  # noqa: E402
from vision_nodes.tasks import resample  # noqa: E402
from vision_nodes.tasks.resample import _numpy_crop, _pillow_crop, compiled_pass  # noqa: E402
from vision_nodes.tasks.rotated import corners, probiou, rotated_iou, rotated_nms  # noqa: E402

IMAGES = ('bus.jpg', 'zidane.jpg')
BACKENDS = ['cpu', 'onnx', 'openvino']
MODELS = {'obb': 'yolov8n_obb', 'classify': 'yolov8n_cls'}
WEIGHTS = {'obb': 'yolov8n-obb.pt', 'classify': 'yolov8n-cls.pt'}


@pytest.fixture(scope='module')
def images(assets) -> dict[str, np.ndarray]:
    return {name: cv2.imread(str(assets / name)) for name in IMAGES}


@pytest.fixture(scope='module')
def pipelines(model_dir, engine_cache_dir):
    built = {}
    for task, manifest_name in MODELS.items():
        for backend in BACKENDS:
            if backend == 'openvino':
                pytest.importorskip('openvino', reason='OpenVINO is not installed')
            built[task, backend] = build_pipeline(
                resolve_manifest(manifest_name), backend, model_dir=str(model_dir),
                cache_dir=engine_cache_dir)
    yield built
    for pipeline in built.values():
        pipeline.close()


def match_boxes(ours: OrientedBoxes, ref, tolerance: float) -> list[int]:
    """For each reference rotated box, ours of its class with every corner within tolerance."""
    expected, classes = ref.obb.xyxyxyxy.numpy(), ref.obb.cls.numpy().astype(int)
    assert len(ours) == len(expected), (ours.scores, ref.obb.conf)
    found = []
    for points, cls in zip(expected, classes):
        errors = np.where(ours.class_ids == cls,
                          np.abs(ours.polygons - points[None]).max(axis=(1, 2)), np.inf)
        assert errors.min() <= tolerance, (points, cls, errors.min())
        found.append(int(errors.argmin()))
    assert sorted(found) == list(range(len(ours)))
    return found


# -- oriented boxes --------------------------------------------------------------------------
@pytest.mark.parametrize('iou', [0.45, 0.7])
@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('name', IMAGES)
def test_obb_matches_ultralytics(pipelines, model_dir, images, backend, name, iou):
    """Every rotated box of predict (rect input), its class and score, on every backend; at
    IoU 0.7 (predict's default) Fast-NMS keeps the duplicates Ultralytics keeps."""
    pipeline = pipelines['obb', backend]
    image = images[name]
    assert pipeline.rect and pipeline.input_shape(image.shape[:2]) != (640, 640)
    ours = pipeline.process(image, 'bgr8', DetectionParams(0.25, iou, 300))
    assert isinstance(ours, OrientedBoxes)
    ref = predict(model_dir / WEIGHTS['obb'], image, iou=iou)
    order = match_boxes(ours, ref, 0.01)
    np.testing.assert_allclose(ours.scores[order], ref.obb.conf.numpy(), atol=1e-4)
    np.testing.assert_allclose(ours.xywhr[order], ref.obb.xywhr.numpy(), atol=1e-2)
    height, width = image.shape[:2]
    hulls = np.concatenate([ours.polygons.min(axis=1), ours.polygons.max(axis=1)], axis=1)
    np.testing.assert_allclose(ours.boxes, np.clip(hulls, 0, [width, height] * 2), atol=1e-3)


def test_probiou_is_ultralytics_batch_probiou():
    from ultralytics.utils.metrics import batch_probiou
    import torch

    rng = np.random.default_rng(0)
    boxes = np.column_stack([rng.random((60, 2)) * 200, rng.random((60, 2)) * 80 + 1,
                             rng.uniform(-math.pi / 4, 3 * math.pi / 4, 60)]).astype(np.float32)
    want = batch_probiou(torch.from_numpy(boxes), torch.from_numpy(boxes)).numpy()
    got = probiou(boxes, boxes)
    apart = ~np.eye(len(boxes), dtype=bool)
    np.testing.assert_allclose(got[apart], want[apart], atol=2e-6)
    # A box with itself: sqrt(1 - exp(-1e-7) + 1e-7) is a few float32 ulps under a square
    # root, and NumPy's and PyTorch's exp round them differently.
    np.testing.assert_allclose(np.diag(got), np.diag(want), atol=1e-4)
    assert np.allclose(np.diag(got), 1.0, atol=1e-3)


@pytest.mark.parametrize('seed', range(6))
def test_rotated_nms_is_ultralytics_fast_nms(seed):
    """The same boxes kept, in the same order, as Ultralytics' rotated NMS: class offsets of
    7680 px, batch_probiou, TorchNMS.fast_nms."""
    from ultralytics.utils.metrics import batch_probiou
    from ultralytics.utils.nms import TorchNMS
    import torch

    rng = np.random.default_rng(seed)
    count = 400
    boxes = np.column_stack([rng.random((count, 2)) * 300, rng.random((count, 2)) * 60 + 4,
                             rng.uniform(-math.pi / 4, 3 * math.pi / 4, count)]
                            ).astype(np.float32)
    scores = rng.permutation(count).astype(np.float32) / count  # no ties
    classes = rng.integers(0, 1 + seed * 3, count)
    shifted = torch.from_numpy(boxes.copy())
    shifted[:, :2] += torch.from_numpy(classes.astype(np.float32))[:, None] * 7680
    for threshold in (0.3, 0.7):
        want = TorchNMS.fast_nms(shifted, torch.from_numpy(scores), threshold,
                                 iou_func=batch_probiou).numpy()
        got = rotated_nms(boxes, scores, classes, threshold)
        assert got.tolist() == want.tolist()
        assert rotated_nms(boxes, scores, classes, threshold, 7).tolist() == want[:7].tolist()


def test_fast_nms_drops_a_box_whose_suppressor_was_dropped_itself():
    """Ultralytics' rule, not greedy NMS: C overlaps only B, B is dropped by A, C goes too."""
    boxes = np.array([[0, 0, 40, 20, 0], [14, 0, 40, 20, 0], [28, 0, 40, 20, 0]], np.float32)
    iou = probiou(boxes, boxes)
    assert iou[0, 1] > 0.5 and iou[1, 2] > 0.5 and iou[0, 2] < 0.5
    assert rotated_nms(boxes, np.array([0.9, 0.8, 0.7]), np.zeros(3), 0.5).tolist() == [0]


def test_published_corners_are_opencv_box_points_reversed():
    """The message convention: cv2.boxPoints(((x, y), (w, h), degrees(theta))) gives the
    corners of Ultralytics' xywhr2xyxyxyxy, in reverse order."""
    from ultralytics.utils.ops import xywhr2xyxyxyxy

    rng = np.random.default_rng(1)
    for x, y, w, h, theta in np.column_stack([rng.random((20, 4)) * 300 + 1,
                                              rng.uniform(-1, 2.4, 20)]).tolist():
        want = xywhr2xyxyxyxy(np.array([[x, y, w, h, theta]]))[0]
        np.testing.assert_allclose(corners(np.array([[x, y, w, h, theta]]))[0], want,
                                   atol=1e-9)
        points = cv2.boxPoints(((x, y), (w, h), math.degrees(theta)))
        np.testing.assert_allclose(points[::-1], want, atol=1e-3)


def test_rotated_iou_of_known_overlaps():
    square = np.array([[50, 50, 20, 20, 0.0]])
    assert rotated_iou(square, square)[0, 0] == pytest.approx(1.0)
    shifted = np.array([[60, 50, 20, 20, 0.0]])  # half of each overlaps: 200 / 600
    assert rotated_iou(square, shifted)[0, 0] == pytest.approx(1 / 3, abs=1e-6)
    turned = np.array([[50, 50, 20, 20, math.pi / 2]])  # the same square
    assert rotated_iou(square, turned)[0, 0] == pytest.approx(1.0, abs=1e-6)
    diamond = np.array([[50, 50, 20, 20, math.pi / 4]])  # octagon 8 * (10 (sqrt2 - 1)) * 10
    inter = 800 * (math.sqrt(2) - 1)
    assert rotated_iou(square, diamond)[0, 0] == pytest.approx(inter / (800 - inter), abs=1e-6)
    assert rotated_iou(square, np.array([[50, 50, 0, 20, 0.0]]))[0, 0] == 0.0


#: An oriented-box model's manifest fields (weights per test).
OBB = {'name': 'obb_model', 'task': 'obb', 'architecture': 'ultralytics',
       'backends': ['cpu', 'onnx', 'openvino', 'tensorrt']}


def test_obb_end2end_rows_match_ultralytics(tmp_path_factory, engine_cache_dir, images):
    """A YOLO26n-obb (seeded, test/yolo26_weights.py): the one-to-one head's rows (1, 300, 7:
    cx, cy, w, h, score, class, angle), no NMS, as predict(nms=False) on every backend."""
    from yolo26_weights import yolo26_pt

    weights = yolo26_pt(tmp_path_factory.mktemp('yolo26_obb') / 'yolo26n-obb.pt', 'obb')
    image = images['bus.jpg']
    ref = predict(weights, image, conf=0.23, nms=False)
    everything = predict(weights, image, conf=0.0, nms=False).obb.conf.numpy()
    assert np.abs(everything - 0.23).min() > 1e-3 and len(ref.obb) >= 4  # a gap at 0.23
    manifest = model_manifest(OBB, weights=weights)
    for backend in BACKENDS:
        pipeline = build_pipeline(manifest, backend, cache_dir=engine_cache_dir)
        try:
            assert pipeline.task.end2end is True
            assert pipeline.runner.output_shapes[0] == (1, 300, 7)
            ours = pipeline.process(image, 'bgr8', DetectionParams(0.23, 0.45, 300))
            order = match_boxes(ours, ref, 0.05)
            np.testing.assert_allclose(ours.scores[order], ref.obb.conf.numpy(), atol=1e-3)
        finally:
            pipeline.close()


def test_obb_outputs_are_checked_at_configure():
    task = OrientedBoxTask(model_manifest(OBB, weights='x.pt'))
    labels = [f'c{i}' for i in range(80)]
    task.check_model([(1, 85, 8400)], labels)
    assert task.end2end is False
    with pytest.raises(ManifestError, match='lists 80 class names but the model scores 79'):
        task.check_model([(1, 84, 8400)], labels)  # a detector's output
    with pytest.raises(ManifestError, match="reads the output 'output0'"):
        task.check_model([(1, 85, 8400)], labels, ['boxes'])
    with pytest.raises(ManifestError, match=r'outputs 1x300x6, not an oriented-box output'):
        task.check_model([(1, 300, 6)], labels)
    task.check_model([(1, 300, 7)], labels, ['output0'])
    assert task.end2end is True


@pytest.mark.parametrize('manifest, weights, holds', [
    ('yolov8n', 'yolov8n-obb.pt', 'obb'), ('yolov8n_obb', 'yolov8n.pt', 'detect'),
    ('yolov8n_cls', 'yolov8n-obb.pt', 'obb'), ('yolov8n', 'yolov8n-cls.pt', 'classify')])
def test_weights_of_another_task_are_refused(model_dir, engine_cache_dir, manifest, weights,
                                             holds):
    from vision_nodes.loaders import ModelLoadError

    wrong = replace(resolve_manifest(manifest), weights=weights)
    with pytest.raises(ModelLoadError) as info:
        build_pipeline(wrong, 'onnx', model_dir=str(model_dir), cache_dir=engine_cache_dir)
    text = str(info.value)
    assert f"the file holds a {holds} model but manifest '{wrong.name}'" in text
    assert '\n' not in text


# -- classification ----------------------------------------------------------------------------
@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('name', IMAGES)
def test_classify_matches_ultralytics(pipelines, model_dir, images, backend, name):
    """The same top 5 in the same order, every probability within 1e-4, on every backend."""
    ref = predict(model_dir / WEIGHTS['classify'], images[name], imgsz=224)
    ours = pipelines['classify', backend].process(images[name], 'bgr8', ClassifyParams(5))
    assert isinstance(ours, Classification) and len(ours) == 5
    assert ours.class_ids.tolist() == list(ref.probs.top5)
    np.testing.assert_allclose(ours.probs, ref.probs.data.numpy(), atol=1e-4)
    np.testing.assert_array_equal(ours.scores, ours.probs[ours.class_ids])
    assert np.all(np.diff(ours.scores) <= 0)
    assert len(pipelines['classify', backend].process(images[name], 'bgr8',
                                                      ClassifyParams(2))) == 2


SHAPES = [(1080, 810), (720, 1280), (224, 224), (225, 299), (100, 150), (37, 500), (3, 5),
          (2000, 301)]


@pytest.mark.parametrize('shape', SHAPES)
def test_classify_preprocessing_is_ultralytics_classify_transforms(shape):
    """The crop is Ultralytics' (Resize(224) then CenterCrop on a PIL image) byte for byte,
    the float tensor its ToTensor within rounding (x * (1/255) against x / 255)."""
    from PIL import Image
    from ultralytics.data.augment import classify_transforms

    rng = np.random.default_rng(shape[0])
    image = rng.integers(0, 256, shape + (3,), np.uint8)
    image = cv2.GaussianBlur(image, (5, 5), 2)  # some structure for the filter to see
    transforms = classify_transforms(224)
    host = np.array(type(transforms)(transforms.transforms[:2])(Image.fromarray(image)))
    want = transforms(Image.fromarray(image[:, :, ::-1])).numpy()[None]
    task = ClassifyTask(resolve_manifest('yolov8n_cls'))
    tensor, _ = task.preprocess(image, 'bgr8')
    np.testing.assert_allclose(tensor, want, atol=1e-7)
    task.u8_input = True
    crop, _ = task.preprocess(image, 'bgr8')
    np.testing.assert_array_equal(crop[0], host)


def _compiled_crop(image, size, window, interpolation):
    rows_pass = compiled_pass()
    if rows_pass is None:
        pytest.skip('Numba is not installed: the compiled resize is not used here')
    return resample._compiled_crop(image, size, window, interpolation, rows_pass)


def resample_geometry(image):
    """The classifier's resize and crop of ``image`` (224 x 224)."""
    from vision_nodes.tasks.classify import crop_geometry

    return crop_geometry(image.shape[:2], (224, 224))


#: The two resizes of the package's own (Pillow's own is the reference).
EXACT_RESIZES = {'numpy': _numpy_crop, 'compiled': _compiled_crop}


@pytest.mark.parametrize('path', EXACT_RESIZES)
@pytest.mark.parametrize('interpolation', ['linear', 'cubic'])
@pytest.mark.parametrize('shape', SHAPES)
def test_resize_is_pillow_byte_for_byte(shape, interpolation, path):
    """The compiled pass (Numba) and the NumPy one (no Numba, no Pillow) give Pillow's bytes."""
    from vision_nodes.tasks.classify import crop_geometry

    rng = np.random.default_rng(1 + shape[1])
    for channels in (1, 3):
        image = rng.integers(0, 256, shape + (channels,), np.uint8)
        size, window = crop_geometry(shape, (224, 224))
        want = _pillow_crop(image, size, window, interpolation)
        np.testing.assert_array_equal(EXACT_RESIZES[path](image, size, window, interpolation),
                                      want)


@pytest.mark.parametrize('path', EXACT_RESIZES)
@pytest.mark.parametrize('seed', range(4))
def test_resize_follows_pillows_pass_order(seed, path):
    """Random sizes and windows, both orders of Pillow's passes (vertical first when the
    height shrinks by more than twice as many pixels as the width), grey and colour, strided
    views: Pillow's bytes."""
    from vision_nodes.tasks.resample import vertical_first

    rng = np.random.default_rng(seed)
    orders = set()
    for _ in range(25):
        source = tuple(int(v) for v in rng.integers(8, 400, 2))
        size = tuple(int(v) for v in rng.integers(4, 300, 2))
        top, left = (int(rng.integers(0, s)) for s in size)
        window = (top, left, int(rng.integers(1, size[0] - top + 1)),
                  int(rng.integers(1, size[1] - left + 1)))
        channels = int(rng.choice([1, 3]))
        image = rng.integers(0, 256, source + (channels + 1,), np.uint8)[:, :, :channels]
        orders.add(vertical_first(source, size))
        want = _pillow_crop(np.ascontiguousarray(image), size, window, 'linear')
        np.testing.assert_array_equal(EXACT_RESIZES[path](image, size, window, 'linear'),
                                      want)
    assert orders == {True, False}


def test_classify_resizes_with_the_compiled_pass_where_numba_is_installed(monkeypatch):
    """With Numba the task's resize is the compiled one (built when the task is, at
    configure); without it, Pillow's, the same bytes and no warning."""
    pytest.importorskip('numba', reason='the compiled resize needs Numba')
    image = np.random.default_rng(3).integers(0, 256, (480, 640, 3), np.uint8)
    ClassifyTask(resolve_manifest('yolov8n_cls'))
    assert compiled_pass.cache_info().currsize == 1 and compiled_pass() is not None
    calls = []
    real = resample._compiled_crop
    monkeypatch.setattr(resample, '_compiled_crop', lambda *a: calls.append(1) or real(*a))
    size, window = resample_geometry(image)
    want = resample.resized_crop(image, size, window)
    assert calls
    compiled_pass.cache_clear()
    monkeypatch.delitem(sys.modules, 'vision_nodes.tasks.resample_kernel', raising=False)
    monkeypatch.setitem(sys.modules, 'numba', None)  # as if Numba were not installed
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            assert compiled_pass() is None
            np.testing.assert_array_equal(resample.resized_crop(image, size, window), want)
    finally:
        compiled_pass.cache_clear()
    assert len(calls) == 1


def test_a_failing_numba_is_one_warning_and_pillows_resize(monkeypatch):
    """Numba installed but failing (here its kernel module cannot load): one warning that
    says so, and Pillow resizes, the same bytes."""
    image = np.random.default_rng(4).integers(0, 256, (300, 200, 3), np.uint8)
    size, window = resample_geometry(image)
    compiled_pass.cache_clear()
    monkeypatch.setitem(sys.modules, 'vision_nodes.tasks.resample_kernel', None)
    try:
        with pytest.warns(RuntimeWarning, match='compiled resize is off, Pillow resizes'):
            assert compiled_pass() is None
        np.testing.assert_array_equal(resample.resized_crop(image, size, window),
                                      _pillow_crop(image, size, window, 'linear'))
    finally:
        compiled_pass.cache_clear()


def test_classify_takes_every_colour_encoding(bus_bgr):
    task = ClassifyTask(resolve_manifest('yolov8n_cls'))
    want, _ = task.preprocess(bus_bgr, 'bgr8')
    rgb = np.ascontiguousarray(bus_bgr[:, :, ::-1])
    np.testing.assert_array_equal(task.preprocess(rgb, 'rgb8')[0], want)
    bgra = np.dstack([bus_bgr, np.full(bus_bgr.shape[:2], 7, np.uint8)])
    np.testing.assert_array_equal(task.preprocess(bgra, 'bgra8')[0], want)
    grey = cv2.cvtColor(bus_bgr, cv2.COLOR_BGR2GRAY)
    tensor = task.preprocess(grey, 'mono8')[0]
    np.testing.assert_array_equal(tensor[0, 0], tensor[0, 1])
    expected = task.preprocess(cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR), 'bgr8')[0]
    np.testing.assert_array_equal(tensor, expected)


@pytest.mark.parametrize('numba', [True, False], ids=['compiled', 'pillow'])
def test_the_8bit_crop_is_bgr_and_contiguous_for_every_encoding(bus_bgr, monkeypatch, numba):
    """u8_input: the crop a runner converts itself is (1, 224, 224, 3) BGR, C-contiguous,
    whether the crop is already in that order (bgr8: handed on as it is) or reordered; with
    Pillow's resize too (its crop is a view of the whole resized image: of a landscape image,
    not contiguous)."""
    bus_bgr = np.ascontiguousarray(bus_bgr.transpose(1, 0, 2))  # landscape: columns cropped
    if not numba:
        monkeypatch.setattr(resample, 'compiled_pass', lambda: None)
    task = ClassifyTask(resolve_manifest('yolov8n_cls'))
    task.u8_input = True
    want, _ = task.preprocess(bus_bgr, 'bgr8')
    assert want.shape == (1, 224, 224, 3) and want.flags.c_contiguous
    floats = ClassifyTask(resolve_manifest('yolov8n_cls')).preprocess(bus_bgr, 'bgr8')[0]
    np.testing.assert_allclose(want[0, :, :, ::-1].transpose(2, 0, 1) / 255.0, floats[0],
                               atol=1e-6)  # the same pixels as the float tensor, in BGR
    rgb = np.ascontiguousarray(bus_bgr[:, :, ::-1])
    bgra = np.dstack([bus_bgr, np.full(bus_bgr.shape[:2], 7, np.uint8)])
    for image, encoding in ((rgb, 'rgb8'), (bgra, 'bgra8')):
        got = task.preprocess(image, encoding)[0]
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)
    grey = task.preprocess(cv2.cvtColor(bus_bgr, cv2.COLOR_BGR2GRAY), 'mono8')[0]
    assert grey.shape == want.shape and grey.flags.c_contiguous
    np.testing.assert_array_equal(grey[..., 0], grey[..., 2])


def test_classify_manifest_and_outputs_are_checked():
    base = {'name': 'cls', 'task': 'classify', 'weights': 'x.pt', 'input_size': [224, 224],
            'backends': ['onnx']}
    with pytest.raises(ManifestError) as info:
        parse_manifest(base)  # letterbox defaults to true
    assert "<manifest>: field `preprocessing.letterbox`: true (the default): a classify " \
        "model's input is resized and centre-cropped" in str(info.value)
    with pytest.raises(ManifestError, match='`preprocessing.letterbox`: True: a classify'):
        parse_manifest({**base, 'preprocessing': {'letterbox': True}})
    manifest = parse_manifest({**base, 'preprocessing': {'letterbox': False}})
    task = ClassifyTask(manifest)
    labels = [f'c{i}' for i in range(80)]
    task.check_model([(1, 80)], labels, ['output0'])
    with pytest.raises(ManifestError, match='lists 80 class names but the model scores 1000'):
        task.check_model([(1, 1000)], labels)
    with pytest.raises(ManifestError, match=r'outputs 1x84x8400, not class probabilities'):
        task.check_model([(1, 84, 8400)], labels)
    with pytest.raises(ManifestError, match="reads the output 'output0'"):
        task.check_model([(1, 80)], labels, ['probs'])
    assert task.make_params({'classification_top_k': 3}) == ClassifyParams(3)
    assert ClassifyTask.param_defaults(manifest) == {'classification_top_k': 5}


# -- reduced precisions and TensorRT ----------------------------------------------------------
@pytest.fixture(scope='module')
def plain_calibration(tmp_path_factory, assets):
    """The two test images as they are: a calibration set like the frames being checked."""
    import shutil

    folder = tmp_path_factory.mktemp('obb_cls_calibration')
    for name in IMAGES:
        shutil.copy(assets / name, folder / name)
    return folder


def _agreement(task, reference, candidate, images, params):
    return agreement(task, [reference.process(images[n], 'bgr8', params) for n in IMAGES],
                     [candidate.process(images[n], 'bgr8', params) for n in IMAGES])


#: (task, precision) -> the least agreement with fp32 on the two images. Measured on the AMX
#: Xeon: OBB rotated-box mAP50-95 int8 0.92, bf16 1.0 (recall 1.0 both); classification
#: top-1 1.0 both (bus.jpg's first two classes are 0.05 apart; fp32's top-5 probabilities
#: move by 0.03 in int8, 0.004 in bf16).
BOUNDS = {('obb', 'int8'): 0.8, ('obb', 'fp16'): 0.9, ('classify', 'int8'): 0.5,
          ('classify', 'fp16'): 1.0}


@pytest.mark.parametrize('precision', ['int8', 'fp16'])
@pytest.mark.parametrize('task', MODELS)
def test_openvino_reduced_precisions_agree_with_fp32(pipelines, images, model_dir,
                                                     engine_cache_dir, plain_calibration,
                                                     task, precision):
    """int8 (NNCF, calibrated by the task's own pre-processing) and fp16 (bf16 on CPUs with
    it) measured as the precision check measures them: rotated-box mAP50-95 and recall of
    fp32's confident boxes; top-1 agreement and probability error."""
    from vision_nodes.runners.base import RunnerError

    if precision == 'int8':
        pytest.importorskip('nncf', reason='NNCF is not installed (int8 quantization)')
    try:
        reduced = build_pipeline(resolve_manifest(MODELS[task]), 'openvino',
                                 model_dir=str(model_dir), cache_dir=engine_cache_dir,
                                 precision=precision, calibration_dir=str(plain_calibration),
                                 check_precision=False)
    except RunnerError as exc:
        if "cannot run precision 'fp16' here" not in str(exc):
            raise
        pytest.skip(str(exc))
    try:
        params = DetectionParams() if task == 'obb' else ClassifyParams()
        found = _agreement(task, pipelines[task, 'openvino'], reduced, images, params)
        assert found.value >= BOUNDS[task, precision], found
        if task == 'obb':
            assert found.details['recall50'] == 1.0, found
        else:
            assert found.details['top5_probability_mae'] <= 0.05, found
    finally:
        reduced.close()


@pytest.mark.parametrize('task', MODELS)
def test_the_precision_check_measures_each_task(model_dir, engine_cache_dir, task):
    """Loaded at a reduced type, each model is measured against fp32 by its own measure on
    the default validation set (vision_nodes/precision_check.py), as detection's is."""
    pytest.importorskip('openvino', reason='OpenVINO is not installed')
    from vision_nodes.runners.base import RunnerError

    try:
        model = build_pipeline(resolve_manifest(MODELS[task]), 'openvino',
                               model_dir=str(model_dir), cache_dir=engine_cache_dir,
                               precision='fp16')
    except RunnerError as exc:
        if "cannot run precision 'fp16' here" not in str(exc):
            raise
        pytest.skip(str(exc))
    try:
        found = model.precision_check
        if found.agreement is None:
            pytest.skip(f'not measured here: {found.note}')
        measure = {'obb': 'rotated-box mAP50-95', 'classify': 'top-1 agreement'}[task]
        assert found.agreement.measure == measure and found.agreement.images >= 10
        if task == 'obb':
            assert found.agreement.value >= 0.9 and found.agreement.details['recall50'] >= 0.9
        else:  # the seeded head's close classes may swap in bf16 (0.917 on the AMX Xeon)
            assert found.agreement.value >= 0.75
            assert found.agreement.details['top5_probability_mae'] <= 0.02
    finally:
        model.close()


@pytest.mark.parametrize('task', MODELS)
def test_tensorrt_engine_gives_onnx_results(fake_trt, pipelines, images, model_dir,
                                            engine_cache_dir, task):
    """An engine built from the export (u8 input, pre-processing in the graph) names the
    same output and gives ONNX Runtime's results."""
    engine = build_pipeline(resolve_manifest(MODELS[task]), 'tensorrt',
                            model_dir=str(model_dir), cache_dir=engine_cache_dir)
    try:
        assert engine.runner.output_names == pipelines[task, 'onnx'].runner.output_names
        assert engine.task.u8_input is True
        image = images['zidane.jpg']
        params = DetectionParams() if task == 'obb' else ClassifyParams()
        want = pipelines[task, 'onnx'].process(image, 'bgr8', params)
        got = engine.process(image, 'bgr8', params)
        if task == 'obb':
            np.testing.assert_allclose(got.xywhr, want.xywhr, atol=1e-2)
            assert got.class_ids.tolist() == want.class_ids.tolist()
        else:
            assert got.class_ids.tolist() == want.class_ids.tolist()
            np.testing.assert_allclose(got.probs, want.probs, atol=1e-5)
    finally:
        engine.close()


def test_a_batch_of_frames_gives_each_frame_its_own_results(model_dir, engine_cache_dir,
                                                            images):
    """Several cameras in one run (dynamic batch): each frame's result as when run alone."""
    frames = [(images['bus.jpg'], 'bgr8'), (images['zidane.jpg'], 'bgr8'),
              (np.ascontiguousarray(images['bus.jpg'][:, ::-1]), 'bgr8')]
    for task, params in (('obb', DetectionParams()), ('classify', ClassifyParams())):
        manifest = resolve_manifest(MODELS[task])
        batched = build_pipeline(manifest, 'onnx', model_dir=str(model_dir),
                                 cache_dir=engine_cache_dir, max_batch=3)
        alone = build_pipeline(manifest, 'onnx', model_dir=str(model_dir),
                               cache_dir=engine_cache_dir)
        try:
            for (frame, _), got in zip(frames, batched.process_batch(frames, params)):
                want = alone.process(frame, 'bgr8', params)
                assert got.class_ids.tolist() == want.class_ids.tolist()
                if task == 'obb':
                    np.testing.assert_allclose(got.xywhr, want.xywhr, atol=1e-2)
                else:
                    np.testing.assert_allclose(got.probs, want.probs, atol=1e-5)
        finally:
            batched.close()
            alone.close()
