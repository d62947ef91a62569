"""A dense segmentation frame's memory is bounded by the frame, not by detections x pixels.

Synthetic raw outputs of a -seg model (300 detections that NMS keeps, masks that are blobs)
go through the task's own post-processing for a large source image: each mask must be held
at its window's size (its box and a pixel around it), and the frame's whole path, masks,
label image and drawn overlay, must stay within a few bytes per image pixel. Whole-image
masks took 300 x H x W bytes (issue 37: 0.7 -> 4.7 GB RSS for one 12 MP frame).
"""

from __future__ import annotations

import tracemalloc

import cv2
import numpy as np

from model_manifests import model_manifest
from vision_nodes.drawing import draw
from vision_nodes.tasks.detect import DetectionParams
from vision_nodes.tasks.segment import SegmentationTask

#: 300 detections of 32 x 32 network pixels on a 20 x 15 grid: the 640 x 480 input once.
COLUMNS, ROWS, SIDE = 20, 15, 32
PARAMS = DetectionParams(0.01, 0.45, 300)


def _task() -> SegmentationTask:
    return SegmentationTask(model_manifest(name='seg', task='segment', weights='yolov8n-seg.pt',
                                           backends=['onnx']))


def _outputs(shape: tuple[int, int], classes: int = 80, masks: int = 32) -> list[np.ndarray]:
    """Raw outputs for a ``shape`` input: one detection per grid cell, classes in turn."""
    rng = np.random.default_rng(0)
    height, width = shape
    anchors = sum((height // s) * (width // s) for s in (8, 16, 32))
    count = COLUMNS * ROWS
    index = np.arange(count)
    pred = np.zeros((1, 4 + classes + masks, anchors), np.float32)
    pred[0, 0, :count] = SIDE / 2 + SIDE * (index % COLUMNS)
    pred[0, 1, :count] = SIDE / 2 + SIDE * (index // COLUMNS)
    pred[0, 2:4, :count] = SIDE
    pred[0, 4 + index % classes, index] = 0.5
    pred[0, 4 + classes:, :count] = rng.standard_normal((masks, count))
    protos = rng.standard_normal((masks, height // 4, width // 4)).astype(np.float32)
    protos = np.stack([cv2.GaussianBlur(p, (0, 0), 3) * 3 for p in protos])
    return [pred, protos[None]]


def _frame(task: SegmentationTask, source: tuple[int, int]):
    """(outputs, meta) of a frame of ``source`` (height, width) pixels."""
    _, meta = task.preprocess(np.zeros(source + (3,), np.uint8), 'bgr8', (480, 640))
    return _outputs(meta.shape), meta


def test_masks_are_held_at_their_windows_size():
    """300 masks of a 12 MP frame: each mask has its window's shape, each window is its box
    and less than a network pixel around it, so the masks together take the boxes' pixels
    (about the frame once here), never 300 frames; the label image is the one that painting
    whole-image masks gives."""
    source = (3000, 4000)
    task = _task()
    outputs, meta = _frame(task, source)
    result = task.postprocess(outputs, meta, PARAMS)
    assert len(result) > 250 and result.shape == source
    windows = result.windows
    assert [m.shape for m in result.masks] == [(b - t, r - l) for t, b, l, r in windows.tolist()]
    margin = 2 + 2 * source[1] / 640  # a network pixel and a source pixel on each side
    boxes = result.boxes
    assert np.all(windows[:, 0] >= np.floor(boxes[:, 1]) - margin)
    assert np.all(windows[:, 1] <= np.ceil(boxes[:, 3]) + margin)
    assert np.all(windows[:, 2] >= np.floor(boxes[:, 0]) - margin)
    assert np.all(windows[:, 3] <= np.ceil(boxes[:, 2]) + margin)
    total = sum(m.nbytes for m in result.masks)
    assert total < 1.5 * source[0] * source[1], total
    labels = np.zeros(source, np.uint16)
    for i in np.lexsort((-np.arange(len(result)), result.scores)):
        labels[result.mask(i)] = i + 1
    np.testing.assert_array_equal(result.label_image(), labels)
    picked = result.take(np.array([5, 2]), np.array([7, 9]))
    assert picked.masks[0] is result.masks[5] and picked.windows.tolist() == [
        windows[5].tolist(), windows[2].tolist()]
    assert picked.track_ids.tolist() == [7, 9]


def test_a_dense_frame_takes_a_few_bytes_per_pixel():
    """Post-processing, the label image and the drawn overlay of 300 detections on a 6 MP
    frame allocate at their peak (tracemalloc, results kept) under 10 bytes per image pixel:
    the overlay (3), the label image (2), the masks (about 1) and bands of scratch."""
    source = (2000, 3000)
    task = _task()
    outputs, meta = _frame(task, source)
    image = np.full(source + (3,), 90, np.uint8)
    tracemalloc.start()
    try:
        result = task.postprocess(outputs, meta, PARAMS)
        labels = result.label_image()
        picture = draw(image[:, :, ::-1], result.boxes, result.scores, result.class_ids,
                       mask_labels=labels)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(result) > 250 and picture.shape == image.shape
    assert (labels > 0).mean() > 0.2  # the masks cover a good part of the frame
    assert peak < 10 * source[0] * source[1], peak
