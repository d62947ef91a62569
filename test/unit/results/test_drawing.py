"""Drawing (vision_nodes/drawing.py): boxes, labels with track ids, masks and skeletons land
where the results say, on a copy of the image."""

from __future__ import annotations

import tracemalloc

import numpy as np

from vision_nodes.drawing import MASK_ALPHA, colour, draw, draw_classes
from vision_nodes.tasks.rotated import corners, hull


def test_boxes_masks_and_skeletons_are_drawn_on_a_copy():
    image = np.zeros((120, 160, 3), np.uint8)
    boxes = np.array([[10, 20, 60, 90], [90, 10, 150, 70]], np.float32)
    labels = np.zeros((120, 160), np.uint16)
    labels[30:80, 20:50] = 1
    keypoints = np.array([[[100, 20, 0.9], [140, 60, 0.9], [120, 40, 0.1]],
                          [[0, 0, 0], [0, 0, 0], [0, 0, 0]]], np.float32)
    out = draw(image, boxes, np.array([0.9, 0.5]), np.array([0, 1]), ['person', 'car'],
               track_ids=[7, 12], mask_labels=labels, keypoints=keypoints[::-1],
               skeleton=[(0, 1), (1, 2)])
    assert image.max() == 0 and out.shape == image.shape and out.dtype == np.uint8
    assert tuple(out[50, 10]) == colour(7)        # left edge of the first box
    assert out[55, 35].any() and tuple(out[55, 35]) != colour(7)  # tinted mask pixel
    assert out[100, 100].max() == 0               # outside everything
    assert out[40, 120].any()                     # on the skeleton line (0, 1)


def test_untracked_colours_follow_the_class_and_empty_is_a_copy():
    image = np.full((50, 50, 3), 30, np.uint8)
    out = draw(image, np.array([[5, 5, 40, 40]]), np.array([0.5]), np.array([3]))
    assert tuple(out[20, 5]) == colour(3)
    same = draw(image, np.zeros((0, 4)), np.zeros(0), np.zeros(0, np.int64))
    assert (same == image).all() and same is not image


def test_rotated_boxes_are_drawn_as_their_polygons():
    """A box turned 30 degrees: its edges are drawn, the corners of its hull are not, and
    the label sits at its topmost corner."""
    image = np.zeros((200, 200, 3), np.uint8)
    xywhr = np.array([[100, 100, 120, 50, np.radians(30)]], np.float32)
    polygon = corners(xywhr)
    out = draw(image, hull(xywhr), np.array([0.8]), np.array([2]), polygons=polygon)
    middle = np.round(polygon[0, :2].mean(axis=0)).astype(int)  # the middle of one edge
    assert tuple(out[middle[1], middle[0]]) == colour(2)
    x1, y1, x2, y2 = hull(xywhr)[0]
    assert out[int(y2) - 2, int(x1) + 2].max() == 0 and out[int(y1) + 30, int(x2) - 2].max() == 0
    top = polygon[0][polygon[0][:, 1].argmin()]
    assert tuple(out[int(top[1]) - 4, int(top[0]) + 2]) == colour(2)  # the label's box
    plain = draw(image, hull(xywhr), np.array([0.8]), np.array([2]))
    assert tuple(plain[int(y2) - 20, int(x1)]) == colour(2)  # without: the hull's rectangle


def test_classes_are_written_one_line_each_highest_first():
    image = np.zeros((120, 200, 3), np.uint8)
    out = draw_classes(image, [5, 1], [0.7, 0.2], ['a', 'b', 'c', 'd', 'e', 'bus'])
    assert image.max() == 0
    rows = np.flatnonzero(out.any(axis=(1, 2)))
    assert rows.min() < 20 and 20 < rows.max() < 60     # two lines at the top
    assert tuple(out[rows.min() + 1, 5]) == colour(5)    # the first line in class 5's colour
    assert out[80:, :].max() == 0


def _tinted(image: np.ndarray, labels: np.ndarray, keys: list[int]) -> np.ndarray:
    """The tint by its definition, in floating point: v * (1 - alpha) + colour * alpha,
    truncated, where a label (1 + index, clipped to the keys) is not 0."""
    out = image.copy()
    palette = np.zeros((len(keys) + 1, 3), np.float32)
    palette[1:] = [colour(k) for k in keys]
    index = np.clip(labels.astype(np.int64), 0, len(keys))
    where = index > 0
    out[where] = (out[where] * (1 - MASK_ALPHA) + palette[index[where]] * MASK_ALPHA
                  ).astype(np.uint8)
    return out


def test_masks_are_tinted_exactly_as_in_floating_point():
    """Every value of every channel under several colours, labels past the keys included:
    the uint8 overlay is bit for bit the floating-point one."""
    rng = np.random.default_rng(4)
    image = rng.integers(0, 256, (300, 257, 3), dtype=np.uint8)
    image[:256, 0] = np.arange(256, dtype=np.uint8)[:, None]
    labels = rng.integers(0, 9, image.shape[:2]).astype(np.uint16)
    keys = [3, 17, 40, 41, 5, 77]
    empty = np.zeros((0, 4))
    out = draw(image, empty, np.zeros(0), np.zeros(0, np.int64), track_ids=keys,
               mask_labels=labels)
    np.testing.assert_array_equal(out, _tinted(image, labels, keys))


def test_the_overlay_of_a_large_frame_allocates_about_the_picture():
    """A 24 MP frame, half of it masked by 300 detections: the drawing allocates its picture
    (3 bytes a pixel) and bands of scratch, no int64 or float copy of the frame."""
    height, width = 4000, 6000
    image = np.full((height, width, 3), 120, np.uint8)
    labels = np.zeros((height, width), np.uint16)
    labels[:, :width // 2] = (np.arange(width // 2) % 300 + 1).astype(np.uint16)
    keys = list(range(300))
    tracemalloc.start()
    try:
        out = draw(image[:, :, ::-1], np.zeros((0, 4)), np.zeros(0), np.zeros(0, np.int64),
                   track_ids=keys, mask_labels=labels)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert tuple(out[0, 0]) != (120, 120, 120) and tuple(out[0, -1]) == (120, 120, 120)
    assert peak < 3 * height * width + (16 << 20), peak
