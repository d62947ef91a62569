"""The host decode on reused buffers: bit for bit a fresh set's decode, frame after frame."""

from __future__ import annotations

import threading

import cv2
import numpy as np
import pytest

from vision_nodes.tasks import resolve_manifest
from vision_nodes.parallel import map_frames
from vision_nodes.pipeline import build_pipeline
from vision_nodes.tasks.decode_buffers import DecodeBuffers, PerThreadBuffers
from vision_nodes.tasks.detect import MAX_NMS_CANDIDATES, DetectionParams, decode_frames
from vision_nodes.tasks.instances import SegmentResult
from vision_nodes.tasks.nms import NmsScratch, nms

PARAMS = (DetectionParams(0.25, 0.45, 300), DetectionParams(0.01, 0.7, 300),
          DetectionParams(0.001, 0.45, 20))


def decode_anchors(out, params, classes=None, buffers=None) -> tuple:
    """One frame's (detections, anchors), in fresh buffers when ``buffers`` is None."""
    return decode_frames(out, params, classes, buffers)[0]


def _flood(seed: int, anchors: int, classes: int = 80, extra: int = 0,
           dtype: type = np.float32) -> np.ndarray:
    """A (1, 4 + classes + extra, anchors) output with many overlapping candidates."""
    rng = np.random.default_rng(seed)
    out = np.empty((1, 4 + classes + extra, anchors), np.float32)
    out[0, 0:2] = rng.uniform(0, 640, (2, anchors))
    out[0, 2:4] = rng.uniform(4, 200, (2, anchors))
    out[0, 4:] = rng.uniform(0, 1, (classes + extra, anchors)) ** 4
    twins = out[0, :, 1::9]
    twins[...] = out[0, :, 0::9][:, :twins.shape[1]]  # anchors tied in box and scores
    return out.astype(dtype)


def _assert_same_arrays(*pairs: tuple[np.ndarray, np.ndarray]) -> None:
    for x, y in pairs:
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


def _assert_same(fresh: tuple, reused: tuple) -> None:
    """Same (detections, anchors), bit for bit."""
    (a, a_anchors), (b, b_anchors) = fresh, reused
    _assert_same_arrays((a.boxes, b.boxes), (a.scores, b.scores), (a.class_ids, b.class_ids),
                        (a_anchors, b_anchors))


@pytest.fixture(scope='module')
def real_outputs(model_dir, engine_cache_dir, assets) -> list[np.ndarray]:
    """YOLOv8n's raw outputs (ONNX Runtime) for bus.jpg and zidane.jpg: rect and square."""
    model = build_pipeline(resolve_manifest('yolov8n'), 'onnx', model_dir=str(model_dir),
                           cache_dir=engine_cache_dir, precision='fp32')
    outputs = []
    try:
        for name in ('bus.jpg', 'zidane.jpg'):
            image = cv2.imread(str(assets / name))
            for shape in (model.input_shape(image.shape[:2]), (640, 640)):
                model.runner.prepare_shape(shape)
                tensor, _ = model.task.preprocess(image, 'bgr8', shape)
                outputs.append(np.array(model.runner.infer(tensor)[0]))
    finally:
        model.close()
    assert len({out.shape for out in outputs}) == 3  # 6300, 8400 and 5040 anchors
    return outputs


def test_reused_buffers_decode_real_frames_of_changing_shape_exactly(real_outputs) -> None:
    """Frames of three anchor counts, back and forth: every result is the fresh decode's."""
    buffers = DecodeBuffers()
    kept = []
    for params in PARAMS:
        for out in real_outputs + real_outputs[::-1]:
            fresh = decode_anchors(out, params)
            reused = decode_anchors(out, params, buffers=buffers)
            _assert_same(fresh, reused)
            kept.append((fresh, reused))
    assert any(len(fresh[0]) > 50 for fresh, _ in kept)
    for fresh, reused in kept:  # nothing returned is overwritten by a later frame
        _assert_same(fresh, reused)


@pytest.mark.parametrize('dtype', [np.float32, np.float16])
def test_reused_buffers_decode_synthetic_floods_exactly(dtype) -> None:
    """Floods past the NMS candidate bound, extra rows, empty frames, another dtype."""
    buffers = DecodeBuffers()
    frames = [(_flood(0, 8400, dtype=dtype), None), (_flood(1, 600, 3, 32, dtype), 3),
              (np.zeros((1, 84, 8400), dtype), None), (_flood(2, 8400, dtype=dtype), None),
              (_flood(3, 8400, 1, 51, dtype), 1), (_flood(4, 5040, dtype=dtype), None)]
    floods = 0
    for params in PARAMS:
        for out, classes in frames:
            fresh = decode_anchors(out, params, classes)
            _assert_same(fresh, decode_anchors(out, params, classes, buffers))
            pred = out[0, 4:4 + (classes or 80)]
            floods += int((pred.max(axis=0) > params.confidence).sum() > MAX_NMS_CANDIDATES)
    assert floods


def test_same_shape_frames_reuse_the_buffers(real_outputs) -> None:
    """A second frame of the same shape allocates nothing: neither arrays nor NMS scratch."""
    buffers = DecodeBuffers()
    params = DetectionParams(0.01, 0.45, 300)
    first, again = real_outputs[0], real_outputs[0] + np.float32(0)
    decode_anchors(first, params, buffers=buffers)
    arrays = {name: value for name, value in vars(buffers).items()
              if isinstance(value, np.ndarray)}
    counts = (buffers.allocations, buffers.nms_scratch.allocations)
    assert counts[0] == 1 and counts[1] > 0 and arrays
    decode_anchors(again, params, buffers=buffers)
    decode_anchors(first, DetectionParams(0.25, 0.45, 300), buffers=buffers)
    assert (buffers.allocations, buffers.nms_scratch.allocations) == counts
    assert all(getattr(buffers, name) is value for name, value in arrays.items())
    decode_anchors(real_outputs[1], params, buffers=buffers)  # another anchor count
    assert buffers.allocations == counts[0] + 1


def test_each_thread_decodes_on_its_own_buffers(real_outputs) -> None:
    """Decodes side by side (a batch on the frame pool) each get their thread's buffers."""
    per_thread = PerThreadBuffers()
    seen: dict[int, DecodeBuffers] = {}

    def work(out: np.ndarray) -> tuple:
        buffers = per_thread.get()
        assert seen.setdefault(threading.get_ident(), buffers) is buffers
        return decode_anchors(out, PARAMS[1], buffers=buffers)

    frames = real_outputs * 4
    for fresh, reused in zip([decode_anchors(out, PARAMS[1]) for out in frames],
                             map_frames(work, frames)):
        _assert_same(fresh, reused)
    assert len({id(b) for b in seen.values()}) == len(seen)


def test_a_task_decoding_on_several_threads_at_once_gives_each_frame_its_own(
        real_outputs) -> None:
    """The batcher's workers run one task's postprocess side by side: no frame sees another's."""
    from concurrent.futures import ThreadPoolExecutor

    from vision_nodes.tasks.detect import DetectionTask
    from vision_nodes.tasks.preprocess import LetterboxMeta

    task = DetectionTask(resolve_manifest('yolov8n'))
    params = PARAMS[1]
    meta = LetterboxMeta(gain=(1.0, 1.0), pad=(0.0, 0.0), source_shape=(640, 640))
    frames = real_outputs * 6
    expected = [decode_anchors(out, params)[0] for out in frames]
    for dets in expected:
        meta.to_source(dets.boxes)
    barrier = threading.Barrier(3)

    def work(out: np.ndarray):
        barrier.wait(timeout=60)  # start together, so the decodes overlap
        return task.postprocess([out], meta, params)

    with ThreadPoolExecutor(3) as pool:
        for start in range(0, len(frames), 3):
            got = list(pool.map(work, frames[start:start + 3]))
            for want, dets in zip(expected[start:start + 3], got):
                _assert_same_arrays((want.boxes, dets.boxes), (want.scores, dets.scores),
                                    (want.class_ids, dets.class_ids))


@pytest.mark.parametrize('iou', [0.3, 0.5, 0.7])
@pytest.mark.parametrize('count,chunk', [(0, 512), (1, 512), (40, 512), (700, 512),
                                         (2500, 512), (300, 7)])
def test_nms_on_a_used_scratch_equals_a_fresh_one(count: int, chunk: int, iou: float) -> None:
    rng = np.random.default_rng(count)
    xy = rng.uniform(0, 300, (count, 2))
    boxes = np.concatenate([xy, xy + rng.uniform(2, 90, (count, 2))], 1).astype(np.float32)
    boxes[1::5] = boxes[::5][:boxes[1::5].shape[0]]  # identical boxes
    scores = rng.uniform(0, 1, count).astype(np.float32).round(2)  # ties
    scratch = NmsScratch()
    nms(boxes[::-1].copy(), scores, iou, None, 3, scratch=scratch)  # other sizes first
    for max_keep in (None, 10):
        np.testing.assert_array_equal(
            nms(boxes, scores, iou, max_keep, chunk, scratch=scratch),
            nms(boxes, scores, iou, max_keep, chunk))


def _label_image_painted(result: SegmentResult) -> np.ndarray:
    """The label image painted one mask at a time, lowest score first (the definition)."""
    labels = np.zeros(result.shape, dtype=np.uint16)
    for i in np.lexsort((-np.arange(len(result)), result.scores)):
        labels[result.mask(i)] = i + 1
    return labels


@pytest.mark.parametrize('count', [0, 1, 7, 40])
def test_label_image_is_the_painted_one(count: int) -> None:
    rng = np.random.default_rng(count)
    masks = rng.random((count, 60, 80)) > 0.6
    scores = rng.choice([0.3, 0.5, 0.9], count).astype(np.float32)  # ties: lower index wins
    result = SegmentResult(np.zeros((count, 4), np.float32), scores,
                           np.zeros(count, np.int64), masks)
    labels = result.label_image()
    assert labels.dtype == np.uint16 and labels.shape == (60, 80)
    np.testing.assert_array_equal(labels, _label_image_painted(result))
    # With windows (each mask empty outside its own), only they are read: the same image.
    corners = np.sort(rng.integers(0, [[61, 61, 81, 81]], (count, 4)).reshape(count, 2, 2), 2)
    windows = corners.reshape(count, 4)
    for mask, (top, bottom, left, right) in zip(masks, windows):
        inside = np.zeros_like(mask)
        inside[top:bottom, left:right] = True
        mask &= inside
    windowed = SegmentResult(result.boxes, scores, result.class_ids, masks, windows)
    assert all(m.shape == (b - t, r - l) for m, (t, b, l, r) in zip(windowed.masks, windows))
    np.testing.assert_array_equal(windowed.label_image(), _label_image_painted(result))
    picked = windowed.select(np.arange(count)[::-1])
    np.testing.assert_array_equal(picked.windows, windows[::-1])
