"""NMS-free (end-to-end) YOLO26 models: detect, segment and pose without NMS, on every backend.

The YOLO26n checkpoints are built here from Ultralytics' yaml with seeded weights
(test/yolo26_weights.py): their one-to-one head ends in a top-k, so the network's first
output is rows (1, 300, 6 + extra), not anchors. Parity with Ultralytics' own
``predict(nms=False)`` on the same ``.pt`` (same classes, boxes IoU >= 0.9, masks IoU >= 0.9
in source pixels, keypoints within 2 px) on PyTorch (cpu), ONNX Runtime and OpenVINO fp32,
with rect inference; NMS is never run for this layout; outputs of neither layout are refused
at configure in one line.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip('torch', reason='PyTorch is not installed (the reference)')
pytest.importorskip('onnxruntime', reason='ONNX Runtime is not installed')

import cv2  # noqa: E402

from model_manifests import model_manifest  # noqa: E402
from ultralytics_reference import (mask_iou, match_reference, predict, result_masks,  # noqa: E402,E501
                                   source_masks)
from vision_nodes.manifest import ManifestError  # noqa: E402
from vision_nodes.pipeline import build_pipeline  # noqa: E402
from vision_nodes.stage_times import FrameClock, timing  # noqa: E402
from vision_nodes.tasks import decode_buffers  # noqa: E402
from vision_nodes.tasks import detect as detect_module  # noqa: E402
from vision_nodes.tasks.detect import DetectionParams, DetectionTask  # noqa: E402
from vision_nodes.tasks.end2end import decode_rows  # noqa: E402
from vision_nodes.tasks.instances import COCO_KEYPOINTS, PoseResult, SegmentResult  # noqa: E402
from vision_nodes.tasks.pose import PoseTask  # noqa: E402
from vision_nodes.tasks.segment import SegmentationTask  # noqa: E402
from yolo26_weights import yolo26_pt  # noqa: E402

TASKS = ('detect', 'segment', 'pose')
BACKENDS = ['cpu', 'onnx', 'openvino']
#: Per image, a confidence threshold well inside a gap of the seeded models' scores (bus.jpg:
#: 8 detections, zidane.jpg: 4), so backends' rounding never moves a detection across it.
THRESHOLDS = {'bus.jpg': 0.23, 'zidane.jpg': 0.0537}
#: The rows of a one-to-one head: x1, y1, x2, y2, score, class, then the task's values.
ROWS = {'detect': (1, 300, 6), 'segment': (1, 300, 38), 'pose': (1, 300, 57)}
#: The manifest fields of the seeded YOLO26n checkpoints (name, task, weights per model).
YOLO26 = {'architecture': 'ultralytics', 'backends': ['cpu', 'onnx', 'openvino', 'tensorrt']}
#: The manifest fields of Ultralytics' own NMS-free exports (static 640 x 640: no rect).
EXPORTED = {'architecture': 'onnx', 'rect': False, 'backends': ['onnx', 'openvino']}


@pytest.fixture(scope='module')
def weights(tmp_path_factory):
    folder = tmp_path_factory.mktemp('yolo26_weights')
    return {task: yolo26_pt(folder / f'yolo26n-{task}.pt', task) for task in TASKS}


@pytest.fixture(scope='module')
def images(assets) -> dict[str, np.ndarray]:
    return {name: cv2.imread(str(assets / name)) for name in THRESHOLDS}


@pytest.fixture(scope='module')
def references(weights, images):
    found = {}
    for task in TASKS:
        for name, image in images.items():
            ref = predict(weights[task], image, conf=THRESHOLDS[name], nms=False)
            everything = predict(weights[task], image, conf=0.0, nms=False).boxes.conf.numpy()
            assert np.abs(everything - THRESHOLDS[name]).min() > 1e-3  # the gap still holds
            found[task, name] = ref
    return found


@pytest.fixture(scope='module')
def pipelines(weights, engine_cache_dir):
    built = {}
    for task in TASKS:
        manifest = model_manifest(YOLO26, name=f'yolo26n_{task}', task=task,
                                  weights=weights[task])
        for backend in BACKENDS:
            if backend == 'openvino':
                pytest.importorskip('openvino', reason='OpenVINO is not installed')
            built[task, backend] = build_pipeline(manifest, backend, cache_dir=engine_cache_dir)
    yield built
    for pipeline in built.values():
        pipeline.close()


def _params(name: str) -> DetectionParams:
    return DetectionParams(THRESHOLDS[name], 0.45, 300)


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('name', THRESHOLDS)
@pytest.mark.parametrize('task', TASKS)
def test_end2end_matches_ultralytics(pipelines, references, images, task, backend, name):
    """Boxes (IoU >= 0.9, same class), masks (IoU >= 0.9) and keypoints (2 px) as predict's."""
    pipeline = pipelines[task, backend]
    image = images[name]
    assert pipeline.rect and pipeline.input_shape(image.shape[:2]) != (640, 640)
    ours = pipeline.process(image, 'bgr8', _params(name))
    ref = references[task, name]
    assert len(ref) >= 4
    order = match_reference(ours, ref)
    np.testing.assert_allclose(ours.scores[order], ref.boxes.conf.numpy(), atol=1e-3)
    if task == 'segment':
        assert isinstance(ours, SegmentResult)
        assert ours.shape == image.shape[:2] and len(ours.masks) == len(ours)
        masks, expected = result_masks(ours), source_masks(ref)
        for j, i in enumerate(order):
            assert mask_iou(masks[i], expected[j]) >= 0.9, (j, ref.boxes.cls[j])
    if task == 'pose':
        assert isinstance(ours, PoseResult) and ours.names == COCO_KEYPOINTS
        expected = ref.keypoints.data.numpy()
        for j, i in enumerate(order):
            np.testing.assert_allclose(ours.keypoints[i, :, :2], expected[j, :, :2], atol=2.0)
            np.testing.assert_allclose(ours.keypoints[i, :, 2], expected[j, :, 2], atol=0.01)


@pytest.mark.parametrize('task', TASKS)
def test_the_one_to_one_head_is_run_and_exported(pipelines, task):
    """Every backend runs the head's NMS-free rows (its own top-k), named as Ultralytics'."""
    for backend in BACKENDS:
        pipeline = pipelines[task, backend]
        assert pipeline.task.end2end is True
        assert pipeline.runner.output_shapes[0] == ROWS[task]
        if backend != 'cpu':
            names = ['output0', 'output1'] if task == 'segment' else ['output0']
            assert pipeline.runner.output_names == names


@pytest.mark.parametrize('task', TASKS)
def test_nms_is_not_run_for_end2end_rows(pipelines, images, monkeypatch, task):
    """Decoding rows never calls NMS; the YOLOv8-style layout does (the patch is effective)."""
    def refuse(*_args, **_kwargs):
        raise AssertionError('NMS ran')

    monkeypatch.setattr(decode_buffers, 'nms', refuse)
    result = pipelines[task, 'cpu'].process(images['bus.jpg'], 'bgr8', _params('bus.jpg'))
    assert len(result) == 8
    anchors = np.zeros((1, 84, 8400), np.float32)
    anchors[0, :4, 0] = [10, 10, 4, 4]
    anchors[0, 4, 0] = 0.9
    with pytest.raises(AssertionError, match='NMS ran'):
        detect_module.decode(anchors, _params('bus.jpg'))


def test_a_batch_of_frames_gives_each_frame_its_own_rows(pipelines, weights, images,
                                                         engine_cache_dir):
    """Several cameras in one run (dynamic batch): each frame's rows as when run alone."""
    manifest = model_manifest(YOLO26, name='yolo26n_segment', task='segment',
                              weights=weights['segment'])
    batched = build_pipeline(manifest, 'onnx', cache_dir=engine_cache_dir, max_batch=2)
    try:
        image = images['bus.jpg']
        frames = [(image, 'bgr8'), (np.ascontiguousarray(image[:, ::-1]), 'bgr8')]
        clock = FrameClock()
        with timing(clock):  # the batcher's clock: the batch's stages are marked on it
            together = batched.process_batch(frames, _params('bus.jpg'))
        assert list(clock.spent) == ['preprocess', 'inference', 'postprocess']
        assert all(seconds > 0 for seconds in clock.spent.values())
        for (frame, _), got in zip(frames, together):
            want = pipelines['segment', 'onnx'].process(frame, 'bgr8', _params('bus.jpg'))
            assert len(got) == len(want) >= 1
            np.testing.assert_allclose(got.boxes, want.boxes, atol=1e-2)
            pairs = zip(result_masks(got), result_masks(want))
            assert all(mask_iou(a, b) >= 0.99 for a, b in pairs)
    finally:
        batched.close()


def test_decode_rows_keeps_order_threshold_and_cap():
    rows = np.zeros((1, 5, 8), np.float32)
    rows[0, :, 4] = [0.9, 0.8, 0.3, 0.7, 0.1]  # a row below the threshold between others
    rows[0, :, 5] = [3, 1, 2, 0, 4]
    rows[0, :, :4] = np.arange(20).reshape(5, 4)
    rows[0, :, 6:] = np.arange(10).reshape(5, 2)
    boxes, scores, classes, kept = decode_rows(rows, 0.5, 300)
    assert kept.tolist() == [0, 1, 3] and classes.tolist() == [3, 1, 0]
    assert scores.dtype == np.float32 and boxes.dtype == np.float32
    np.testing.assert_array_equal(boxes[2], [12, 13, 14, 15])
    assert decode_rows(rows, 0.5, 2)[3].tolist() == [0, 1]
    assert decode_rows(rows, 0.95, 300)[3].tolist() == []


def _task(cls, **extra):
    task = {DetectionTask: 'detect', SegmentationTask: 'segment', PoseTask: 'pose'}[cls]
    return cls(model_manifest(task=task, **extra))


@pytest.mark.parametrize('cls,shapes,names,problem', [
    (DetectionTask, [(1, 300, 7)], None,
     "outputs 1x300x7, not a detector output: (1, 4 + classes, anchors) as YOLOv8-style "
     'models give before NMS, or (1, rows, 6) as NMS-free YOLO26 heads give'),
    (SegmentationTask, [(1, 300, 39), (1, 32, 160, 160)], ['output0', 'output1'],
     'or NMS-free rows (1, rows, 6 + masks) and prototypes'),
    (PoseTask, [(1, 300, 58)], ['output0'],
     'nor NMS-free rows (1, rows, 6 + 17 keypoints (`keypoints`) x 3)'),
])
def test_outputs_of_neither_layout_are_refused_in_one_line(cls, shapes, names, problem):
    extra = {'keypoints': list(COCO_KEYPOINTS)} if cls is PoseTask else {}
    with pytest.raises(ManifestError) as info:
        _task(cls, **extra).check_model(shapes, [f'c{i}' for i in range(80)], names)
    text = str(info.value)
    assert problem in text and '\n' not in text and text.startswith("model 'm': ")


def test_layouts_are_told_apart_by_shape():
    """Rows for 6 + extra values; anchors otherwise (their count is 21 per 32 x 32 pixels)."""
    labels = [f'c{i}' for i in range(80)]
    task = _task(DetectionTask)
    task.check_model([(1, 300, 6)], labels)
    assert task.end2end is True and task.decodes_device_outputs is False
    task.check_model([(1, 84, 8400)], labels)
    assert task.end2end is False
    segment = _task(SegmentationTask)
    segment.check_model([(1, 300, 38), (1, 32, 160, 120)], labels, ['output0', 'output1'])
    assert segment.end2end is True
    segment.check_model([(1, 116, 6300), (1, 32, 160, 120)], labels, ['output0', 'output1'])
    assert segment.end2end is False
    pose = _task(PoseTask)
    pose.check_model([(1, 300, 57)], ['person'], ['output0'])
    assert pose.end2end is True and pose.names == COCO_KEYPOINTS and pose.dims == 3
    two_d = _task(PoseTask, keypoints=['a', 'b', 'c', 'd'])
    two_d.check_model([(1, 300, 14)], ['person'], ['output0'])
    assert two_d.end2end is True and two_d.dims == 2
    pose.check_model([(1, 56, 8400)], ['person'], ['output0'])
    assert pose.end2end is False


def test_a_small_input_is_anchors_when_the_class_count_says_so():
    """At 32 x 32 a YOLOv8-style output has 21 anchors, fewer than its rows: (1, 84, 21) has
    the shape of NMS-free rows. The known class count decides (it was refused as "not a
    detector output"; pose also needs its keypoints listed); without, the larger dimension
    still does."""
    labels = [f'c{i}' for i in range(80)]
    task = _task(DetectionTask)
    task.check_model([(1, 84, 21)], labels)
    assert task.end2end is False
    with pytest.raises(ManifestError, match='outputs 1x84x21, not a detector output'):
        _task(DetectionTask).check_model([(1, 84, 21)], [])
    segment = _task(SegmentationTask)
    segment.check_model([(1, 116, 21), (1, 32, 8, 8)], labels, ['output0', 'output1'])
    assert segment.end2end is False
    pose = _task(PoseTask, keypoints=list(COCO_KEYPOINTS))
    pose.check_model([(1, 56, 21)], ['person'], ['output0'])
    assert pose.end2end is False and pose.names == COCO_KEYPOINTS


def test_yolov8n_exported_at_32_pixels_detects(model_dir, engine_cache_dir, bus_bgr):
    """The real export at input_size 32 (output 1x84x21) configures and runs on ONNX Runtime."""
    manifest = model_manifest(name='yolov8n_32', input_size=32, weights=model_dir / 'yolov8n.pt',
                              backends=['onnx'])
    model = build_pipeline(manifest, 'onnx', cache_dir=engine_cache_dir, precision='fp32')
    try:
        assert model.task.end2end is False
        tensor, _ = model.task.preprocess(bus_bgr, 'bgr8', (32, 32))
        assert np.shape(model.runner.infer(tensor)[0]) == (1, 84, 21)
        dets = model.process(bus_bgr, 'bgr8', DetectionParams(0.01, 0.45, 300))
        assert dets.boxes.shape[1] == 4 and np.all(dets.class_ids < 80)
    finally:
        model.close()


@pytest.fixture(scope='module')
def ultralytics_onnx(weights):
    """Ultralytics' own NMS-free ONNX exports (``nms=False``, static 640 x 640) of the .pt."""
    from vision_nodes.loaders.ultralytics import import_ultralytics

    yolo = import_ultralytics().YOLO
    options = dict(format='onnx', nms=False, imgsz=640, verbose=False)
    return {task: yolo(str(weights[task])).export(**options) for task in ('detect', 'segment')}


@pytest.mark.parametrize('task', ('detect', 'segment'))
def test_an_ultralytics_nms_free_onnx_runs_like_its_predict(
        ultralytics_onnx, images, engine_cache_dir, task):
    """The user's own NMS-free export: rows recognised by shape, as Ultralytics reads it."""
    path = ultralytics_onnx[task]
    manifest = model_manifest(EXPORTED, name=f'yolo26n_{task}_onnx', task=task, weights=path)
    pipeline = build_pipeline(manifest, 'onnx', cache_dir=engine_cache_dir)
    try:
        assert pipeline.task.end2end is True and len(pipeline.labels) == 80
        image = images['bus.jpg']
        ours = pipeline.process(image, 'bgr8', _params('bus.jpg'))
        ref = predict(path, image, conf=THRESHOLDS['bus.jpg'])
        order = match_reference(ours, ref)
        if task == 'segment':
            masks, expected = result_masks(ours), source_masks(ref)
            assert all(mask_iou(masks[i], expected[j]) >= 0.9 for j, i in enumerate(order))
    finally:
        pipeline.close()


def test_openvino_refuses_an_ultralytics_nms_free_seg_onnx_in_one_line(
        ultralytics_onnx, engine_cache_dir):
    """OpenVINO cannot convert it (its rows are gathered from slices): one line, the fix."""
    pytest.importorskip('openvino', reason='OpenVINO is not installed')
    from vision_nodes.loaders import ModelLoadError

    manifest = model_manifest(EXPORTED, name='yolo26n_segment_onnx', task='segment',
                              weights=ultralytics_onnx['segment'])
    with pytest.raises(ModelLoadError) as info:
        build_pipeline(manifest, 'openvino', cache_dir=engine_cache_dir)
    text = str(info.value)
    assert 'cannot convert this ONNX model' in text and 'give the manifest the .pt' in text
    assert '\n' not in text and len(text) < 600


@pytest.mark.parametrize('task', TASKS)
def test_tensorrt_engine_runs_the_rows(fake_trt, pipelines, weights, images, engine_cache_dir,
                                       task):
    """An engine built from the export gives ONNX Runtime's detections, masks, keypoints."""
    manifest = model_manifest(YOLO26, name=f'yolo26n_{task}', task=task, weights=weights[task])
    engine = build_pipeline(manifest, 'tensorrt', cache_dir=engine_cache_dir)
    try:
        assert engine.task.end2end is True
        image = images['bus.jpg']
        want = pipelines[task, 'onnx'].process(image, 'bgr8', _params('bus.jpg'))
        got = engine.process(image, 'bgr8', _params('bus.jpg'))
        np.testing.assert_allclose(got.boxes, want.boxes, atol=1e-2)
        if task == 'segment':
            pairs = zip(result_masks(got), result_masks(want))
            assert all(mask_iou(a, b) >= 0.99 for a, b in pairs)
        if task == 'pose':
            np.testing.assert_allclose(got.keypoints, want.keypoints, atol=1e-2)
    finally:
        engine.close()
