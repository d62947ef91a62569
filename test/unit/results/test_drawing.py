"""Drawing (vision_nodes/drawing.py): boxes, labels with track ids, masks and skeletons land
where the results say, on a copy of the image."""

from __future__ import annotations

import numpy as np

from vision_nodes.drawing import colour, draw


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
