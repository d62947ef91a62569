"""Segment and pose tasks against Ultralytics' own ``predict`` on the same ``.pt`` test models.

The seg/pose test models (../shared/models/README.md) have real boxes and seeded, untrained
mask and keypoint branches: masks and keypoints are checked for parity with Ultralytics, never
for accuracy. Parity: same classes, boxes IoU >= 0.9, masks IoU >= 0.9 in source pixels,
keypoints within 2 px, on PyTorch (cpu), ONNX Runtime and OpenVINO, with rect inference.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip('torch', reason='PyTorch is not installed (the reference)')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')

import cv2  # noqa: E402

from model_manifests import model_manifest  # noqa: E402
from ultralytics_reference import (mask_iou, match_reference, predict, result_masks,  # noqa: E402,E501
                                   source_masks, whole_masks)
from vision_nodes.boxes import pairwise_iou  # noqa: E402
from vision_nodes.manifest import ManifestError  # noqa: E402
from vision_nodes.tasks import resolve_manifest  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams, Detections  # noqa: E402
from vision_nodes.tasks.instances import COCO_KEYPOINTS, COCO_SKELETON, SegmentResult  # noqa: E402,E501
from vision_nodes.tasks.pose import PoseTask  # noqa: E402
from vision_nodes.tasks.segment import SegmentationTask  # noqa: E402

IMAGES = ('bus.jpg', 'zidane.jpg')
PARAMS = DetectionParams(0.25, 0.45, 300)
BACKENDS = ['cpu', 'onnx', 'openvino']
MODELS = {'segment': 'yolov8n_seg', 'pose': 'yolov8n_pose'}


@pytest.fixture(scope='module')
def images(assets) -> dict[str, np.ndarray]:
    return {name: cv2.imread(str(assets / name)) for name in IMAGES}


@pytest.fixture(scope='module')
def references(model_dir, images):
    return {(task, name): predict(model_dir / f"{MODELS[task].replace('_', '-')}.pt",
                                  images[name])
            for task in MODELS for name in IMAGES}


@pytest.fixture(scope='module')
def pipelines(model_dir, engine_cache_dir):
    built = {}
    for task, manifest_name in MODELS.items():
        manifest = resolve_manifest(manifest_name)
        for backend in BACKENDS:
            if backend == 'openvino':
                pytest.importorskip('openvino', reason='OpenVINO is not installed')
            built[task, backend] = build_pipeline(
                manifest, backend, model_dir=str(model_dir), cache_dir=engine_cache_dir)
    yield built
    for pipeline in built.values():
        pipeline.close()


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('name', IMAGES)
def test_segment_matches_ultralytics(pipelines, references, images, backend, name):
    """Boxes IoU >= 0.9 and masks IoU >= 0.9 in source pixels, rect input on every backend."""
    pipeline = pipelines['segment', backend]
    image = images[name]
    assert pipeline.rect and pipeline.input_shape(image.shape[:2]) != (640, 640)
    ours = pipeline.process(image, 'bgr8', PARAMS)
    assert isinstance(ours, SegmentResult)
    assert ours.shape == image.shape[:2] and len(ours.masks) == len(ours.windows) == len(ours)
    assert all(m.dtype == bool for m in ours.masks)
    masks = result_masks(ours)
    ref = references['segment', name]
    expected = source_masks(ref)
    for j, i in enumerate(match_reference(ours, ref)):
        assert mask_iou(masks[i], expected[j]) >= 0.9, (j, ref.boxes.cls[j])
        box = ours.boxes[i]  # a mask stays inside its box (cropped at network resolution)
        rows, cols = np.nonzero(masks[i])
        assert rows.min() >= box[1] - 2 and rows.max() <= box[3] + 2
        assert cols.min() >= box[0] - 2 and cols.max() <= box[2] + 2


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('name', IMAGES)
def test_pose_matches_ultralytics(pipelines, references, images, backend, name):
    """Person boxes IoU >= 0.9, keypoints within 2 px and their scores within 0.01."""
    pipeline = pipelines['pose', backend]
    ours = pipeline.process(images[name], 'bgr8', PARAMS)
    ref = references['pose', name]
    assert ours.names == COCO_KEYPOINTS and ours.skeleton == COCO_SKELETON
    assert ours.keypoints.shape == (len(ours), 17, 3)
    expected = ref.keypoints.data.numpy()
    for j, i in enumerate(match_reference(ours, ref)):
        np.testing.assert_allclose(ours.keypoints[i, :, :2], expected[j, :, :2], atol=2.0)
        np.testing.assert_allclose(ours.keypoints[i, :, 2], expected[j, :, 2], atol=0.01)


def test_exports_keep_the_extra_outputs_by_name(pipelines):
    """ONNX and OpenVINO artifacts name the prototypes' output; PyTorch gives both outputs."""
    for backend in ('onnx', 'openvino'):
        assert pipelines['segment', backend].runner.output_names == ['output0', 'output1']
        assert pipelines['pose', backend].runner.output_names == ['output0']
    shapes = pipelines['segment', 'cpu'].runner.output_shapes
    assert shapes == [(1, 116, 8400), (1, 32, 160, 160)]
    assert pipelines['pose', 'cpu'].runner.output_shapes == [(1, 56, 8400)]


def test_label_image_higher_score_wins_and_zero_is_background():
    masks = np.zeros((3, 4, 6), bool)
    masks[0, :, :3] = True      # score 0.5
    masks[1, :2, 2:5] = True    # score 0.9: wins the overlap with 0
    masks[2, 3, 5] = True       # score 0.9, alone
    result = SegmentResult(np.zeros((3, 4), np.float32), np.array([0.5, 0.9, 0.9], np.float32),
                           np.zeros(3, np.int64), masks)
    labels = result.label_image()
    assert labels.dtype == np.uint16
    assert labels[0, 2] == 2 and labels[3, 2] == 1 and labels[0, 0] == 1
    assert labels[3, 5] == 3 and labels[3, 4] == 0
    picked = result.select(np.array([2, 0]))
    assert picked.mask(0)[3, 5] and picked.scores.tolist() == pytest.approx([0.9, 0.5])


#: A pose model's manifest fields; the tests add its keypoints and skeleton blocks.
POSE = {'name': 'pose', 'task': 'pose', 'weights': 'yolov8n-pose.pt', 'backends': ['cpu', 'onnx']}


@pytest.mark.parametrize('blocks,problem', [
    ({'keypoints': 'nose'}, 'expected a list of keypoint names'),
    ({'keypoints': ['a', 'a']}, 'names a keypoint twice'),
    ({'keypoints': ['a', '']}, 'field `keypoints[1]`'),
    ({'keypoints': ['a', 'b'], 'skeleton': [[0, 2]]}, 'outside 0..1'),
    ({'skeleton': [[0]]}, 'is not a pair'),
    ({'skeleton': [[0, True]]}, 'is not a pair'),
])
def test_pose_manifest_blocks_are_checked(blocks, problem):
    with pytest.raises(ManifestError, match=None) as info:
        model_manifest(POSE, **blocks)
    assert problem in str(info.value) and '\n' not in str(info.value)


def test_pose_blocks_belong_to_pose_manifests():
    with pytest.raises(ManifestError, match="task is 'detect'"):
        model_manifest(task='detect', keypoints=['a'])


def test_pose_keypoint_names_and_layout():
    """Default names: COCO-17 for 17; listed names settle the count; a wrong count refused."""
    task = PoseTask(model_manifest(POSE))
    task.check_model([(1, 56, 8400)], ['person'])
    assert task.names == COCO_KEYPOINTS and task.dims == 3 and task.skeleton == COCO_SKELETON
    task = PoseTask(model_manifest(POSE, keypoints=['a', 'b', 'c', 'd'], skeleton=[[0, 1]]))
    task.check_model([(1, 13, 8400)], ['person'])  # 4 + 1 + 4 x 2: no confidence
    assert (task.names, task.dims, task.skeleton) == (('a', 'b', 'c', 'd'), 2, ((0, 1),))
    other = PoseTask(model_manifest(POSE))
    other.check_model([(1, 5 + 5 * 3, 8400)], [])  # anchors outnumber values (rows: end2end.py)
    assert other.names == tuple(f'kpt_{i}' for i in range(5)) and other.skeleton == ()
    with pytest.raises(ManifestError, match=r'not a pose output \(1, 4 \+ 1 \+ 4 keypoints'):
        PoseTask(model_manifest(POSE, keypoints=['a', 'b', 'c', 'd'])).check_model(
            [(1, 56, 8400)], ['person'])
    with pytest.raises(ManifestError, match="reads the output 'output0'"):
        PoseTask(model_manifest(POSE)).check_model([(1, 56, 8400)], ['person'], ['kpts'])


def test_segment_outputs_are_checked_by_name_then_rank():
    task = SegmentationTask(model_manifest(name='seg', task='segment',
                                           weights='yolov8n-seg.pt', backends=['cpu', 'onnx']))
    labels = [f'c{i}' for i in range(80)]
    task.check_model([(1, 32, 160, 160), (1, 116, 8400)], labels)  # by rank: swapped
    assert task._positions == (1, 0)
    task.check_model([(1, 32, 160, 160), (1, 116, 8400)], labels, ['output1', 'output0'])
    assert task._positions == (1, 0)
    with pytest.raises(ManifestError, match="as a detector has: use `task: detect` for it, "
                                            'or -seg weights'):
        task.check_model([(1, 84, 8400)], labels, ['output0'])  # an exported detector
    with pytest.raises(ManifestError, match="needs outputs 'output0'.*'output1'.*'masks'"):
        task.check_model([(1, 116, 8400), (1, 32, 160, 160)], labels, ['output0', 'masks'])
    with pytest.raises(ManifestError, match='needs two outputs'):
        task.check_model([(1, 84, 8400)], labels)
    with pytest.raises(ManifestError, match='lists 80 class names but the model scores 81'):
        task.check_model([(1, 117, 8400), (1, 32, 160, 160)], labels)


def test_detect_weights_are_refused_for_a_segment_manifest(model_dir, engine_cache_dir):
    """A -seg manifest pointing at detection weights fails configure in one line."""
    from vision_nodes.loaders import ModelLoadError

    manifest = replace(resolve_manifest('yolov8n_seg'), weights='yolov8n.pt')
    with pytest.raises(ModelLoadError) as info:
        build_pipeline(manifest, 'cpu', model_dir=str(model_dir), cache_dir=engine_cache_dir)
    text = str(info.value)
    assert "yolov8n.pt': the file holds a detect model but manifest 'yolov8n_seg' has task " \
        "'segment': use `task: detect`" in text
    assert '\n' not in text and text.count('yolov8n.pt') == 1


def _confident_pairs(a: Detections, b: Detections, min_score: float = 0.5):
    """(i, j): each confident detection of ``a`` and its same-class IoU >= 0.9 match in ``b``."""
    pairs = []
    for i in np.flatnonzero(a.scores >= min_score):
        iou = pairwise_iou(a.boxes[i:i + 1], b.boxes)[0]
        overlap = np.where(b.class_ids == a.class_ids[i], iou, 0.0)
        assert overlap.max() >= 0.9, (i, a.boxes[i], b.boxes)
        pairs.append((int(i), int(overlap.argmax())))
    assert pairs
    return pairs


@pytest.fixture(scope='module')
def plain_calibration(tmp_path_factory, assets):
    """The two test images as they are: a calibration set like the frames being checked."""
    import shutil

    folder = tmp_path_factory.mktemp('plain_calibration')
    for name in IMAGES:
        shutil.copy(assets / name, folder / name)
    return folder


@pytest.mark.parametrize('task', MODELS)
def test_openvino_int8_keeps_masks_and_keypoints(pipelines, images, model_dir, engine_cache_dir,
                                                 plain_calibration, task):
    """NNCF int8 (float output tail, calibrated by the task's own preprocessing): confident
    detections, their masks (IoU >= 0.9) and keypoints (within 4 px) stay fp32's.

    Calibrated on the frames themselves: the test model's keypoint branch is seeded, not
    trained, and calibration on flipped and cropped variants (the session's calibration_dir)
    moves its int8 keypoints by up to a quarter of a person's height.
    """
    pytest.importorskip('nncf', reason='NNCF is not installed (int8 quantization)')
    calibration_dir = plain_calibration
    int8 = build_pipeline(resolve_manifest(MODELS[task]), 'openvino', model_dir=str(model_dir),
                          cache_dir=engine_cache_dir, precision='int8',
                          calibration_dir=str(calibration_dir))
    try:
        assert int8.runner.describe()['inference_type'].startswith('int8')
        assert int8.runner.output_names == pipelines[task, 'openvino'].runner.output_names
        for name in IMAGES:
            want = pipelines[task, 'openvino'].process(images[name], 'bgr8', PARAMS)
            got = int8.process(images[name], 'bgr8', PARAMS)
            for i, j in _confident_pairs(want, got):
                if task == 'segment':
                    assert mask_iou(want.mask(i), got.mask(j)) >= 0.9
                else:
                    np.testing.assert_allclose(got.keypoints[j, :, :2],
                                               want.keypoints[i, :, :2], atol=4.0)
    finally:
        int8.close()


@pytest.mark.parametrize('task', MODELS)
def test_tensorrt_engine_keeps_the_extra_outputs(fake_trt, pipelines, images, model_dir,
                                                 engine_cache_dir, task):
    """An engine built from the export names the same outputs and gives ONNX's results."""
    engine = build_pipeline(resolve_manifest(MODELS[task]), 'tensorrt',
                            model_dir=str(model_dir), cache_dir=engine_cache_dir)
    try:
        assert engine.runner.output_names == pipelines[task, 'onnx'].runner.output_names
        image = images['zidane.jpg']
        want = pipelines[task, 'onnx'].process(image, 'bgr8', PARAMS)
        got = engine.process(image, 'bgr8', PARAMS)
        np.testing.assert_allclose(got.boxes, want.boxes, atol=1e-2)
        if task == 'segment':
            assert len(got.masks) == len(want.masks) and got.shape == want.shape
            pairs = zip(result_masks(got), result_masks(want))
            assert all(mask_iou(a, b) >= 0.99 for a, b in pairs)
        else:
            assert got.keypoints.shape == want.keypoints.shape
            np.testing.assert_allclose(got.keypoints, want.keypoints, atol=1e-2)
    finally:
        engine.close()


def _full_frame_masks(coefficients, prototypes, boxes, meta):
    """Reference: Ultralytics' order on whole frames (upsample, > 0, crop, letterbox undone,
    resize to the source, > 0.5), one mask at a time."""
    nm, mh, mw = prototypes.shape
    height, width = meta.shape
    left, top, cw, ch = meta.content()
    src_h, src_w = meta.letterbox.source_shape
    out = []
    for coefficient, box in zip(coefficients, boxes):
        logits = (coefficient @ prototypes.reshape(nm, -1)).reshape(mh, mw).astype(np.float32)
        up = cv2.resize(logits, (width, height), interpolation=cv2.INTER_LINEAR) > 0
        cols, rows = np.arange(width), np.arange(height)
        up &= ((cols >= box[0]) & (cols < box[2]))[None, :]
        up &= ((rows >= box[1]) & (rows < box[3]))[:, None]
        inside = up[top:top + ch, left:left + cw].astype(np.float32)
        out.append(cv2.resize(inside, (src_w, src_h), interpolation=cv2.INTER_LINEAR) > 0.5)
    return out


@pytest.mark.parametrize('seed', range(12))
def test_box_limited_masks_equal_whole_frame_masks(seed):
    """Masks computed within their boxes equal the whole-frame computation but for ties on
    their edges (a sample exactly halfway between a mask and a background pixel rounds either
    way in floating point), for any source size, rect or square input, letterboxed or
    stretched, boxes over the border."""
    from vision_nodes.tasks.preprocess import _place
    from vision_nodes.tasks.segment import NetworkMeta, instance_masks

    rng = np.random.default_rng(seed)
    source = (int(rng.integers(40, 1300)), int(rng.integers(40, 1300)))
    shape = (640, 640) if seed % 3 == 0 else tuple(int(rng.integers(1, 21)) * 32
                                                   for _ in range(2))
    meta = NetworkMeta(_place(source[0], source[1], shape, seed % 4 != 3)[1], shape)
    count = int(rng.integers(1, 8))
    prototypes = rng.standard_normal((32, shape[0] // 4, shape[1] // 4)).astype(np.float32)
    coefficients = rng.standard_normal((count, 32)).astype(np.float32)
    corners = rng.random((count, 2, 2)) * [shape[1] + 40, shape[0] + 40] - 20
    boxes = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
    masks, kept, windows = instance_masks(coefficients, prototypes, boxes.astype(np.float32),
                                          meta)
    expected = _full_frame_masks(coefficients, prototypes, boxes, meta)
    # Each mask is held at its window's size (the window within the image): nothing outside.
    assert [m.shape for m in masks] == [(b - t, r - l) for t, b, l, r in windows.tolist()]
    assert np.all((windows >= 0) & (windows <= np.repeat(source, 2)))
    kernel = np.ones((3, 3), np.uint8)
    for mask, index in zip(whole_masks(masks, windows, source), kept):
        want = expected[index].astype(np.uint8)
        edge = cv2.dilate(want, kernel) != cv2.erode(want, kernel)
        assert not np.any((mask != expected[index]) & ~edge)


@pytest.mark.parametrize('task', MODELS)
def test_openvino_fp16_keeps_masks_and_keypoints(pipelines, images, model_dir, engine_cache_dir,
                                                 task):
    """fp16 (bf16 on CPUs that have it): confident detections, masks and keypoints stay fp32's
    (masks IoU >= 0.9, keypoints within 4 px). Skipped where the device has neither."""
    from vision_nodes.runners.base import RunnerError

    try:
        half = build_pipeline(resolve_manifest(MODELS[task]), 'openvino',
                              model_dir=str(model_dir), cache_dir=engine_cache_dir,
                              precision='fp16')
    except RunnerError as exc:
        if "cannot run precision 'fp16' here" not in str(exc):
            raise
        pytest.skip(str(exc))
    try:
        for name in IMAGES:
            want = pipelines[task, 'openvino'].process(images[name], 'bgr8', PARAMS)
            got = half.process(images[name], 'bgr8', PARAMS)
            for i, j in _confident_pairs(want, got):
                if task == 'segment':
                    assert mask_iou(want.mask(i), got.mask(j)) >= 0.9
                else:
                    np.testing.assert_allclose(got.keypoints[j, :, :2],
                                               want.keypoints[i, :, :2], atol=4.0)
    finally:
        half.close()
